"""Tooling around the engine: edge-file readers, graph generators, the dataset catalogue, query
workloads, the benchmark and the command line (``python -m grail_duckdb``)."""
