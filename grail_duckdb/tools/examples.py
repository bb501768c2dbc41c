"""The example analyses of ``sql/examples.sql`` on a citation graph, beside their
recursive-CTE twins: what ``python -m grail_duckdb demo`` and ``examples/`` run.

:func:`citation_connection` makes an in-memory DuckDB with the table and view the examples
expect and the index built through SQL; :func:`examples_vs_cte` runs every example warm,
each beside its recursive-CTE twin (in a child process, stopped after a budget) and, on
request, on the per-chunk path, and compares the rows.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from ..plugin import install, named_queries, per_chunk

__all__ = ["citation_connection", "examples_vs_cte", "timed", "timed_plain"]


def timed(con, sql: str, params=None, *, repeat: int = 3, whole_column: bool = True):
    """``(seconds, rows)``: the best of ``repeat`` warm runs (one more run first, untimed, so
    plans, one-to-all sets and compiled kernels are ready)."""
    def once():
        if whole_column:
            return con.execute(sql, params).fetchall()
        with per_chunk(con):
            return con.execute(sql, params).fetchall()

    once()
    best = float("inf")
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        rows = once()
        best = min(best, time.perf_counter() - t0)
    return best, rows


def timed_plain(con, sql: str, params=None, *, repeat: int = 3, budget: float = 30.0,
                workdir=None):
    """``(seconds, rows)`` of a plain DuckDB statement (no grail_duckdb function: a recursive
    CTE), warm as :func:`timed`, run in a child process on a copy of ``con``'s tables and views
    and stopped after ``budget`` seconds: ``(None, None)`` then.

    A child, because DuckDB's interrupt waits for the running task, and one step of a
    recursive CTE can run for minutes (a walk from 30K start vertices materialised at once).
    """
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        setup = _copy_of(con, Path(tmp))
        job = json.dumps({"setup": setup, "sql": sql, "params": params, "repeat": repeat,
                          "budget": budget})
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD], input=job, text=True,
                                  capture_output=True, timeout=budget + 5)
        except subprocess.TimeoutExpired:
            return None, None
    if done.returncode != 0:
        raise RuntimeError(f"recursive CTE run failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    if out["seconds"] is None:
        return None, None
    return out["seconds"], [tuple(r) for r in out["rows"]]


def _copy_of(con, folder: Path) -> list[str]:
    """Statements that rebuild ``con``'s user tables (from Parquet files written to
    ``folder``) and views in another process."""
    setup = []
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                               "AND NOT temporary ORDER BY table_name").fetchall():
        if name.startswith("__grail"):
            continue
        ident = '"' + name.replace('"', '""') + '"'
        path = folder / f"t{len(setup)}.parquet"
        con.execute(f"COPY {ident} TO '{path.as_posix()}' (FORMAT parquet)")
        setup.append(f"CREATE TABLE {ident} AS FROM read_parquet('{path.as_posix()}')")
    for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal "
                              "AND NOT temporary ORDER BY view_name").fetchall():
        setup.append(sql)
    return setup


#: the child of :func:`timed_plain`: JSON job on stdin, ``{"seconds", "rows"}`` on stdout
_CHILD = """
import json, sys, time, duckdb
job = json.loads(sys.stdin.read())
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
for stmt in job["setup"]:
    con.execute(stmt)
t0 = time.perf_counter()
rows = con.execute(job["sql"], job["params"]).fetchall()
best = time.perf_counter() - t0
if best < job["budget"] / 4:
    for _ in range(job["repeat"]):
        t0 = time.perf_counter()
        rows = con.execute(job["sql"], job["params"]).fetchall()
        best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best if best <= job["budget"] else None, "rows": rows}))
"""


def examples_vs_cte(con, *, budget: float = 30.0, repeat: int = 3,
                    per_chunk_too: bool = False) -> list[dict]:
    """The queries of ``sql/examples.sql`` on ``con`` (warm), each beside its recursive-CTE
    twin (``<name>_cte``; stopped after ``budget`` seconds) and, with ``per_chunk_too``, its
    per-chunk path; rows compared. One record per query, in file order."""
    queries = named_queries()
    params: dict = {}
    out = []
    for name, query in queries.items():
        if name.endswith("_cte"):
            continue
        use = {k: v for k, v in params.items() if f"${k}" in query} or None
        seconds, rows = timed(con, query, use, repeat=repeat)
        rec = {"name": name, "rows": rows, "seconds": seconds, "query": query}
        if per_chunk_too and name != "most_cited":
            s2, rows2 = timed(con, query, use, repeat=repeat, whole_column=False)
            rec.update(per_chunk_seconds=s2, per_chunk_same=_same(rows, rows2))
        twin = queries.get(name + "_cte")
        if twin is not None:
            s3, rows3 = timed_plain(con, twin, use, repeat=repeat, budget=budget)
            rec.update(cte_seconds=s3, cte_rows=rows3,
                       cte_same=None if rows3 is None else _same(rows, rows3))
        if name == "most_cited":
            params["paper"] = rows[0][0]
        out.append(rec)
    return out


def _same(a, b) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


def citation_connection(edges: pa.Table, *, index_path=None):
    """An in-memory DuckDB with ``cites(citing, cited)``, the ``papers`` view that
    ``sql/examples.sql`` expects, and the index built through SQL: ``(con, summary)``."""
    con = install(duckdb.connect())
    con.execute("SET enable_progress_bar = false")
    con.register("citation_edges", edges.select([0, 1]).rename_columns(["src", "dst"]))
    con.execute("CREATE TABLE cites AS SELECT src AS citing, dst AS cited FROM citation_edges")
    con.unregister("citation_edges")
    con.execute("CREATE VIEW papers AS SELECT citing AS id FROM cites UNION SELECT cited FROM cites")
    rel = con.execute("SELECT * FROM grail_index('cites', src := 'citing', dst := 'cited', "
                      "path := $path)", {"path": "" if index_path is None else str(index_path)})
    names = [d[0] for d in rel.description]
    return con, dict(zip(names, rel.fetchall()[0]))
