"""Seeded query workloads: uniform random pairs and pairs known to be reachable.

The two query sets of the GRAIL papers and of the bench command: "random" pairs (almost all
unreachable on sparse graphs) and "positive" pairs (all reachable). Reachable pairs come
from random forward walks on the edge list, all walks advanced together by one NumPy step,
so 100K pairs on a graph of millions of edges take well under a second after the CSR.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from grail_duckdb.engine.ids import assign_ids
from grail_duckdb.engine.ingest import as_column, edge_columns
from grail_duckdb.kernels import CpuKernels

__all__ = ["random_pairs", "reachable_pairs", "vertex_keys"]

#: default upper bound of the length of the walks of :func:`reachable_pairs`
MAX_STEPS = 64


def _pair_table(src: pa.Array, dst: pa.Array) -> pa.Table:
    return pa.table({"src": src, "dst": dst})


def vertex_keys(edges, *, src: str = "src", dst: str = "dst") -> pa.Array:
    """The distinct vertex keys of an edge table, sorted (a .gra file's isolated ones too).

    >>> vertex_keys(pa.table({"src": [3, 1], "dst": [1, 2]})).to_pylist()
    [1, 2, 3]
    """
    cols = edge_columns(edges, dst, src=src)
    ids, _, _ = assign_ids(cols.src, cols.dst, cols.extra_vertices)
    return _in_type(ids.keys, cols.src.type)


def random_pairs(keys, count: int, *, seed: int = 0) -> pa.Table:
    """``count`` pairs (``src``, ``dst``), each key drawn uniformly from ``keys``.

    Pass the distinct vertex keys (e.g. :func:`vertex_keys` or ``GrailIndex.ids.keys``): a
    key listed twice is drawn twice as often. Keys keep their type.

    >>> t = random_pairs(pa.array(["a", "b", "c"]), 4, seed=1)
    >>> t.num_rows, set(t["src"].to_pylist()) <= {"a", "b", "c"}
    (4, True)
    """
    keys = as_column(keys)
    if len(keys) == 0:
        raise ValueError("random_pairs needs at least one vertex key")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(keys), (2, int(count)))
    return _pair_table(keys.take(pa.array(pick[0])), keys.take(pa.array(pick[1])))


def reachable_pairs(edges, count: int, *, seed: int = 0, max_steps: int = MAX_STEPS,
                    src: str = "src", dst: str = "dst") -> pa.Table:
    """``count`` pairs (``src``, ``dst``) with a directed path from src to dst, src != dst.

    Each pair is a random forward walk: it starts at a uniformly random vertex with an
    out-edge (self-loops do not count), takes a uniformly random number of steps in
    1..max_steps, each to a uniformly random out-neighbour, stopping early at a vertex
    without out-edges; the pair is (start, end). Walks that end where they started (around a
    cycle) are dropped and replaced. Keys come back in the edge table's key type.

    Parameters
    ----------
    edges : pyarrow.Table or DuckDB relation
        The edge table (endpoint columns named by ``src`` and ``dst``).
    count : int
        Number of pairs.
    seed : int
        Seed of the random generator.
    max_steps : int
        Longest walk; longer walks reach deeper pairs on deep graphs.

    Examples
    --------
    >>> e = pa.table({"src": [1, 2, 3], "dst": [2, 3, 4]})
    >>> t = reachable_pairs(e, 5, seed=0)
    >>> all(s < d for s, d in zip(t["src"].to_pylist(), t["dst"].to_pylist()))
    True
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    cols = edge_columns(edges, dst, src=src)
    ids, s, d = assign_ids(cols.src, cols.dst)
    indptr, indices = CpuKernels().csr(s, d, ids.n)
    degree = np.diff(indptr)
    origins = np.flatnonzero(degree > 0)
    if origins.shape[0] == 0:
        raise ValueError("the edge table has no edge between two distinct vertices: no vertex "
                         "reaches another, so there are no reachable pairs to draw")
    rng = np.random.default_rng(seed)
    starts, ends = [], []
    need = int(count)
    while need > 0:
        a, b = _walks(rng, indptr, indices, degree, origins, need + need // 8 + 16, max_steps)
        keep = np.flatnonzero(a != b)[:need]
        starts.append(a[keep])
        ends.append(b[keep])
        need -= keep.shape[0]
    a = np.concatenate(starts) if starts else np.empty(0, np.int64)
    b = np.concatenate(ends) if ends else np.empty(0, np.int64)
    return _pair_table(_in_type(ids.decode(a), cols.src.type),
                       _in_type(ids.decode(b), cols.dst.type))


def _walks(rng, indptr, indices, degree, origins, walks: int, max_steps: int):
    """Start and end vertex of ``walks`` random forward walks, advanced all together."""
    start = origins[rng.integers(0, origins.shape[0], walks)]
    length = rng.integers(1, max_steps + 1, walks)
    cur = start.copy()
    live = np.arange(walks)
    for step in range(max_steps):
        live = live[(length[live] > step) & (degree[cur[live]] > 0)]
        if live.shape[0] == 0:
            break
        at = cur[live]
        cur[live] = indices[indptr[at] + rng.integers(0, degree[at])]
    return start, cur


def _in_type(keys: pa.Array, typ: pa.DataType) -> pa.Array:
    """Keys (int64 or large_string, as the id map holds them) in the edge table's key type."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return keys if keys.type == typ else pc.cast(keys, typ)
