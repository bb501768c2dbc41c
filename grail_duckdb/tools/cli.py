"""The command line: ``python -m grail_duckdb build|query|demo|bench``.

* ``build EDGES``: index an edge file (Parquet, CSV/TSV, SNAP text, ``.gra``, gzip or not, or
  ``file.duckdb:table``) and write the index next to it; phases are reported as they finish.
* ``query INDEX PAIRS``: answer a file of pairs with a saved index; answers to Parquet or CSV.
* ``demo``: a seeded citation-like graph (or ``--edges FILE``) in an in-memory DuckDB, the index
  built through SQL, the example queries of ``sql/examples.sql`` run on the scalar and on the
  whole-column path, with answers and timings.
* ``bench``: the benchmark (:mod:`grail_duckdb.tools.bench`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import plugin
from ..engine.index import DEFAULT_LABELS, build_index, load_index
from ..errors import GrailError
from ..plugin import install, named_queries
from ..plugin import sql as whole
from . import bench, bench_scale
from .generators import citation_dag
from .readers import detect_format, parquet_edge_columns, read_edges

#: suffixes dropped from an edge file's name to name its index (``cit-HepTh.tsv.gz`` ->
#: ``cit-HepTh.grail.parquet``)
_EDGE_SUFFIXES = {".gz", ".tsv", ".csv", ".txt", ".gra", ".parquet", ".cites", ".edges"}
DEMO_PAPERS = 200_000


def _say(*parts) -> None:
    print(*parts, flush=True)


def _progress(phase: str, seconds: float) -> None:
    """The engine's progress callback: one line per finished build phase (on stderr)."""
    print(f"  {phase:<12} {seconds:8.3f} s", file=sys.stderr, flush=True)


def default_index_path(edges: str) -> Path:
    """Where ``build`` writes the index of an edge file: beside it, ``<stem>.grail.parquet``."""
    p = Path(edges)
    name = p.name
    while Path(name).suffix.lower() in _EDGE_SUFFIXES:
        name = name[: -len(Path(name).suffix)]
    return p.with_name(f"{name}.grail.parquet")


# --- build ---------------------------------------------------------------------------------------
def cmd_build(args) -> int:
    """Build and save the index of an edge file (or of a table of a DuckDB file)."""
    db, _, table = args.edges.rpartition(":") if ".duckdb:" in args.edges else ("", "", "")
    if db:
        return _build_in_database(db, table, args)

    t0 = time.perf_counter()
    edges, cols = read_edges_for_build(args)
    if isinstance(edges, pa.Table):
        _say(f"read {edges.num_rows:,} edges from {args.edges} in {time.perf_counter() - t0:.2f} s")
    index = build_index(edges, labels=args.labels, seed=args.seed, backend=args.backend,
                        progress=_progress, **cols)
    out = Path(args.out) if args.out else default_index_path(args.edges)
    index.save(out)
    _print_summary(index.summary(), out)
    return 0


def read_edges_for_build(args):
    """The edges of ``build`` and their column names: Parquet (a file or a folder) is handed
    to the build as a path, which reads it row group by row group on every core while it
    uploads (the ``read`` phase); other formats are read first (:func:`read_edges`)."""
    fmt = args.format or detect_format(args.edges)
    if fmt in ("parquet", "pq") and not args.reverse:
        src, dst = parquet_edge_columns(args.edges, args.src, args.dst)
        return str(args.edges), {"src_col": src, "dst_col": dst}
    return read_edges(args.edges, fmt=args.format, src_col=args.src, dst_col=args.dst,
                      reverse=args.reverse), {}


def _build_in_database(db: str, table: str, args) -> int:
    """``file.duckdb:table``: build through the plugin, so SQL on that database finds it."""


    if args.backend:
        os.environ["GRAIL_DUCKDB_BACKEND"] = args.backend
    con = duckdb.connect(db)
    try:
        summary = plugin.build(con, table, src=args.src or "src", dst=args.dst or "dst",
                               labels=args.labels, name=args.name, path=args.out,
                               rebuild=True, progress=_progress)
    finally:
        con.close()
    _print_summary(summary, summary["path"])
    return 0


def _print_summary(summary: dict, path) -> None:
    keys = ("vertices", "edges", "components", "dag_edges", "labels", "backend", "build_seconds")
    _say(", ".join(f"{k} {summary[k]:,}" if isinstance(summary[k], int) else f"{k} {summary[k]}"
                   for k in keys if k in summary))
    _say(f"wrote {path}")


# --- query ---------------------------------------------------------------------------------------
def cmd_query(args) -> int:
    """Answer a pairs file with a saved index; write (src, dst, reaches)."""


    index = load_index(args.index, backend=args.backend)
    pairs = read_edges(args.pairs, fmt=args.format, src_col=args.src, dst_col=args.dst)
    t0 = time.perf_counter()
    answers = index.reaches(pairs.column("src"), pairs.column("dst"))
    seconds = time.perf_counter() - t0
    out = pa.table({"src": pairs.column("src"), "dst": pairs.column("dst"), "reaches": answers})
    stats = index.last_stats
    print(f"{len(out):,} pairs, {stats.searched:,} searched, "
          f"{int(answers.true_count) if hasattr(answers, 'true_count') else sum(answers.to_pylist())} "
          f"reachable, {seconds:.3f} s", file=sys.stderr)
    if args.out is None:
        pacsv.write_csv(out, sys.stdout.buffer)
    elif str(args.out).endswith(".parquet"):
        pq.write_table(out, args.out)
    else:
        pacsv.write_csv(out, args.out)
    return 0


# --- demo ----------------------------------------------------------------------------------------
def demo_connection(edges, *, index_path=None):
    """An in-memory DuckDB with ``cites(citing, cited)``, the ``papers`` view and the index
    built through SQL; returns ``(con, summary)``."""


    con = install(duckdb.connect())
    con.execute("SET enable_progress_bar = false")
    con.register("demo_edges", edges)
    con.execute("CREATE TABLE cites AS SELECT src AS citing, dst AS cited FROM demo_edges")
    con.unregister("demo_edges")
    con.execute("CREATE VIEW papers AS SELECT citing AS id FROM cites UNION SELECT cited FROM cites")
    path = "" if index_path is None else str(index_path)
    row = con.execute("SELECT * FROM grail_index('cites', src := 'citing', dst := 'cited', "
                      "path := $path)", {"path": path})
    names = [d[0] for d in row.description]
    return con, dict(zip(names, row.fetchall()[0]))


def run_examples(con, *, scalar: bool = False, say=_say) -> dict:
    """Run the queries of ``sql/examples.sql`` on ``con`` through :func:`grail_duckdb.sql` (the
    whole-column path) and, with ``scalar``, also as written (the per-chunk scalar path),
    checking that both give the same rows; returns ``{name: rows}`` and prints the answers
    with their timings."""

    results: dict = {}
    params: dict = {}
    for name, query in named_queries().items():
        doc = " ".join(line[3:] for line in query.splitlines() if line.startswith("-- "))
        use = {k: v for k, v in params.items() if f"${k}" in query}
        t0 = time.perf_counter()
        rows = whole(con, query, params=use or None).fetchall()
        timing = f"{(time.perf_counter() - t0) * 1000:8.1f} ms"
        if "reaches(" in query:
            timing += " (whole-column path)"
            if scalar:
                t0 = time.perf_counter()
                rows_s = con.execute(query, use).fetchall()
                same = sorted(map(repr, rows_s)) == sorted(map(repr, rows))
                timing += (f", {(time.perf_counter() - t0) * 1000:.1f} ms scalar path "
                           f"({'same' if same else 'DIFFERENT'} answer)")
                if not same:
                    raise GrailError(f"example {name}: the scalar and whole-column paths differ")
        results[name] = rows
        if name == "most_cited":
            params["paper"] = rows[0][0]
        say(f"\n[{name}] {doc}")
        say(f"  {_rows_text(rows)}")
        say(f"  {timing}")
    return results


def _rows_text(rows, limit: int = 5) -> str:
    text = "; ".join(", ".join(str(v) for v in r) for r in rows[:limit])
    return text + (f"; ... ({len(rows)} rows)" if len(rows) > limit else "")


def cmd_demo(args) -> int:
    """The README's first command: generate (or read) a citation graph, index it, query it."""
    t_all = time.perf_counter()
    if args.edges:

        t0 = time.perf_counter()
        edges = read_edges(args.edges, reverse=args.reverse)
        _say(f"read {edges.num_rows:,} citations from {args.edges} "
             f"({time.perf_counter() - t0:.2f} s)")
    else:

        t0 = time.perf_counter()
        edges = citation_dag(args.papers, seed=args.seed)
        _say(f"generated a citation graph: {args.papers:,} papers, {edges.num_rows:,} citations "
             f"(seed {args.seed}, {time.perf_counter() - t0:.2f} s)")
    t0 = time.perf_counter()
    con, summary = demo_connection(edges, index_path=args.index)
    _say(f"SELECT * FROM grail_index('cites', src := 'citing', dst := 'cited'): "
         f"{summary['vertices']:,} papers, {summary['components']:,} components, "
         f"backend {summary['backend']}, {time.perf_counter() - t0:.2f} s "
         f"(engine {summary['build_seconds']:.2f} s){', written to ' + summary['path'] if summary['path'] else ''}")
    try:
        run_examples(con, scalar=args.scalar)
    finally:
        con.close()
    _say(f"\ndemo finished in {time.perf_counter() - t_all:.1f} s")
    return 0


# --- bench ---------------------------------------------------------------------------------------
def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="the benchmark: build phases, query sets, SQL paths",
                       add_help=False)
    bench.add_arguments(p)
    p.add_argument("-h", "--help", action="help", help="show this help message and exit")
    p.set_defaults(func=bench.run)


def _add_bench_scale(sub) -> None:
    p = sub.add_parser("bench-scale", help="the scale runs: generate -> Parquet -> build -> "
                                           "save -> load -> random pairs, memory per phase")
    bench_scale.add_arguments(p)
    p.set_defaults(func=bench_scale.run)


# --- the parser ----------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m grail_duckdb``."""
    top = argparse.ArgumentParser(prog="python -m grail_duckdb",
                                  description="Exact reachability for DuckDB edge tables (GRAIL).")
    sub = top.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="index an edge file; the index is written next to it")
    b.add_argument("edges", help="edge file (.parquet, .csv, .tsv, .txt, .gra, optionally .gz) "
                                 "or file.duckdb:table")
    b.add_argument("--src", help="source column (CSV/TSV with a header, Parquet, DuckDB)")
    b.add_argument("--dst", help="destination column")
    b.add_argument("--format", help="override the format detected from the file name")
    b.add_argument("--reverse", action="store_true", help="swap the columns (cited citing files)")
    b.add_argument("--labels", type=int, default=DEFAULT_LABELS,
                   help=f"GRAIL label pairs (default {DEFAULT_LABELS})")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    b.add_argument("--name", help="index name for file.duckdb:table (default: the table name)")
    b.add_argument("--out", help="index file (default: beside the input)")
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("query", help="answer a file of (src, dst) pairs with a saved index")
    q.add_argument("index", help="an index file written by build or grail_index")
    q.add_argument("pairs", help="pairs file (any edge file format)")
    q.add_argument("--src", help="source column of the pairs file")
    q.add_argument("--dst", help="destination column of the pairs file")
    q.add_argument("--format", help="override the pairs file's format")
    q.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    q.add_argument("--out", help="answers file, .parquet or .csv (default: CSV on stdout)")
    q.set_defaults(func=cmd_query)

    d = sub.add_parser("demo", help="index a citation graph in DuckDB and run the examples")
    d.add_argument("--edges", help="a real edge file instead of the generated graph, e.g. "
                                   "../shared/datasets/snap/cit-HepTh.tsv.gz")
    d.add_argument("--reverse", action="store_true", help="the file lists cited citing")
    d.add_argument("--papers", type=int, default=DEMO_PAPERS,
                   help=f"papers in the generated graph (default {DEMO_PAPERS:,})")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--scalar", action="store_true",
                   help="also run each query on the scalar path and compare the answers")
    d.add_argument("--index", help="also persist the index to this Parquet file")
    d.set_defaults(func=cmd_demo)

    _add_bench(sub)
    _add_bench_scale(sub)
    return top


def main(argv=None) -> int:
    """Entry point; returns the exit status (2 for input errors, with the message on stderr)."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GrailError as exc:
        print(f"grail_duckdb {args.command}: {exc}", file=sys.stderr)
        return 2
