"""The bench's SQL rows: which path a statement takes and what it costs.

* the plain statement ``count(*) FILTER (WHERE reaches(a, b))`` on an installed connection (the
  whole-column path: one fetch, one engine call, the answers read back as a column);
* ``reaches_pairs`` (the same machinery, through its table macro);
* the per-chunk path (the same statement with every call per DuckDB chunk, as joins and
  correlated subqueries run) and DuckDB's floor for any per-chunk Python function (an identity
  arrow function over the same pairs);
* the analytic queries of ``sql/examples.sql`` against their recursive-CTE twins (warm);
* the freshness check each statement runs, on the edge table of the workload.

``bench_sql`` and ``bench_identity`` feed the main bench's tables; ``python -m
benchmarks sql`` runs the SQL rows alone at any size (1M and 10M pairs) and
writes a Markdown table, e.g. ``--workloads citeseer cit-HepTh --pairs 1000000 10000000``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from grail_duckdb.plugin import install, per_chunk, registry_of
from grail_duckdb.tools.examples import citation_connection, examples_vs_cte, timed
from grail_duckdb.tools.generators import citation_dag

from . import baselines as bl
from .datasets import load_dataset
from .workloads import random_pairs

__all__ = ["add_arguments", "bench_identity", "bench_sql", "freshness_costs", "run",
           "sql_paths"]

#: method -> (statement, whole_column)
_SQL_QUERIES = {
    "SQL plain statement (whole column)":
        ("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs_{q}", True),
    "SQL reaches_pairs()":
        ("SELECT count(*) FROM reaches_pairs('pairs_{q}', 'a', 'b') WHERE reaches", True),
    "SQL per-chunk path": ("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs_{q}", False),
}


def bench_sql(edges: pa.Table, sets: dict[str, pa.Table], expected: dict, backend: str,
              s: dict) -> dict:
    """The SQL paths on one backend, for the main bench: ``{method: {query set: figures}}``
    plus ``_build_seconds`` (``grail_index`` on the edge table, read through DuckDB)."""
    old = os.environ.get("GRAIL_DUCKDB_BACKEND")
    os.environ["GRAIL_DUCKDB_BACKEND"] = backend
    con = bl.pairs_connection(sets, s["threads"])
    try:
        return _sql_rows(con, edges, sets, expected, s)
    finally:
        con.close()
        if old is None:
            os.environ.pop("GRAIL_DUCKDB_BACKEND", None)
        else:
            os.environ["GRAIL_DUCKDB_BACKEND"] = old


def _sql_rows(con, edges, sets, expected, s) -> dict:
    install(con)
    seconds = _load_edges(con, edges, s["labels"])
    if isinstance(seconds, str):
        return {"_note": seconds}
    out: dict = {"_build_seconds": seconds}
    for q, table in sets.items():
        want = int(expected[q].sum())
        for method, (sql, whole) in _SQL_QUERIES.items():
            out.setdefault(method, {})[q] = _time_count(con, sql.format(q=q), want, len(table),
                                                        whole)
    return out


def _load_edges(con, edges: pa.Table, labels: int | None):
    """``bench_edges`` as a table and its index through SQL; the build's seconds (or a note)."""
    con.register("bench_edges_view", edges.select(["src", "dst"]))
    con.execute("CREATE OR REPLACE TABLE bench_edges AS SELECT * FROM bench_edges_view")
    con.unregister("bench_edges_view")
    t0 = time.perf_counter()
    try:
        con.execute("SELECT grail_index('bench_edges', labels := ?)", [labels]).fetchall()
    except Exception as exc:  # report, do not abort the bench
        return f"SQL paths not measured: grail_index failed: {exc}"[:300]
    return time.perf_counter() - t0


def _time_count(con, sql: str, want: int, total: int, whole: bool) -> dict:
    """Best-of-three time of a ``count`` statement; agree = the count is the engine's."""
    try:
        if whole:
            seconds, row = bl.best_of(lambda: con.execute(sql).fetchall()[0])
        else:
            with per_chunk(con):
                seconds, row = bl.best_of(lambda: con.execute(sql).fetchall()[0])
    except Exception as exc:  # report, do not abort the bench
        return {"seconds": None, "note": f"failed: {type(exc).__name__}: {exc}"[:300]}
    return bl.Measured(seconds=seconds, total=total, run_pairs=total, sampled=False,
                       agree=int(row[0]) == want).as_dict()


def bench_identity(sets: dict[str, pa.Table], s: dict) -> dict:
    """DuckDB's floor for a Python UDF: an identity arrow UDF over the same pairs tables."""
    out = {}
    con = bl.pairs_connection(sets, s["threads"])
    try:
        for name, table in sets.items():
            seconds, _ = bl.identity_udf_seconds(con, f"pairs_{name}")
            out[name] = bl.Measured(seconds=seconds, total=len(table), run_pairs=len(table),
                                    sampled=False).as_dict()
    finally:
        con.close()
    return out


def freshness_costs(con, entry_name: str = "", *, repeat: int = 200) -> dict:
    """What the freshness check costs per statement: nothing written since the last check
    (a counter read), and after a write elsewhere in the database (catalog signals, then the
    content scan of the edge table), in seconds."""
    reg = registry_of(con)
    entry = reg.fresh(reg.get(entry_name))
    t0 = time.perf_counter()
    for _ in range(repeat):
        reg.fresh(entry)
    idle = (time.perf_counter() - t0) / repeat
    con.execute("CREATE OR REPLACE TABLE bench_unrelated AS SELECT 1 AS x")  # a write elsewhere
    t0 = time.perf_counter()
    entry = reg.fresh(entry)
    after_write = time.perf_counter() - t0
    return {"idle_seconds": idle, "after_write_seconds": after_write,
            "edges": entry.index.edge_rows}


# --- the SQL rows at any size ----------------------------------------------------------------
def sql_paths(con, pairs: pa.Table, *, repeat: int = 3) -> dict:
    """Seconds of each SQL path over one pairs table (``bench_pairs``), plus the identity
    floor and the engine alone; all counts must agree."""
    con.register("bench_pairs_view", pairs)
    con.execute("CREATE OR REPLACE TABLE bench_pairs AS SELECT src AS a, dst AS b "
                "FROM bench_pairs_view")
    con.unregister("bench_pairs_view")
    entry = registry_of(con).get("")
    a = con.sql("SELECT a FROM bench_pairs").to_arrow_table().column(0)
    b = con.sql("SELECT b FROM bench_pairs").to_arrow_table().column(0)
    out = {"pairs": len(pairs)}
    entry.index.reaches(a, b)  # untimed: kernels compiled and buffers made (a fresh machine)
    out["engine alone (Python, columns in memory)"], ans = bl.best_of(
        lambda: entry.index.reaches(a, b), repeat)
    want = int(pc.sum(ans.cast(pa.int64())).as_py() or 0)
    for method, (sql, whole) in _SQL_QUERIES.items():
        t, rows = timed(con, sql.format(q="x").replace("pairs_x", "bench_pairs"),
                        repeat=repeat if whole else 1, whole_column=whole)
        if rows[0][0] != want:
            raise AssertionError(f"{method}: {rows[0][0]} reachable pairs, the engine says {want}")
        out[method] = t
    sql = "SELECT a, b, reaches(a, b) AS r FROM bench_pairs"
    out["SQL plain statement, Arrow result (whole column)"], _ = bl.best_of(
        lambda: con.execute(sql).to_arrow_table(), repeat)
    out["identity arrow UDF (floor)"], _ = bl.identity_udf_seconds(con, "bench_pairs")
    return out


def add_arguments(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the options of ``python -m benchmarks sql`` on ``ap``."""
    ap.add_argument("--workloads", nargs="+", default=["cit-HepTh"])
    ap.add_argument("--pairs", nargs="*", type=int, default=[1_000_000])
    ap.add_argument("--threads", nargs="+", type=int, default=[1])
    ap.add_argument("--backend", default=None, help="cpu | gpu (default: auto)")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per recursive CTE")
    ap.add_argument("--examples", action="store_true",
                    help="also sql/examples.sql against the recursive CTE, and the freshness check")
    ap.add_argument("--out", default="bench-sql")
    return ap


def run(args) -> int:
    """The SQL rows of every workload at every size; writes ``--out``'s JSON and Markdown."""
    if args.backend:
        os.environ["GRAIL_DUCKDB_BACKEND"] = args.backend
    report: dict = {}
    for name in args.workloads:
        edges = load_dataset(name) if not name.startswith("gen:") else _generated(name)
        con = install(duckdb.connect())
        con.execute("SET enable_progress_bar = false")
        rec = report[name] = {"build_seconds": _load_edges(con, edges, 5)}
        keys = registry_of(con).get("").index.ids.keys
        for threads in args.threads:
            con.execute(f"SET threads = {threads}")
            for n in args.pairs:
                rec[f"{n} pairs, {threads} threads"] = sql_paths(con, random_pairs(keys, n, seed=1))
                print(name, n, threads, json.dumps(rec[f"{n} pairs, {threads} threads"]), flush=True)
        if args.examples:
            rec["freshness"] = freshness_costs(con)
            print(name, json.dumps(rec["freshness"]), flush=True)
        con.close()
        if args.examples:
            rec["examples"] = _examples_on(edges, args.budget)
            print(name, json.dumps(rec["examples"]), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem = "bench_sql_" + "_".join(w.replace(":", "-") for w in args.workloads)
    (Path(args.out) / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    (Path(args.out) / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def _generated(name: str) -> pa.Table:
    return citation_dag(int(name.split(":")[2]), seed=0)


def _examples_on(edges: pa.Table, budget: float) -> list:
    con, _ = citation_connection(edges)
    try:
        recs = examples_vs_cte(con, budget=budget)
    finally:
        con.close()
    return [{k: v for k, v in r.items() if k in ("name", "seconds", "cte_seconds", "cte_same")}
            for r in recs]


def markdown(report: dict) -> str:
    """The report as Markdown tables (times in ms)."""
    lines = []
    for name, rec in report.items():
        lines.append(f"### {name}\n")
        runs = [k for k in rec if k.endswith("threads")]
        if runs:
            methods = [m for m in rec[runs[0]] if m != "pairs"]
            lines.append("| method | " + " | ".join(runs) + " |")
            lines.append("|---|" + "---:|" * len(runs))
            for m in methods:
                lines.append(f"| {m} | " + " | ".join(_ms(rec[r][m]) for r in runs) + " |")
            lines.append("")
        for ex in rec.get("examples", []):
            if ex.get("cte_seconds", "-") != "-" and "cte_same" in ex:
                if ex["cte_seconds"] is None:
                    cte = "stopped at the budget"
                else:
                    cte = (f"{_ms(ex['cte_seconds'])} ms, {ex['cte_seconds'] / ex['seconds']:.0f}x"
                           f", same rows: {ex['cte_same']}")
                lines.append(f"- {ex['name']}: index {_ms(ex['seconds'])} ms, recursive CTE {cte}")
        fr = rec.get("freshness")
        if fr:
            lines.append(f"- freshness check per statement ({fr['edges']:,} edges): "
                         f"{fr['idle_seconds'] * 1e6:.2f} µs while nothing is written, "
                         f"{fr['after_write_seconds'] * 1e3:.1f} ms after a write elsewhere")
        lines.append("")
    return "\n".join(lines)


def _ms(seconds) -> str:
    return "timed out" if seconds is None else f"{seconds * 1e3:.1f}"
