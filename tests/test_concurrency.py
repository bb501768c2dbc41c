"""Many threads against ONE index, on every backend present, every answer checked against the
oracle (the full reachability matrix of the graph, one SciPy BFS per vertex):

* eight Python threads, each making calls of mixed sizes on both sides of
  ``GpuSettings.host_below`` (a GPU index classifies the small ones on the host, from a copy
  of its labels made once under a lock, and the large ones on the device), with and without
  the cuts;
* four DuckDB cursors on a database with ``threads=4``, each running the scalar ``reaches`` and
  the whole-column ``reaches_pairs`` over a table of 200,000 pairs (a GPU backend answers every
  2,048-row chunk on the device: the fixtures set ``host_below`` to 0).
"""
from __future__ import annotations

import functools
import threading

import duckdb
import numpy as np
import pyarrow as pa

import grail_duckdb as gd
from grail_duckdb.plugin import registry_of
from oracle import bfs_reachable
from strategies import rmat

THREADS = 8
#: the host-copy threshold as the GPU backend ships it (GpuSettings.host_below)
SHIPPED_HOST_BELOW = 32_768


@functools.lru_cache(maxsize=1)
def graph_and_closure():
    """An R-MAT graph (a giant SCC, skewed degrees, ids without edges) and ``closure[u, v]``:
    does u reach v (every id reaches itself)."""
    g = rmat(11, 4, seed=5)
    return g, bfs_reachable(g.src, g.dst, g.n, np.arange(g.n))


def oracle(qs, qd):
    """The contract's answers for query ids in 0..n+1 (ids n, n+1 and ids without an edge are
    unknown keys)."""
    g, closure = graph_and_closure()
    vertex = np.zeros(g.n + 2, bool)
    vertex[g.src] = vertex[g.dst] = True
    known = vertex[qs] & vertex[qd]
    want = qs == qd
    want[known] |= closure[qs[known], qd[known]]
    return want


def run_threads(count, work):
    """Run ``work(i)`` on ``count`` threads started together; re-raise the first error."""
    errors, start = [], threading.Barrier(count)

    def body(i):
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # reported on the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_threads_share_one_index(backend):
    if backend.name == "gpu":  # small calls classified on the host, as shipped, large on the device
        from dataclasses import replace

        from grail_duckdb.kernels.gpu import GpuKernels

        backend = GpuKernels(replace(backend.settings, host_below=SHIPPED_HOST_BELOW))
    g, _ = graph_and_closure()
    idx = gd.build_index(g.src, g.dst, backend=backend)
    sizes = (1, 700, 2048, SHIPPED_HOST_BELOW - 1, SHIPPED_HOST_BELOW + 1)
    done = []

    def work(i):
        rng = np.random.default_rng(i)
        for call in range(len(sizes)):
            size = sizes[(i + call) % len(sizes)]
            qs, qd = rng.integers(0, g.n + 2, size), rng.integers(0, g.n + 2, size)
            got, stats = idx.reaches_with_stats(qs, qd, use_cuts=(i + call) % 3 != 0)
            np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), oracle(qs, qd),
                                          err_msg=f"thread {i}, call of {size}")
            assert stats.queries == size
            done.append(size)

    run_threads(THREADS, work)
    assert len(done) == THREADS * len(sizes)
    if backend.name != "cpu":
        assert idx._host_labels is not None and idx._host_labels.dag.m == 0


def test_duckdb_cursors_query_one_index_concurrently(backend, monkeypatch):
    g, _ = graph_and_closure()
    monkeypatch.setenv("GRAIL_DUCKDB_BACKEND", backend.name)
    con = gd.install(duckdb.connect())
    con.execute("SET threads = 4")
    edges = pa.table({"src": g.src, "dst": g.dst})
    con.execute("CREATE TABLE edges AS SELECT * FROM edges")
    rng = np.random.default_rng(9)
    span = g.n + 2
    flat = rng.choice(span * span, 200_000, replace=False)  # distinct pairs: joins stay 1:1
    qs, qd = flat // span, flat % span
    pairs = pa.table({"a": qs, "b": qd, "want": oracle(qs, qd)})
    con.execute("CREATE TABLE pairs AS SELECT * FROM pairs")
    con.execute("SELECT grail_index('edges')").fetchall()
    entry = registry_of(con).entries["edges"]
    entry.index = entry.index.to_backend(backend)  # this configuration's kernels
    assert entry.index.kernels is backend
    queries = (
        "SELECT count(*), count(*) FILTER (WHERE reaches(a, b) IS DISTINCT FROM want) "
        "FROM pairs",
        "SELECT count(*), count(*) FILTER (WHERE r.reaches IS DISTINCT FROM p.want) "
        "FROM reaches_pairs('pairs', 'a', 'b') r JOIN pairs p ON r.src = p.a AND r.dst = p.b",
    )
    results = []

    def work(i):
        cur = gd.install(con.cursor())
        for q in queries[i % 2:] + queries[:i % 2]:
            results.append(cur.execute(q).fetchall())

    run_threads(4, work)
    assert results == [[(200_000, 0)]] * 8
