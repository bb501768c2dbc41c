"""Analytic SQL over a citation graph with grail_duckdb.

Runs the queries of sql/examples.sql on the real arXiv hep-th citation graph (cit-HepTh) when
the datasets folder is there ($GRAIL_DUCKDB_DATASETS or ../shared/datasets), else on a seeded
generated citation graph:

    python examples/citation_analytics.py [--edges FILE] [--papers N]

Each query is plain SQL on an installed connection (grail_duckdb picks the path: one-to-all
traversal, whole columns, or DuckDB's chunks). It runs warm, beside its recursive-CTE twin
from the same file, and as written on the per-chunk path; all three answers are compared.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import grail_duckdb as gd
from grail_duckdb.tools.examples import citation_connection, examples_vs_cte

#: the datasets folder: $GRAIL_DUCKDB_DATASETS, else ``shared/datasets`` beside the checkout
DATASETS = Path(os.environ.get("GRAIL_DUCKDB_DATASETS")
                or Path(__file__).resolve().parents[2] / "shared" / "datasets")
HEPTH = DATASETS / "snap" / "cit-HepTh.tsv.gz"


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
    ap.add_argument("--cte-budget", type=float, default=10.0,
                    help="seconds after which a recursive CTE is stopped")
    args = ap.parse_args(argv)

    gd.warm_up()  # compile (first run after an install) or load the kernels before any timing
    # The index: built through SQL (an in-memory database keeps it in memory; pass
    # index_path='cites.grail.parquet' to persist it, or use a file database).
    con, summary = citation_connection(load_citations(args.edges, args.papers))
    print(f"index: {summary['vertices']:,} papers, {summary['components']:,} components, "
          f"{summary['build_seconds']:.2f} s")
    answers = {}
    try:
        for rec in examples_vs_cte(con, budget=args.cte_budget, per_chunk_too=True):
            name = rec["name"]
            answers[name] = rec["rows"]
            line = f"{name:18} {str(rec['rows'][:3])[:60]:62} {1000 * rec['seconds']:7.1f} ms"
            if "per_chunk_seconds" in rec:
                assert rec["per_chunk_same"], name
                line += f", per chunk {1000 * rec['per_chunk_seconds']:7.1f} ms"
            if "cte_seconds" in rec:
                answers[name + "_cte"] = rec["cte_rows"]
                if rec["cte_seconds"] is None:
                    line += f", recursive CTE > {args.cte_budget:.0f} s"
                else:
                    assert rec["cte_same"], name
                    line += f", recursive CTE {1000 * rec['cte_seconds']:7.1f} ms"
            print(line)
    finally:
        con.close()
    return answers


if __name__ == "__main__":
    main()
