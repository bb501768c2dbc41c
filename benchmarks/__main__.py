"""``python -m benchmarks run|scale|sql|layouts|first-run|paths|append|docs``: :mod:`benchmarks`."""
from __future__ import annotations

import argparse
import os
import sys

# the benches time the compiled kernels: none runs a small call's Python source instead
# (``first-run`` measures the default apart, in processes of its own)
os.environ.setdefault("GRAIL_DUCKDB_JIT", "compile")

from . import append, bench, docs, first_run, layouts, paths, scale, sql_paths  # noqa: E402

PROG = "python -m benchmarks"


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m benchmarks``."""
    top = argparse.ArgumentParser(prog=PROG, description=__doc__.split(":")[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="the bench: build phases, query sets, baselines, SQL paths")
    bench.add_arguments(p).set_defaults(func=bench.run, bench_prog=f"{PROG} run")
    p = sub.add_parser("scale", help="generated graphs at scale: Parquet -> build -> save -> "
                                     "load -> random pairs, memory per phase")
    scale.add_arguments(p).set_defaults(func=scale.run)
    p = sub.add_parser("sql", help="the SQL paths at any number of pairs")
    sql_paths.add_arguments(p).set_defaults(func=sql_paths.run)
    p = sub.add_parser("layouts", help="query key layouts against int64, and the per-chunk "
                                       "path against the identity UDF")
    layouts.add_arguments(p).set_defaults(func=layouts.run)
    p = sub.add_parser("first-run", help="the first run of a fresh install: the demo, a small "
                                          "build and query, warm_up, cold and cached")
    first_run.add_arguments(p).set_defaults(func=first_run.run)
    p = sub.add_parser("paths", help="hops, reaches_path, reaches_within and reach counts "
                                     "against the targets and DuckDB's recursive CTE")
    paths.add_arguments(p).set_defaults(func=paths.run)
    p = sub.add_parser("append", help="living data: new papers appended to an index without a "
                                      "rebuild, against the rebuilt index; the freshness check "
                                      "after an INSERT")
    append.add_arguments(p).set_defaults(func=append.run)
    p = sub.add_parser("docs", help="write docs/benchmarks.md from benchmarks/results/")
    docs.add_arguments(p).set_defaults(func=docs.run)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
