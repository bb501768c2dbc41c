"""The example analyses of ``sql/examples.sql`` on a citation graph, beside their
recursive-CTE twins: what ``python -m grail_duckdb demo`` and ``examples/`` run.

:func:`citation_connection` makes an in-memory DuckDB with the table and view the examples
expect and the index built through SQL; :func:`examples_vs_cte` runs every example warm,
each beside its recursive-CTE twin (in a child process, stopped after a budget) and, on
request, on the per-chunk path, and compares the rows (:func:`each_example`: the same, one
record at a time).
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from ..plugin import install, named_queries, per_chunk

__all__ = ["citation_connection", "each_example", "examples_vs_cte", "timed", "timed_plain"]


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
    and stopped after ``budget`` seconds (counted once the child has loaded the tables):
    ``(None, None)`` then.

    A child, because DuckDB's interrupt waits for the running task, and one step of a
    recursive CTE can run for minutes (a walk from 30K start vertices materialised at once).
    """
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"setup": _copy_of(con, Path(tmp)), "sql": sql,
                                   "params": params, "repeat": repeat, "budget": budget}))
        with open(Path(tmp) / "stderr.txt", "w+") as err:
            child = subprocess.Popen([sys.executable, "-c", _CHILD, str(job)], text=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=err)
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=_lines_of, args=(child.stdout, lines), daemon=True).start()
            try:
                lines.get()                             # "ready" (or None): tables loaded
                result = lines.get(timeout=budget + ANSWER_S)
            except queue.Empty:
                result = None
            finally:
                if child.poll() is None:
                    child.kill()
                child.wait()
            if result is None and child.returncode not in (0, -9):
                err.seek(0)
                raise RuntimeError(f"recursive CTE run failed: {err.read()[-2000:]}")
    if result is None:
        return None, None
    out = json.loads(result)
    if out["seconds"] is None:
        return None, None
    return out["seconds"], [tuple(r) for r in out["rows"]]


def _lines_of(stream, lines: queue.Queue) -> None:
    """Every line of ``stream`` into ``lines``, then None."""
    for line in stream:
        lines.put(line)
    lines.put(None)


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


#: seconds past its budget that :func:`timed_plain` waits for a child's rows (its repeats stop
#: at half the budget, so one that finished its first run in time has sent them by then)
ANSWER_S = 0.25
#: the child of :func:`timed_plain`: a JSON job file, "ready" then ``{"seconds", "rows"}`` on
#: stdout
_CHILD = """
import json, sys, time, duckdb
job = json.loads(open(sys.argv[1]).read())
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
for stmt in job["setup"]:
    con.execute(stmt)
print("ready", flush=True)
start = t0 = time.perf_counter()
rows = con.execute(job["sql"], job["params"]).fetchall()
best = time.perf_counter() - t0
if best < job["budget"] / 5:
    for _ in range(job["repeat"]):
        if time.perf_counter() - start > job["budget"] / 2:
            break
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
    return list(each_example(con, budget=budget, repeat=repeat, per_chunk_too=per_chunk_too))


def each_example(con, *, budget: float = 30.0, repeat: int = 3, per_chunk_too: bool = False):
    """:func:`examples_vs_cte`'s records one at a time, each as soon as it is measured (a
    demo prints each query's result while the next one runs)."""
    queries = named_queries()
    params: dict = {}
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
        yield rec


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
