"""``python -m benchmarks run|scale|sql|layouts|docs``: see :mod:`benchmarks`."""
from __future__ import annotations

import argparse
import sys

from . import bench, docs, layouts, scale, sql_paths

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
    p = sub.add_parser("docs", help="write docs/benchmarks.md from benchmarks/results/")
    docs.add_arguments(p).set_defaults(func=docs.run)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
