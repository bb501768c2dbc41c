"""Analytic SQL over a citation graph with grail_duckdb.

Runs the queries of sql/examples.sql on the real arXiv hep-th citation graph (cit-HepTh) when
the datasets folder is there ($GRAIL_DUCKDB_DATASETS or ../shared/datasets), else on a seeded
generated citation graph:

    python examples/citation_analytics.py [--edges FILE] [--papers N]

Each query is run twice, as written (the scalar reaches path, DuckDB's 2048-row chunks) and
through grail_duckdb.sql (the whole-column path), and the two answers are compared.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb

import grail_duckdb as gd
from grail_duckdb.plugin import named_queries
from grail_duckdb.tools.datasets import DATASETS

HEPTH = DATASETS["cit-HepTh"].file() or Path("/nonexistent")  # $GRAIL_DUCKDB_DATASETS or ../shared


def load_citations(edges: str | None, papers: int):
    """The citation edges (src cites dst): a file, cit-HepTh when present, or generated."""
    if edges or HEPTH.exists():
        from grail_duckdb.tools.readers import read_edges

        path = edges or HEPTH
        print(f"citations from {path}")
        return read_edges(path)
    from grail_duckdb.tools.generators import citation_dag

    print(f"no datasets folder: a generated citation graph of {papers:,} papers")
    return citation_dag(papers, seed=0)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges")
    ap.add_argument("--papers", type=int, default=200_000)
    args = ap.parse_args(argv)

    gd.warm_up()  # compile (first run after an install) or load the kernels before any timing
    con = gd.install(duckdb.connect())
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("citations", load_citations(args.edges, args.papers))
        con.execute("CREATE TABLE cites AS SELECT src AS citing, dst AS cited FROM citations")
        con.execute("CREATE VIEW papers AS "
                    "SELECT citing AS id FROM cites UNION SELECT cited FROM cites")

        # The index: built through SQL (an in-memory database keeps it in memory; pass
        # path := 'cites.grail.parquet' to persist it, or use a file database).
        summary = con.execute(
            "SELECT grail_index('cites', src := 'citing', dst := 'cited')").fetchall()[0][0]
        print(f"index: {summary['vertices']:,} papers, {summary['components']:,} components, "
              f"{summary['build_seconds']:.2f} s")

        answers, params = {}, {}
        for name, query in named_queries("examples.sql").items():
            use = {k: v for k, v in params.items() if f"${k}" in query}
            t0 = time.perf_counter()
            rows = con.execute(query, use).fetchall()  # scalar path
            t1 = time.perf_counter()
            whole = gd.sql(con, query, params=use or None).fetchall()  # whole-column path
            t2 = time.perf_counter()
            assert sorted(map(repr, rows)) == sorted(map(repr, whole)), name
            if name == "most_cited":
                params["paper"] = rows[0][0]
            answers[name] = rows
            print(f"{name:18} {str(rows[:3])[:70]:72} scalar {1000 * (t1 - t0):7.1f} ms, "
                  f"whole column {1000 * (t2 - t1):7.1f} ms")
        return answers
    finally:
        con.close()  # DuckDB 2.0 reports the Python functions of an unclosed connection at exit


if __name__ == "__main__":
    main()
