"""Around the engine, for users: edge-file readers (Parquet, CSV/TSV, SNAP edge lists,
``.gra``), the seeded graph generators, the demo's example analyses and the command line
(``python -m grail_duckdb build|query|demo``). The benchmark lives outside the package, in
the repository's ``benchmarks/``."""
