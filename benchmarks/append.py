"""Living data: new papers appended to an index without a rebuild, ``python -m benchmarks append``.

Two measurements, each run where its size is given, in one report (``append.json`` in
``--out``, or ``--name``; ``"kind": "append"``) that :func:`render` makes a section of
docs/benchmarks.md. The report is rewritten after every step, so a run cut short keeps what it
measured (``"complete": false``).

**Appends** (``--papers N``, default 1,000,000; 0 skips them). gen:citation:N x
``--mean-citations`` is generated in memory (papers numbered in publication order, each
citing earlier ones; the table's vertex count is dropped, so that a prefix of it is a graph
of the papers that have cited or been cited by then). The index of the edges of the first
N x (1 - appends x share) papers is built and saved (``build_index(..., save_to=...)``);
then ``--appends`` batches of ``--share`` x N new papers each (every edge out of them: into
older papers and each other) are, one after the other:

* **absorbed**: ``idx.append(batch)``: the batch checked (every edge leaves a vertex the index
  does not hold, or adds no path: else ``NotAppendableError``), its new vertices condensed and
  labelled, the index's arrays grown (on the backend's device);
* **persisted**: ``idx.save_parts()``: the batch written beside the index file as a part
  (atomic, fsynced), as ``load_index`` reads it back.

``--after-load``: the appends go to the base index loaded back from its file, as a later
process's would (on the CPU a build and a load both leave room at the end of the index's
host arrays; a GPU's arrays move once, at the first append: :mod:`grail_duckdb.growth`).

Each is timed against **the full build**: all N papers' edges built from scratch, from the same
in-memory table, after the appends (the index *rebuilt on the same data*). Target: absorb +
persist of each append at most 2% of it. ``--append-rounds R`` runs the base build and the
appends R times (each round from a new base) and the full build R times: the least of each
is kept, every round's figure recorded. After each append, 10,000 of the batch's edges are
checked reachable and their reversals not (a DAG), untimed.

Then the query sets, ``--random`` counts of uniform random pairs over the vertex keys and
``--reachable`` pairs from random forward walks (as :mod:`benchmarks.workloads` draws them),
are answered by the appended index and by the rebuilt one, alternated, ``--repeat`` rounds;
the least time of each is kept. Target: the appended index at most 1.2x the rebuilt one's
time. Their answers must be equal: a difference fails the command (exit 1, after the report is
written). ``--sequential``: the appended index answers all its rounds and is freed before the
rebuild (one index on the device at a time: 1B edges on an H100's 78 GB); nothing is
alternated then.

``--sql`` also runs the same appends through SQL: a database file whose table ``edges`` holds
the base papers' edges, ``grail_index('edges')``, then each batch INSERTed and the next
statement that uses the index timed (the freshness check, which finds the new rows through
DuckDB's write-ahead log, and the absorb), and the part written after it on the plugin's
writer thread; against the same full build. Before each INSERT the same statement is timed
with nothing written since (its own work, without a freshness step). ``--sql-only``: the
full builds and the appends through SQL alone (no appends in Python, no query sets).

**Freshness** (``--table-rows R``; 0, the default, skips it). A database file with a
gen:citation edge table of about R rows (R / mean-citations papers), indexed through SQL
(``grail_index('edges')``: the table read through DuckDB, the index built and written beside
the file; a build in Python could not stand in for it: the plugin keeps a table's snapshot,
its row-id end and where the write-ahead log stood, only for an index it built itself or
loaded after a scan of the table). Then ``--inserts`` rounds of an INSERT of ``--insert-rows``
rows (new papers citing older ones) and the next statement (``SELECT reaches(1, 0)``). Timed,
from inside that statement: **the check** (:func:`grail_duckdb.plugin.appends.changes`: the
file's header says no checkpoint ran, the log's new entries hold no UPDATE, DELETE or ALTER,
so the rows from the snapshot's row-id end on are the whole change, and it reads them), the
absorb, the whole freshness step (``appends.verify``), the whole statement; then the part
written after it. Target: the check at most 10 ms. Beside them: the statement with nothing
written since (a counter read) and the scan the proof avoids (``count(*)`` and
``sum(hash(src, dst))`` over the whole table). After each round the inserted edges must be
reachable and their reversals not.

Every timed figure runs after a small warm-up of the same paths (first-use compiles, Numba's
and CUDA's, not timed); times on a GPU are taken after the device finished.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from grail_duckdb.engine.build import build_index
from grail_duckdb.engine.warm import warm_up as compile_kernels
from grail_duckdb.engine.index import load_index
from grail_duckdb.kernels import resolve
from grail_duckdb.tools.generators import citation_dag

from .bench import _json_default, machine_info
from .memory import free_device
from .report import _ms, publish
from .workloads import _walks, random_pairs

__all__ = ["add_arguments", "render", "run", "TARGETS"]

#: issue 41's targets: an append (absorb + persist) as a share of the full build; queries on
#: the appended index / on the rebuilt one; the freshness check after an INSERT, in ms
TARGETS = {"append_share": 0.02, "query_ratio": 1.2, "check_ms": 10.0}

#: edges of each batch checked after its append (reachable; reversed: not)
CHECKED_EDGES = 10_000


def _say(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


_T0 = time.perf_counter()


def _sync(backend: str) -> None:
    """Wait for the device (times on a GPU end when its work does)."""
    if backend == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()


def _timed(fn, backend: str = "cpu"):
    """``(fn(), seconds)``, the device finished."""
    t0 = time.perf_counter()
    out = fn()
    _sync(backend)
    return out, time.perf_counter() - t0


def _cpu_seconds() -> tuple[float, float] | None:
    """``(busy, own)``: seconds the machine's CPUs ran anything (user, system, interrupts)
    and seconds this process ran, so far; None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    t = os.times()
    return ((v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK"),
            t.user + t.system + t.children_user + t.children_system)


class _Others:
    """The CPU time other processes took while a part of the run ran (the machine may be
    shared: their work slows ours): :meth:`done` gives the part's wall seconds and theirs."""

    def __init__(self):
        self.t0, self.cpu = time.perf_counter(), _cpu_seconds()

    def done(self) -> dict:
        end, wall = _cpu_seconds(), time.perf_counter() - self.t0
        if end is None or self.cpu is None:
            return {"wall_seconds": wall}
        others = (end[0] - self.cpu[0]) - (end[1] - self.cpu[1])
        return {"wall_seconds": wall, "others_cpu_seconds": round(max(0.0, others), 2)}


def _device_used(backend: str) -> int | None:
    if backend != "gpu":
        return None
    import cupy

    return int(cupy.get_default_memory_pool().used_bytes())


# --- the graph and its batches ---------------------------------------------------------------
def _graph(papers: int, mean: float, seed: int) -> pa.Table:
    """gen:citation:papers x mean without its vertex count (a prefix is a graph of its own)."""
    return citation_dag(papers, mean_citations=mean, seed=seed).replace_schema_metadata(None)


def _numpy(column) -> np.ndarray:
    """A column as NumPy, without a copy where it is one chunk (a billion edges: 8 GB)."""
    return column.chunk(0).to_numpy() if column.num_chunks == 1 else column.to_numpy()


def _split(edges: pa.Table, papers: int, appends: int, share: float):
    """The base papers' edges and the batches of ``share`` x papers new papers each (slices
    of ``edges``, which is sorted by ``src``)."""
    step = max(1, int(round(papers * share)))
    base_papers = papers - appends * step
    if base_papers < 2:
        raise ValueError(f"{appends} appends of {step:,} papers leave no base of {papers:,}")
    src = _numpy(edges.column("src"))
    cuts = [int(np.searchsorted(src, base_papers + i * step)) for i in range(appends + 1)]
    cuts[-1] = edges.num_rows
    batches = [edges.slice(a, b - a) for a, b in zip(cuts, cuts[1:])]
    return edges.slice(0, cuts[0]), batches, base_papers, step


def _reachable(edges: pa.Table, papers: int, count: int, seed: int) -> pa.Table:
    """:func:`benchmarks.workloads.reachable_pairs` of a generated citation graph, its CSR
    read off the table (sorted by ``src``, keys 0..papers-1) rather than built: a billion
    edges take seconds."""
    src, dst = _numpy(edges.column("src")), _numpy(edges.column("dst"))
    degree = np.bincount(src, minlength=papers).astype(np.int64)
    indptr = np.zeros(papers + 1, np.int64)
    np.cumsum(degree, out=indptr[1:])
    origins = np.flatnonzero(degree > 0)
    rng = np.random.default_rng(seed)
    starts, ends, need = [], [], int(count)
    while need > 0:
        a, b = _walks(rng, indptr, dst, degree, origins, need + need // 8 + 16, 64)
        keep = np.flatnonzero(a != b)[:need]
        starts.append(a[keep])
        ends.append(b[keep])
        need -= keep.shape[0]
    return pa.table({"src": np.concatenate(starts).astype(np.int64),
                     "dst": np.concatenate(ends).astype(np.int64)})


def _check_batch(index, batch: pa.Table, seed: int) -> None:
    """Some of the batch's edges reachable, their reversals not (the graph is a DAG)."""
    rng = np.random.default_rng(seed)
    rows = pa.array(rng.integers(0, batch.num_rows, min(CHECKED_EDGES, batch.num_rows)))
    s, d = batch.column("src").take(rows), batch.column("dst").take(rows)
    fwd, back = index.reaches(s, d).true_count, index.reaches(d, s).true_count
    if fwd != len(rows) or back != 0:
        raise AssertionError(f"after an append: {fwd:,} of {len(rows):,} edges reachable, "
                             f"{back:,} reversed edges reachable (want all, none)")


# --- warm-up ---------------------------------------------------------------------------------
def warm_up(backend: str, mean: float, workdir: Path, sql: bool = False) -> float:
    """A small run of every timed path (build and save, append, parts, queries; with
    ``sql``, INSERTs absorbed through SQL), so that first-use compiles and loads are not
    timed; its seconds. First the package's own warm-up: a small run leaves the kernels that
    only large calls compile (small ones run their Python source) to the first timed call."""
    t0 = time.perf_counter()
    compile_kernels(backend)
    edges = _graph(20_200, mean, 1)
    base, batches, *_ = _split(edges, 20_200, 2, 0.005)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        idx = build_index(base, backend=backend, save_to=Path(tmp) / "w.grail.parquet",
                          progress=False)
        for b in batches:
            idx = idx.append(b)
            idx.save_parts()
        full = build_index(edges, backend=backend, progress=False)
        pairs = [random_pairs(full.ids.keys, 50_000, seed=1), _reachable(edges, 20_200, 5_000, 2)]
        for q in pairs:
            for index in (idx, full):
                index.reaches(q.column("src"), q.column("dst"))
        _sync(backend)
        if sql:
            con = _connect(Path(tmp) / "w.duckdb", backend)
            _table(con, base)
            _grail_index(con, backend)
            with _StatementTimer() as timer:
                for b in batches:
                    _sql_round(con, b, backend, timer)
            con.close()
    return time.perf_counter() - t0


# --- the appends -----------------------------------------------------------------------------
def run_appends(args, backend: str, workdir: Path, report: dict, write) -> None:
    """The appends of ``args.papers`` papers and the query sets (see the module); their
    figures go into ``report["appends"]``, ``write()`` after each step."""
    res = report["appends"] = {"papers": args.papers, "mean_citations": args.mean_citations,
                               "share": args.share, "appends": args.appends,
                               "sequential": bool(args.sequential),
                               "after_load": bool(args.after_load)}
    (edges, gen_s) = _timed(lambda: _graph(args.papers, args.mean_citations, args.seed))
    base, batches, base_papers, step = _split(edges, args.papers, args.appends, args.share)
    res.update(edges=edges.num_rows, generate_seconds=gen_s, base_papers=base_papers,
               base_edges=base.num_rows, papers_per_append=step)
    _say(f"generated {edges.num_rows:,} edges in {gen_s:.1f} s; base {base_papers:,} papers, "
         f"{base.num_rows:,} edges; {args.appends} appends of {step:,} papers")
    (reach, reach_s) = _timed(lambda: _reachable(edges, args.papers, args.reachable, 2))
    res["reachable_pairs_seconds"] = reach_s
    write()

    if args.sql_only:
        _full_builds(args, backend, edges, res, write)
        run_sql_appends(args, backend, workdir, base, batches, res, write)
        return
    path = workdir / "edges.grail.parquet"
    others = _Others()
    res["rounds"] = []
    for r in range(max(1, args.append_rounds)):
        if r:
            del idx
            gc.collect()
            free_device(backend)
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
        idx = _append_round(args, backend, path, base, batches, res, write)
    rows = res["rows"] = []
    for i in range(len(batches)):  # each append's least absorb + persist of the rounds
        best = min((rd["rows"][i] for rd in res["rounds"]),
                   key=lambda row: row["absorb_seconds"] + row["persist_seconds"])
        rows.append({**best, "each_round_seconds": [
            rd["rows"][i]["absorb_seconds"] + rd["rows"][i]["persist_seconds"]
            for rd in res["rounds"]]})
    res["base_build_seconds"] = min(rd["base_build_seconds"] for rd in res["rounds"])
    if args.after_load:
        res["base_load_seconds"] = min(rd["base_load_seconds"] for rd in res["rounds"])
    res["device_bytes_appended"] = _device_used(backend)
    res["others"] = {"builds, appends": others.done()}
    write()
    if idx.edge_rows != edges.num_rows:
        raise AssertionError(f"the appended index holds {idx.edge_rows:,} edge rows of "
                             f"{edges.num_rows:,}")
    # the first random set, the reachable pairs, the other random sets (the largest last: a
    # run cut short by a time limit loses the fewest)
    queries = {f"{n:,} random": random_pairs(idx.ids.keys, n, seed=1) for n in args.random}
    if args.reachable:
        names = list(queries)
        queries = {k: queries[k] for k in names[:1]} | {
            f"{args.reachable:,} reachable": reach} | {k: queries[k] for k in names[1:]}
    res["queries"] = {}
    answers: dict = {}
    if args.sequential:
        for name, q in queries.items():
            answers[name] = _rounds(res, name, q, idx, None, args.repeat, backend)
            write()
        del idx
        gc.collect()
        free_device(backend)
    full = _full_builds(args, backend, edges, res, write)
    for name, q in queries.items():
        _rounds(res, name, q, None if args.sequential else idx, full, args.repeat, backend,
                answers.get(name))
        f = res["queries"][name]
        _say(f"{name}: appended {f['appended_seconds']:.3f} s, rebuilt "
             f"{f['rebuilt_seconds']:.3f} s, ratio {f['ratio']:.2f}, answers equal: "
             f"{f['answers_equal']}")
        write()
    if args.sql:
        del full
        gc.collect()
        free_device(backend)
        run_sql_appends(args, backend, workdir, base, batches, res, write)


def _full_builds(args, backend: str, edges: pa.Table, res: dict, write):
    """The full build of ``edges``, as many times as the rounds of appends; the least time
    into ``res``. Returns the last index built."""
    others = _Others()
    full, builds = None, []
    for _ in range(max(1, args.append_rounds)):
        del full
        gc.collect()
        free_device(backend)
        full, t = _timed(lambda: build_index(edges, backend=backend, progress=False), backend)
        builds.append(t)
    res["full_build_seconds"], res["full_build_rounds"] = min(builds), builds
    res["labels"] = int(full.d)
    res.setdefault("others", {})["full builds"] = others.done()
    res["full_build_phases"] = {k: float(v) for k, v in (full.build_seconds or {}).items()}
    res["device_bytes_full"] = _device_used(backend)
    _say(f"full build of {edges.num_rows:,} edges: {min(builds):.2f} s")
    write()
    return full


def _append_round(args, backend: str, path: Path, base, batches, res: dict, write):
    """One round: the base built and saved (and loaded back: ``--after-load``), then every
    batch absorbed and persisted, each checked; into ``res["rounds"]``. The grown index."""
    rd: dict = {}
    res["rounds"].append(rd)
    idx, rd["base_build_seconds"] = _timed(
        lambda: build_index(base, backend=backend, save_to=path, progress=False), backend)
    res["index_file_bytes"] = path.stat().st_size
    _say(f"base built and saved in {rd['base_build_seconds']:.2f} s")
    if args.after_load:
        del idx
        gc.collect()
        free_device(backend)
        idx, rd["base_load_seconds"] = _timed(lambda: load_index(path, backend=backend),
                                              backend)
        _say(f"base loaded in {rd['base_load_seconds']:.2f} s")
    res["device_bytes_base"] = _device_used(backend)
    rd["rows"] = []
    for i, batch in enumerate(batches):
        idx, absorb = _timed(lambda: idx.append(batch), backend)
        _, persist = _timed(idx.save_parts)
        added = idx.appended[-1]
        rd["rows"].append({"edges": batch.num_rows, "vertices": int(added.vertices),
                           "components": int(added.components), "absorb_seconds": absorb,
                           "persist_seconds": persist})
        _check_batch(idx, batch, i)
        _say(f"append {i + 1}: {batch.num_rows:,} edges, +{added.vertices:,} vertices: absorb "
             f"{absorb * 1e3:.1f} ms, persist {persist * 1e3:.1f} ms")
        write()
    return idx


def _rounds(res: dict, name: str, q: pa.Table, appended, rebuilt, repeat: int, backend: str,
            answers=None):
    """``repeat`` rounds of a query set on the appended index, the rebuilt one or both
    (alternated); the least time of each into ``res["queries"][name]``, their answers
    compared. Returns the appended index's answers (when it ran)."""
    s, d = q.column("src"), q.column("dst")
    f = res["queries"].setdefault(name, {"pairs": q.num_rows})
    others = _Others()
    for _ in range(max(1, repeat)):
        for label, index in (("appended", appended), ("rebuilt", rebuilt)):
            if index is None:
                continue
            got, t = _timed(lambda: index.reaches(s, d), backend)
            f.setdefault(f"{label}_rounds", []).append(t)
            f[f"{label}_seconds"] = min(f[f"{label}_rounds"])
            f[f"{label}_searched"] = int(index.last_stats.searched)
            f[f"{label}_reachable"] = int(got.true_count)
            if label == "appended" and answers is None:
                answers = got
            elif label == "rebuilt":
                same = bool(got.equals(answers))
                f["answers_equal"] = f.get("answers_equal", True) and same
    if "rebuilt_seconds" in f and "appended_seconds" in f:
        f["ratio"] = f["appended_seconds"] / f["rebuilt_seconds"]
    res["others"][name + (" (appended)" if rebuilt is None else "")] = others.done()
    return answers


# --- SQL: the next statement after an INSERT ------------------------------------------------
class _StatementTimer:
    """Times the plugin's freshness step from inside the statements that run it:
    ``appends.changes`` (the check), ``appends.absorb`` and ``appends.verify`` (the whole
    step), each call's seconds and what the check found; and the part's write
    (``GrailIndex.save_parts``, on the plugin's writer thread)."""

    def __init__(self):
        from grail_duckdb.plugin import appends

        from grail_duckdb.engine.index import GrailIndex

        self.calls = []
        self._saved = [(appends, n, getattr(appends, n)) for n in ("changes", "absorb", "verify")]
        self._saved.append((GrailIndex, "save_parts", GrailIndex.save_parts))

    def __enter__(self):
        for owner, name, fn in self._saved:
            setattr(owner, name, self._wrap(name, fn))
        return self

    def __exit__(self, *exc):
        for owner, name, fn in self._saved:
            setattr(owner, name, fn)

    def _wrap(self, name, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            row = {"call": name, "seconds": time.perf_counter() - t0}
            if name == "changes":
                row.update(kind=out.kind, proof=out.proof,
                           rows=None if out.rows is None else out.rows.num_rows)
            self.calls.append(row)
            return out
        return timed

    def take(self) -> dict:
        """The calls since the last take, summed by function."""
        calls, self.calls = self.calls, []
        out = {f"{n}_seconds": sum(c["seconds"] for c in calls if c["call"] == n)
               for n in ("changes", "absorb", "verify", "save_parts")}
        found = [c for c in calls if c["call"] == "changes"]
        out["checks"] = len(found)
        out["found"] = [f"{c['kind']} ({c['proof']}, {c['rows'] or 0:,} rows)" for c in found]
        return out


def _connect(db: Path, backend: str):
    import duckdb

    import grail_duckdb as gd

    os.environ["GRAIL_DUCKDB_BACKEND"] = backend
    os.environ["GRAIL_DUCKDB_PROGRESS"] = "0"
    return gd.install(duckdb.connect(str(db)))


_NEXT = "SELECT reaches(1, 0)"

#: the next statement run with nothing written since, before each INSERT (the least kept)
QUIET_STATEMENTS = 3


def _sql_round(con, batch: pa.Table, backend: str, timer: _StatementTimer) -> dict:
    """INSERT ``batch``, then the next statement (timed, with the freshness step inside it),
    then the part written after it (its write timed; and how long it still ran once the
    statement had returned); the batch's edges checked."""
    from grail_duckdb.plugin import appends

    quiet = min(_timed(lambda: con.execute(_NEXT).fetchall(), backend)[1]
                for _ in range(QUIET_STATEMENTS))
    con.register("grail_bench_batch", batch)
    try:
        _, insert = _timed(lambda: con.execute(
            "INSERT INTO edges SELECT src, dst FROM grail_bench_batch").fetchall())
        timer.take()
        _, statement = _timed(lambda: con.execute(_NEXT).fetchall(), backend)
        _, waited = _timed(appends.wait_for_parts)
        row = {"rows": batch.num_rows, "insert_seconds": insert, "statement_seconds": statement,
               "quiet_statement_seconds": quiet, "part_waited_seconds": waited, **timer.take()}
        row["part_seconds"] = row.pop("save_parts_seconds")
        fwd, back = con.execute(
            "SELECT count(*) FILTER (WHERE reaches(src, dst)), "
            "count(*) FILTER (WHERE reaches(dst, src)) FROM grail_bench_batch").fetchall()[0]
    finally:
        con.unregister("grail_bench_batch")
    if fwd != batch.num_rows or back != 0:
        raise AssertionError(f"after an INSERT: {fwd:,} of {batch.num_rows:,} edges reachable, "
                             f"{back:,} reversed edges reachable (want all, none)")
    return row


def _table(con, edges: pa.Table) -> float:
    """Table ``edges`` of the database holding ``edges``; seconds."""
    con.register("grail_bench_edges", edges)
    try:
        _, t = _timed(lambda: con.execute(
            "CREATE TABLE edges AS SELECT src, dst FROM grail_bench_edges").fetchall())
        con.execute("CHECKPOINT")
    finally:
        con.unregister("grail_bench_edges")
    return t


def _grail_index(con, backend: str) -> tuple[dict, float]:
    """``SELECT * FROM grail_index('edges')``: its summary row and seconds."""
    def go():
        cur = con.execute("SELECT * FROM grail_index('edges')")
        return dict(zip([c[0] for c in cur.description], cur.fetchall()[0]))

    return _timed(go, backend)


def run_sql_appends(args, backend, workdir: Path, base, batches, res: dict, write) -> None:
    """The appends through SQL (``--sql``): into ``res["sql"]``."""
    db = workdir / "appends.duckdb"
    con = _connect(db, backend)
    sql = res["sql"] = {"table_seconds": _table(con, base)}
    summary, sql["grail_index_seconds"] = _grail_index(con, backend)
    sql["grail_index_action"] = summary["action"]
    con.execute(_NEXT).fetchall()
    _say(f"SQL: table of {base.num_rows:,} rows, grail_index {sql['grail_index_seconds']:.2f} s")
    sql["rows"] = []
    others = _Others()
    with _StatementTimer() as timer:
        for i, batch in enumerate(batches):
            row = _sql_round(con, batch, backend, timer)
            sql["rows"].append(row)
            _say(f"SQL append {i + 1}: {batch.num_rows:,} rows: next statement "
                 f"{row['statement_seconds'] * 1e3:.1f} ms (check "
                 f"{row['changes_seconds'] * 1e3:.1f} ms, {', '.join(row['found'])}), part "
                 f"write {row['part_seconds'] * 1e3:.1f} ms")
            write()
    res["others"]["SQL appends"] = others.done()
    summary, _ = _grail_index(con, backend)
    sql["final_action"], sql["final_note"] = summary["action"], summary["note"]
    con.close()


# --- the freshness check at table scale ------------------------------------------------------
def run_freshness(args, backend: str, workdir: Path, report: dict, write) -> None:
    """The freshness check after INSERTs into a table of ``args.table_rows`` rows (see the
    module); its figures into ``report["freshness"]``."""
    from grail_duckdb.plugin.staleness import table_check

    papers = max(2, int(args.table_rows / args.mean_citations))
    res = report["freshness"] = {"table_rows_asked": args.table_rows, "papers": papers,
                                 "insert_rows": args.insert_rows, "inserts": args.inserts}
    edges, res["generate_seconds"] = _timed(
        lambda: _graph(papers, args.mean_citations, args.seed))
    res["table_rows"] = edges.num_rows
    db = workdir / "freshness.duckdb"
    con = _connect(db, backend)
    res["table_seconds"] = _table(con, edges)
    del edges
    gc.collect()
    res["database_bytes"] = db.stat().st_size
    _say(f"freshness: table of {res['table_rows']:,} rows in {res['table_seconds']:.1f} s")
    write()
    summary, res["grail_index_seconds"] = _grail_index(con, backend)
    res["grail_index_action"], res["labels"] = summary["action"], summary["labels"]
    res["index_file_bytes"] = Path(summary["path"]).stat().st_size if summary["path"] else None
    _say(f"freshness: grail_index('edges') {res['grail_index_seconds']:.1f} s "
         f"({summary['action']})")
    con.execute(_NEXT).fetchall()
    quiet = [_timed(lambda: con.execute(_NEXT).fetchall(), backend)[1] for _ in range(25)]
    res["quiet_statement_seconds"] = min(quiet)
    cur = con.cursor()
    _, res["scan_seconds"] = _timed(lambda: table_check(cur, "edges", "src", "dst"))
    cur.close()
    write()
    rng = np.random.default_rng(args.seed + 7)
    per_paper = max(1, int(round(args.mean_citations)))
    res["rows"] = []
    next_key = papers
    others = _Others()
    with _StatementTimer() as timer:
        for i in range(args.inserts):
            new = args.insert_rows // per_paper
            src = np.repeat(np.arange(next_key, next_key + new, dtype=np.int64), per_paper)
            src = np.concatenate([src, np.full(args.insert_rows - src.shape[0], next_key,
                                               np.int64)])
            dst = rng.integers(0, papers, args.insert_rows, dtype=np.int64)
            next_key += new + 1
            row = _sql_round(con, pa.table({"src": src, "dst": dst}), backend, timer)
            res["rows"].append(row)
            _say(f"freshness: INSERT of {args.insert_rows:,} rows: check "
                 f"{row['changes_seconds'] * 1e3:.1f} ms ({', '.join(row['found'])}), absorb "
                 f"{row['absorb_seconds'] * 1e3:.1f} ms, statement "
                 f"{row['statement_seconds'] * 1e3:.1f} ms, part write {row['part_seconds'] * 1e3:.1f} "
                 "ms")
            write()
    res["others"] = {"INSERTs and the statements after them": others.done()}
    summary, _ = _grail_index(con, backend)
    res["final_action"], res["final_note"] = summary["action"], summary["note"]
    con.close()


# --- the command -----------------------------------------------------------------------------
def _sizes(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in str(text).split(",") if x.strip()]


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the options of ``python -m benchmarks append`` on ``p``."""
    p.add_argument("--papers", type=int, default=1_000_000,
                   help="papers of the generated citation graph (default 1,000,000; 0: no "
                        "appends, only the freshness check)")
    p.add_argument("--mean-citations", type=float, default=5.0,
                   help="mean citations per paper (default 5)")
    p.add_argument("--appends", type=int, default=10, help="appends in a row (default 10)")
    p.add_argument("--share", type=float, default=0.01,
                   help="new papers per append, a share of --papers (default 0.01)")
    p.add_argument("--random", type=_sizes, default=[1_000_000],
                   help="uniform random pair counts, comma-separated (default 1000000)")
    p.add_argument("--reachable", type=int, default=100_000,
                   help="reachable pairs (default 100,000; 0: none)")
    p.add_argument("--repeat", type=int, default=2,
                   help="rounds of each query set per index, the least kept (default 2)")
    p.add_argument("--sequential", action="store_true",
                   help="free the appended index before the rebuild (one index on the device "
                        "at a time); its query rounds run first")
    p.add_argument("--append-rounds", type=int, default=1,
                   help="rounds of the base build and the appends, and as many full builds; "
                        "the least time of each kept (default 1)")
    p.add_argument("--after-load", action="store_true",
                   help="append to the base index loaded back from its file (as a later "
                        "process would), not to the one the build returned")
    p.add_argument("--sql", action="store_true",
                   help="also run the appends through SQL on a database file")
    p.add_argument("--sql-only", action="store_true",
                   help="with --sql: only the full builds and the appends through SQL (no "
                        "appends in Python, no query sets)")
    p.add_argument("--table-rows", type=int, default=0,
                   help="the freshness check: rows of the edge table (0, default: skipped)")
    p.add_argument("--insert-rows", type=int, default=10_000,
                   help="rows per INSERT of the freshness check (default 10,000)")
    p.add_argument("--inserts", type=int, default=8, help="INSERTs of the freshness check")
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None,
                   help="where the index files and databases go (default: a temporary folder, "
                        "removed after)")
    p.add_argument("--no-warm-up", action="store_true", help="time the first-use compiles too")
    p.add_argument("--out", default="bench-append", help="folder of the report")
    p.add_argument("--name", default="append", help="the report's file name, without .json")
    return p


def _command(args) -> str:
    """The command line that repeats a run of these arguments."""
    words = ["python -m benchmarks append"]
    skip = {"func", "command", "out", "name", "workdir"}
    if not args.table_rows:
        skip |= {"table_rows", "insert_rows", "inserts"}
    if not args.papers:
        skip |= {"appends", "share", "random", "reachable", "repeat"}
    if args.sql_only:
        skip |= {"random", "reachable", "repeat", "sequential", "after_load"}
    for key, value in vars(args).items():
        if key in skip or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        else:
            words += [flag, ",".join(map(str, value)) if isinstance(value, list) else
                      f"{value:g}" if isinstance(value, float) else str(value)]
    return " ".join(words)


def run(args) -> int:
    """Run the measurements that ``args`` ask for; write the report, print its Markdown.
    Exit status 1 when answers differ (the report is written first)."""
    backend = resolve(args.backend)
    os.environ.setdefault("GRAIL_DUCKDB_PROGRESS", "0")
    report = {"kind": "append", "command": _command(args), "machine": machine_info(),
              "backend": backend, "targets": TARGETS, "complete": False}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def write():
        (out / f"{args.name}.json").write_text(json.dumps(report, indent=1,
                                                          default=_json_default))

    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir = Path(args.workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="grail-append-")))
        if not args.no_warm_up:
            report["warm_up_seconds"] = warm_up(backend, args.mean_citations, workdir,
                                                sql=bool(args.sql or args.table_rows))
            _say(f"warm-up (first-use compiles, not timed below): "
                 f"{report['warm_up_seconds']:.1f} s")
        if args.papers:
            (workdir / "appends").mkdir(exist_ok=True)
            run_appends(args, backend, workdir / "appends", report, write)
        if args.table_rows:
            (workdir / "freshness").mkdir(exist_ok=True)
            run_freshness(args, backend, workdir / "freshness", report, write)
        if args.workdir:
            shutil.rmtree(workdir / "appends", ignore_errors=True)
            shutil.rmtree(workdir / "freshness", ignore_errors=True)
    report["complete"] = True
    report["load_average_at_end"] = round(os.getloadavg()[0], 2)
    publish(json.loads(json.dumps(report, default=_json_default)), out, args.name, render)
    wrong = [n for n, f in report.get("appends", {}).get("queries", {}).items()
             if not f.get("answers_equal")]
    if wrong:
        print(f"answers differ between the appended and the rebuilt index: {wrong}",
              file=sys.stderr)
        return 1
    return 0


# --- the report ------------------------------------------------------------------------------
def _verdict(value, target) -> str:
    return "**met**" if value <= target else "**missed**"


def render(report: dict) -> str:
    """An ``append`` report as Markdown (see the module): the appends against the full build,
    the query sets appended against rebuilt, the SQL appends, the freshness check."""
    m, t = report["machine"], report["targets"]
    where = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gib')} GiB" + (
        f"; GPU: {m['gpu']}" if m.get("gpu") else "")
    lines = [f"Command: `{report['command']}`", "",
             f"Date: {m.get('date', '?')}. Machine: {where}. Backend: {report['backend']}. "
             f"Load average when the run began: {m.get('load_average_at_start')}, when it "
             f"ended: {report.get('load_average_at_end', '–')}."
             + ("" if report.get("complete", True) else " **The run was cut short**: the "
                "figures it measured.") + " Targets (issue 41): an append absorbed and "
             f"persisted in at most {t['append_share']:.0%} of the full build; queries on the "
             f"appended index at most {t['query_ratio']:g}x the rebuilt one's time; the "
             f"freshness check after an INSERT at most {t['check_ms']:g} ms.", ""]
    if report.get("appends"):
        lines += _appends_md(report["appends"], t)
    if report.get("freshness"):
        lines += _freshness_md(report["freshness"], t)
    return "\n".join(lines).rstrip() + "\n"


def _others_md(parts: dict | None) -> list[str]:
    """A line: the CPU time other processes took while each part ran (a shared machine)."""
    rows = [f"{k} {v['others_cpu_seconds']:.1f} s of {v['wall_seconds']:.1f} s"
            for k, v in (parts or {}).items() if "others_cpu_seconds" in v]
    return ["", "CPU time other processes took while each part ran (their work slows ours "
            "on a shared machine), of the part's wall time: " + "; ".join(rows) + "."] \
        if rows else []


def _first_move(absorbs: list[float], loaded: bool = False) -> list[str]:
    """A note where the first absorb stands out: it pays for work done once."""
    if loaded or len(absorbs) < 2 or absorbs[0] <= 3 * statistics.median(absorbs[1:]):
        return []
    return ["", f"The first absorb ({_ms(absorbs[0])} ms against a median of "
            f"{_ms(statistics.median(absorbs[1:]))} ms for the others) pays for work done once: "
            "the index's arrays moved into allocations with room for later appends "
            "(`grail_duckdb.growth`), which the later appends write into, and the compile of "
            "any kernel the warm-up did not reach."]


def _appends_md(a: dict, t: dict) -> list[str]:
    full = a.get("full_build_seconds")
    rounds = a.get("rounds") or []
    rows = a.get("rows") or (rounds[-1]["rows"] if rounds else [])
    several = len(rounds) > 1
    if not rounds and full:  # --sql-only: the full builds alone here
        return ["### Appends", "",
                f"gen:citation:{a['papers']:,} x {a['mean_citations']:g}: "
                f"{a.get('edges', 0):,} edges, generated in {a.get('generate_seconds', 0):.1f} s; "
                f"the base: the first {a.get('base_papers', 0):,} papers; "
                f"{a['appends']} batches of {a.get('papers_per_append', 0):,} new papers each. "
                f"**Full build** of all the edges: **{full:.2f} s** (each: "
                + " / ".join(f"{x:.2f}" for x in a.get("full_build_rounds", []))
                + " s). The appends in Python and the query sets did not run (`--sql-only`).",
                ""] + (_sql_md(a["sql"], full, t) if a.get("sql") else []) + _others_md(
                    a.get("others")) + [""]
    out = ["### Appends", "",
           f"gen:citation:{a['papers']:,} x {a['mean_citations']:g}: {a.get('edges', 0):,} "
           f"edges, generated in {a.get('generate_seconds', 0):.1f} s. The base: the first "
           f"{a.get('base_papers', 0):,} papers ({a.get('base_edges', 0):,} edges), built and "
           f"saved in {a.get('base_build_seconds', 0):.2f} s"
           + (f", loaded back in {a['base_load_seconds']:.2f} s (the appends go to the "
              "loaded index)" if a.get("after_load") else " (the appends go to the index the "
              "build returned)")
           + f"; then {a['appends']} appends of "
           f"{a.get('papers_per_append', 0):,} new papers each ({a['share']:.0%}). "
           + (f"Labels: d = {a['labels']} (the backend's default). " if a.get("labels") else "")
           + (f"**Full build** of all the edges (the index rebuilt on the same data): "
              f"**{full:.2f} s**" + (" (each: " + " / ".join(
                  f"{x:.2f}" for x in a.get("full_build_rounds", [])) + " s)" if several else "")
              + "." if full else "The full build did not run.")
           + (f" {len(rounds)} rounds, each from a new base: the least time of each append "
              "(its round's absorb and persist) and of the builds; every round's absorb + "
              "persist in the last column." if several else ""), "",
           "| append | new papers' edges | new vertices | absorb (ms) | persist (ms) | "
           "absorb + persist (ms) | of the full build |" + (" each round (ms) |" if several
                                                            else ""),
           "|---:|---:|---:|---:|---:|---:|---:|" + ("---|" if several else "")]
    shares = []
    for i, r in enumerate(rows, 1):
        total = r["absorb_seconds"] + r["persist_seconds"]
        share = total / full if full else None
        if share is not None:
            shares.append(share)
        out.append(f"| {i} | {r['edges']:,} | {r['vertices']:,} | {_ms(r['absorb_seconds'])} | "
                   f"{_ms(r['persist_seconds'])} | {_ms(total)} | "
                   + ("–" if share is None else f"{share:.2%}") + " |"
                   + (" " + " / ".join(_ms(x) for x in r.get("each_round_seconds", []))
                      + " |" if several else ""))
    if shares:
        out += ["", _shares_line("Absorb + persist", shares, t["append_share"], "append")]
        out += _first_move([r["absorb_seconds"] for r in rows], a.get("after_load", False))
    out.append("")
    qs = a.get("queries") or {}
    if qs:
        out += ["After the appends, the same pairs answered by the appended index and by the "
                "rebuilt one" + (" (the appended index's rounds first, then it was freed)"
                                 if a.get("sequential") else ", alternated")
                + "; the least time of the rounds (each round's times in the last column). "
                "Searched: pairs no cut settled.", "",
                "| query set | appended (ms) | rebuilt (ms) | ratio | target | answers equal | "
                "reachable | searched: appended / rebuilt | rounds (ms): appended; rebuilt |",
                "|---|---:|---:|---:|---|---|---:|---|---|"]
        for name, f in qs.items():
            ratio = f.get("ratio")
            verdict = "–" if ratio is None else (
                f"≤ {t['query_ratio']:g}x: {_verdict(ratio, t['query_ratio'])}")
            eq = f.get("answers_equal")
            out.append(
                f"| {name} | {_ms(f.get('appended_seconds'))} | {_ms(f.get('rebuilt_seconds'))} "
                f"| {'–' if ratio is None else f'{ratio:.2f}'} | {verdict} | "
                f"{'–' if eq is None else 'yes' if eq else '**NO**'} | "
                f"{f.get('rebuilt_reachable', f.get('appended_reachable', 0)):,} | "
                f"{f.get('appended_searched', 0):,} / {f.get('rebuilt_searched', 0):,} | "
                + "; ".join(" / ".join(_ms(x) for x in f.get(f"{k}_rounds", []))
                            for k in ("appended", "rebuilt")) + " |")
        out.append("")
    if a.get("sql"):
        out += _sql_md(a["sql"], full, t)
    return out + _others_md(a.get("others")) + [""]


def _shares_line(what: str, shares: list[float], target: float, step: str) -> str:
    """The summary of a column of shares of the full build against the target: over every
    step, then without the first (whose absorb moves the index's arrays)."""
    line = (f"{what}, of the full build: mean {statistics.mean(shares):.2%}, max "
            f"{max(shares):.2%}; target at most {target:.0%} each: {_verdict(max(shares), target)}")
    if len(shares) > 1:
        line += (f"; without the first {step}: max {max(shares[1:]):.2%}, "
                 f"{_verdict(max(shares[1:]), target)}")
    return line + "."


def _sql_md(s: dict, full, t: dict) -> list[str]:
    rows = s.get("rows", [])
    quiet = [r["quiet_statement_seconds"] for r in rows if "quiet_statement_seconds" in r]
    out = ["### Appends through SQL", "",
           f"The base papers' edges as table `edges` of a database file "
           f"({s['table_seconds']:.1f} s), `grail_index('edges')` "
           f"{s['grail_index_seconds']:.2f} s; then each batch INSERTed, and the next "
           f"statement that uses the index (`{_NEXT}`) timed: the freshness check (DuckDB's log "
           "proves an append; the new rows read) and the absorb run inside it, and with the "
           "bookkeeping around them make its freshness step. The part is written on the "
           "plugin's writer thread once the statement has ended (its write timed there)."
           + (f" The same statement with nothing written since (before each INSERT): median "
              f"{_ms(statistics.median(quiet))} ms, all of it the statement's own work (DuckDB "
              "plans the `reaches` macro and calls the plugin's functions)." if quiet else "")
           + f" Last `grail_index`: {s.get('final_action')} ({s.get('final_note')}).", "",
           "| INSERT | rows | next statement (ms) | check (ms) | absorb (ms) | freshness step "
           "(ms) | part write (ms) | statement + part, of the full build | freshness step + "
           "part, of the full build | the check found |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    shares, steps = [], []
    for i, r in enumerate(rows, 1):
        share = (r["statement_seconds"] + r["part_seconds"]) / full if full else None
        step = (r["verify_seconds"] + r["part_seconds"]) / full if full else None
        if share is not None:
            shares.append(share)
            steps.append(step)
        out.append(f"| {i} | {r['rows']:,} | {_ms(r['statement_seconds'])} | "
                   f"{_ms(r['changes_seconds'])} | {_ms(r['absorb_seconds'])} | "
                   f"{_ms(r['verify_seconds'])} | {_ms(r['part_seconds'])} | "
                   + " | ".join("–" if x is None else f"{x:.2%}" for x in (share, step))
                   + f" | {'; '.join(r['found'])} |")
    if shares:
        out += ["", _shares_line("Statement + part", shares, t["append_share"], "INSERT"),
                "", _shares_line("Freshness step + part", steps, t["append_share"], "INSERT")]
        out += _first_move([r["absorb_seconds"] for r in rows])
    return out + [""]


def _freshness_md(f: dict, t: dict) -> list[str]:
    rows = f.get("rows", [])
    out = ["### The freshness check after an INSERT", "",
           f"A database file ({f.get('database_bytes', 0) / 2**30:.2f} GiB after a checkpoint) "
           f"whose table `edges` holds gen:citation:{f['papers']:,}: "
           f"**{f.get('table_rows', 0):,} rows** (made in {f.get('table_seconds', 0):.1f} s); "
           f"`grail_index('edges')` {f.get('grail_index_seconds', 0):.1f} s "
           f"({f.get('grail_index_action')}, d = {f.get('labels', '?')}). Then {len(rows)} INSERTs of "
           f"{f['insert_rows']:,} rows (new papers citing older ones), each followed by "
           f"`{_NEXT}`. Check: `appends.changes` (the file's header and the log's new entries "
           "prove an append; the new rows read); absorb: `appends.absorb`; freshness step: "
           "`appends.verify`, both and the bookkeeping; statement: the whole next statement. "
           f"The same statement with nothing written since: {_ms(f.get('quiet_statement_seconds'))}"
           f" ms; the scan of the whole table that the proof avoids: "
           f"{_ms(f.get('scan_seconds'))} ms. Last `grail_index`: {f.get('final_action')} "
           f"({f.get('final_note')}).", "",
           "| INSERT | check (ms) | the check found | absorb (ms) | freshness step (ms) | next "
           "statement (ms) | part write (ms) |", "|---:|---:|---|---:|---:|---:|---:|"]
    for i, r in enumerate(rows, 1):
        out.append(f"| {i} | {_ms(r['changes_seconds'])} | {'; '.join(r['found'])} | "
                   f"{_ms(r['absorb_seconds'])} | {_ms(r['verify_seconds'])} | "
                   f"{_ms(r['statement_seconds'])} | {_ms(r['part_seconds'])} |")
    checks = [r["changes_seconds"] * 1e3 for r in rows]
    if checks:
        later = checks[1:] or checks
        within = sum(c <= t["check_ms"] for c in checks)
        out += ["", f"The check: median {statistics.median(checks):.2f} ms, max "
                f"{max(checks):.2f} ms (the first INSERT's {checks[0]:.2f} ms; median of the "
                f"later ones {statistics.median(later):.2f} ms); target at most "
                f"{t['check_ms']:g} ms: median {_verdict(statistics.median(checks), t['check_ms'])}"
                f", max {_verdict(max(checks), t['check_ms'])} ({within} of {len(checks)} "
                "checks within it). The whole next statement: "
                f"median {statistics.median(r['statement_seconds'] for r in rows) * 1e3:.1f} "
                "ms."]
        out += _first_move([r["absorb_seconds"] for r in rows])
    return out + _others_md(f.get("others")) + [""]
