"""The benchmark harness of grail_duckdb, outside the installed package.

Run it from a checkout: ``python -m benchmarks run`` (the bench: builds, query sets, the
baselines and the SQL paths), ``python -m benchmarks scale`` (generated graphs at scale:
Parquet -> build -> save -> load -> pairs), ``python -m benchmarks sql`` (the SQL paths at
any size), ``python -m benchmarks layouts`` (query key layouts and the per-chunk path),
``python -m benchmarks first-run`` (a fresh install's first demo, build and query, warm-up),
``python -m benchmarks paths`` (hops, paths, hop-bounded reachability and reach counts against
issue 42's targets and the recursive CTE), ``python -m benchmarks append`` (new papers appended
without a rebuild, against the rebuilt index; the freshness check after an INSERT) and
``python -m benchmarks docs`` (docs/benchmarks.md from the committed results).
docs/benchmarks.md says how each figure there was produced.
"""
