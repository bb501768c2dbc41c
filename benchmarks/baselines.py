"""The alternatives the bench measures the engine against, each behind one small interface.

A baseline is prepared once per workload (``prepare(edges)``: build the NetworkX graph, the SciPy
matrix, the DuckDB edge table; timed apart as its set-up) and then answers a batch of pairs
(``answer(src, dst) -> bool ndarray``). Per-pair baselines are far too slow for 100K queries on
real graphs, so :func:`measure` runs them on a prefix of the query set sized to a time budget,
and scales the time up to the whole set (the result says so: ``sampled``). Every baseline's
answers are checked against the engine's on the same pairs (``agree``): a fast wrong baseline
would make every ratio meaningless.

The baselines:

* ``networkx``: ``networkx.has_path`` per pair (a bidirectional breadth-first search);
* ``scipy``: ``scipy.sparse.csgraph.breadth_first_order`` from the source, per pair;
* ``duckdb-cte``: one DuckDB recursive CTE with ``USING KEY`` per pair (the set of reached
  vertices, keyed by vertex, grown until no new vertex appears);
* ``identity-udf``: an arrow UDF returning ``a = b`` over the pairs table, DuckDB's floor for any
  Python UDF (not a reachability method: the cost of calling Python at all).

The plain multi-source bitmask BFS (the engine's search with every cut off) and the SQL paths of
the plugin are driven from :mod:`benchmarks.bench`, because they need the index.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: a run this short is repeated (best of three): timer noise, caches
SHORT_SECONDS = 1.0
#: runs shorter than this are repeated TINY_REPEAT times (see :func:`best_of`)
TINY_SECONDS = 0.01
TINY_REPEAT = 25


@dataclass
class Measured:
    """Time for one method on one query set (``seconds`` covers all ``total`` pairs)."""

    seconds: float
    total: int
    run_pairs: int
    sampled: bool
    agree: bool | None = None
    note: str = ""

    @property
    def pairs_per_second(self) -> float:
        return self.total / self.seconds if self.seconds > 0 else float("inf")

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "total_pairs": self.total,
                "run_pairs": self.run_pairs, "sampled": self.sampled,
                "pairs_per_second": self.pairs_per_second, "agree": self.agree,
                "note": self.note}


def best_of(fn, repeat: int = 3, short: float = SHORT_SECONDS, before=None):
    """``(seconds, result)`` of the fastest of up to ``repeat`` runs of ``fn()``; ``before``,
    if given, is called before each run, untimed.

    Runs longer than ``short`` seconds are not repeated: they are not noise-bound, and the
    bench must finish. Runs under ``TINY_SECONDS`` are repeated at least ``TINY_REPEAT``
    times: a sub-millisecond call is all noise at three.
    """
    best = result = None
    runs = 0
    while best is None or (best < short and runs < (max(repeat, TINY_REPEAT)
                                                     if best < TINY_SECONDS else repeat)):
        if before is not None:
            before()
        t0 = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t0
        best = seconds if best is None else min(best, seconds)
        runs += 1
    return best, result


def measure(answer, src: pa.Array, dst: pa.Array, expected: np.ndarray, *, budget: float,
            probe: int) -> Measured:
    """Time ``answer(src, dst)`` on a prefix of the pairs that fits ``budget`` seconds.

    A probe of ``probe`` pairs estimates the time per pair; the measured run then covers as many
    pairs as the budget allows (all of them when it can) and its time is scaled to the whole
    set. ``expected`` (the engine's answers) checks that the baseline agrees.
    """
    total = len(src)
    n = min(total, max(1, probe))
    seconds, got = best_of(lambda: answer(src[:n], dst[:n]))
    per_pair = seconds / n
    if n < total and per_pair * n < budget:
        n = min(total, max(n, int(budget / max(per_pair, 1e-9))))
        seconds, got = best_of(lambda: answer(src[:n], dst[:n]))
        per_pair = seconds / n
    agree = bool(np.array_equal(np.asarray(got, bool), expected[:n]))
    return Measured(seconds=per_pair * total, total=total, run_pairs=n, sampled=n < total,
                    agree=agree)


def dense_ids(edges_src: pa.Array, edges_dst: pa.Array):
    """Keys -> 0..n-1 for the baselines that need integer vertices, independent of the engine.

    Returns ``(keys, encode)``: the sorted distinct keys and a function mapping a key column to
    ids (-1 for a key that is not a vertex).
    """
    keys = pc.unique(pa.concat_arrays([_plain(edges_src), _plain(edges_dst)]))
    keys = keys.take(pc.sort_indices(keys))

    def encode(col: pa.Array) -> np.ndarray:
        return pc.index_in(_plain(col), value_set=keys).fill_null(-1).to_numpy(
            zero_copy_only=False).astype(np.int64)

    return keys, encode


def _plain(col) -> pa.Array:
    """One contiguous Array; small string types widened so columns concatenate."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_string(col.type):
        col = col.cast(pa.large_string())
    return col


class NetworkXBaseline:
    """``networkx.has_path(G, u, v)`` per pair."""

    name = "networkx has_path"

    def prepare(self, src: pa.Array, dst: pa.Array) -> None:
        import networkx as nx

        g = nx.DiGraph()
        g.add_edges_from(zip(src.to_pylist(), dst.to_pylist()))
        self.graph = g

    def answer(self, src: pa.Array, dst: pa.Array) -> np.ndarray:
        import networkx as nx

        g = self.graph
        out = np.zeros(len(src), bool)
        for i, (u, v) in enumerate(zip(src.to_pylist(), dst.to_pylist())):
            if u == v:
                out[i] = True
            elif u in g and v in g:
                out[i] = nx.has_path(g, u, v)
        return out


class ScipyBaseline:
    """``scipy.sparse.csgraph.breadth_first_order`` from the source, then a membership test."""

    name = "scipy BFS"

    def prepare(self, src: pa.Array, dst: pa.Array) -> None:
        import scipy.sparse as sp

        _, self.encode = dense_ids(src, dst)
        s, d = self.encode(src), self.encode(dst)
        n = int(max(s.max(initial=-1), d.max(initial=-1))) + 1
        self.matrix = sp.csr_array((np.ones(s.shape[0], np.float64), (s, d)), shape=(n, n))

    def answer(self, src: pa.Array, dst: pa.Array) -> np.ndarray:
        from scipy.sparse.csgraph import breadth_first_order

        s, d = self.encode(src), self.encode(dst)
        out = np.zeros(s.shape[0], bool)
        for i in range(s.shape[0]):
            if s[i] < 0 or d[i] < 0:
                out[i] = s[i] == d[i] and s[i] >= 0
                continue
            reached = breadth_first_order(self.matrix, int(s[i]), directed=True,
                                          return_predecessors=False)
            out[i] = bool((reached == d[i]).any())
        return out


_CTE = """
WITH RECURSIVE reached(v) USING KEY (v) AS (
    SELECT ?::{t}
    UNION
    SELECT e.dst FROM reached JOIN bench_edges e ON e.src = reached.v
    WHERE NOT EXISTS (SELECT 1 FROM recurring.reached r WHERE r.v = e.dst)
)
SELECT count(*) > 0 FROM reached WHERE v = ?::{t}
"""


class DuckDBCteBaseline:
    """One recursive CTE with ``USING KEY`` per pair, on a DuckDB table of the edges.

    The CTE keeps one row per reached vertex (the key) and adds, each round, the targets of the
    last round's vertices that it has not reached yet; the pair is reachable when the target is
    among the rows at the end.
    """

    name = "duckdb recursive CTE"

    def __init__(self, threads: int = 1):
        self.threads = threads

    def prepare(self, src: pa.Array, dst: pa.Array) -> None:
        import duckdb

        self.con = duckdb.connect()
        self.con.execute(f"SET threads = {int(self.threads)}")
        self.con.execute("SET enable_progress_bar = false")
        table = pa.table({"src": _plain(src), "dst": _plain(dst)})
        self.con.register("bench_edges_view", table)
        self.con.execute("CREATE TABLE bench_edges AS SELECT * FROM bench_edges_view")
        self.con.unregister("bench_edges_view")
        self.sql_type = "VARCHAR" if pa.types.is_large_string(table.column(0).type) else "BIGINT"
        self.sql = _CTE.format(t=self.sql_type)

    def answer(self, src: pa.Array, dst: pa.Array) -> np.ndarray:
        out = np.zeros(len(src), bool)
        for i, (u, v) in enumerate(zip(src.to_pylist(), dst.to_pylist())):
            out[i] = bool(self.con.execute(self.sql, [u, v]).fetchall()[0][0])
        return out

    def close(self) -> None:
        self.con.close()


def pairs_connection(sets: dict, threads: int = 1):
    """A DuckDB connection holding each query set as a native table ``pairs_<set>(a, b)``."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET enable_progress_bar = false")
    for name, table in sets.items():
        con.register("bench_view", pa.table({"a": _plain(table.column(0)),
                                             "b": _plain(table.column(1))}))
        con.execute(f"CREATE TABLE pairs_{name} AS SELECT * FROM bench_view")
        con.unregister("bench_view")
    return con


def identity_udf_seconds(con, table: str) -> tuple[float, int]:
    """Best-of-three time of ``count(*) WHERE identity(a, b)`` with an arrow UDF ``a = b``.

    Returns ``(seconds, count)``: the floor under any Python UDF over the same pairs.
    """
    import duckdb.sqltypes as st

    col_type = con.execute(f"SELECT typeof(a) FROM {table} LIMIT 1").fetchall()[0][0]
    t = st.VARCHAR if col_type == "VARCHAR" else st.BIGINT
    try:
        con.remove_function("bench_identity")
    except Exception:  # not registered yet
        pass
    con.create_function("bench_identity", lambda a, b: pc.equal(a, b), [t, t], st.BOOLEAN,
                        type="arrow")
    seconds, row = best_of(lambda: con.execute(
        f"SELECT count(*) FROM {table} WHERE bench_identity(a, b)").fetchall()[0])
    return seconds, int(row[0])


#: the per-pair baselines, in the order they run
PER_PAIR = (NetworkXBaseline, ScipyBaseline, DuckDBCteBaseline)

_CTE_PATHS = """
WITH RECURSIVE r(v, hops{path_col}) USING KEY (v) AS (
    SELECT $s::{t}, 0{path_start}
    UNION
    SELECT e.dst, min(r.hops) + 1{path_step}
    FROM r JOIN bench_edges e ON e.src = r.v
    WHERE NOT EXISTS (SELECT 1 FROM recurring.r q WHERE q.v = e.dst)
      AND NOT EXISTS (SELECT 1 FROM recurring.r q WHERE q.v = $t::{t}){bound}
    GROUP BY e.dst
)
SELECT {answer} FROM r WHERE v = $t::{t}
"""


class DuckDBCtePaths(DuckDBCteBaseline):
    """The path functions as one recursive CTE with ``USING KEY`` per pair: a breadth-first
    search keyed by vertex, each round adding the targets not reached yet with their hops
    (and, for ``reaches_path``, the smallest of the paths that reach them: the smallest
    shortest path, as the engine's), stopped once the target is reached or, for
    ``reaches_within``, at k hops. A query that runs past ``cap`` seconds is interrupted: its
    answer is ``STOPPED`` and its time counts as ``cap`` (a lower bound).

    >>> cte = DuckDBCtePaths(threads=1)
    >>> cte.prepare(pa.array([1, 2, 1, 3]), pa.array([2, 3, 4, 4]))
    >>> [cte.answer_one(f, 1, 4, k)[0] for f, k in (("path", None), ("hops", None), ("within", 0))]
    [[1, 4], 1, False]
    >>> cte.answer_one("path", 4, 1)[0], cte.answer_one("path", 2, 4)[0]
    (None, [2, 3, 4])
    """

    name = "duckdb recursive CTE (USING KEY)"
    STOPPED = "stopped"

    def __init__(self, threads: int = 0, cap: float = 10.0):
        super().__init__(threads)
        self.cap = cap

    def prepare(self, src: pa.Array, dst: pa.Array) -> None:
        if self.threads <= 0:
            self.threads = os.cpu_count() or 1
        super().prepare(src, dst)
        t = self.sql_type
        plain = dict(t=t, path_col="", path_start="", path_step="")
        path = dict(t=t, path_col=", path", path_start=f", [$s::{t}]",
                    path_step=", min(list_append(r.path, e.dst))")
        self.queries = {
            "within": _CTE_PATHS.format(**plain, bound=" AND r.hops < $k",
                                        answer="min(hops) IS NOT NULL"),
            "hops": _CTE_PATHS.format(**plain, bound="", answer="min(hops)"),
            "path": _CTE_PATHS.format(**path, bound="", answer="min(path)"),
        }

    def answer_one(self, function: str, s, t, k: int | None = None):
        """``(answer, seconds)`` of one pair: the function is ``within`` (needs ``k``),
        ``hops`` or ``path``."""
        params = {"s": s, "t": t} if k is None else {"s": s, "t": t, "k": int(k)}
        timer = threading.Timer(self.cap, self.con.interrupt)
        timer.start()
        t0 = time.perf_counter()
        try:
            got = self.con.execute(self.queries[function], params).fetchall()[0][0]
        except Exception as exc:  # duckdb.InterruptException, by the timer
            if "interrupt" not in str(exc).lower():
                raise
            got = self.STOPPED
        finally:
            timer.cancel()
        return got, time.perf_counter() - t0
