"""One-to-all queries: every vertex a key reaches (its descendants) or that reaches it (its
ancestors), by ONE traversal of the condensed DAG instead of one pair query per vertex.

The traversal is the kernels' ``reach_within_colour`` (the primitive of the SCC sweeps) on the
index's backend, from the key's component, over the forward DAG (descendants) or the reverse
DAG (ancestors; built once per index from the forward one and kept), then expanded from
components to their member vertices.

The contract of ``reaches`` decides what the sets hold: a key reaches itself (the empty path),
so the key is always in its own sets, also when it is not a vertex of the graph (then it is
the only member); a NULL key has empty sets.

>>> import grail_duckdb as gd
>>> from grail_duckdb.plugin.registry import Entry
>>> e = Entry("g", gd.build_index([1, 2, 3], [2, 3, 2], backend="cpu"), "t", "s", "d", 5,
...           None, {}, None)
>>> key_set(e, 2, forward=True).to_pylist(), key_set(e, 2, forward=False).to_pylist()
([2, 3], [1, 2, 3])
>>> key_set(e, 9, forward=True).to_pylist(), key_set(e, None, forward=True).to_pylist()
([9], [])
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import paths
from ..engine.ingest import as_column
from ..kernels import to_host
from ..kernels.protocol import CSR

__all__ = ["few_keys_answers", "hops_record", "key_set", "keys_table", "reached_ids",
           "set_count"]

#: one-to-all sets kept per index (the last ones asked for), with their Arrow forms
CACHED_SETS = 16
#: a column pair with at most this many distinct keys on one side (and this many rows per
#: key) is answered by one traversal per key instead of one pair query per row
FEW_KEYS = 64
ROWS_PER_KEY = 256
#: ... and only when the rows are at least 1/VERTICES_PER_ROW of the vertices the traversals may
#: visit (every vertex, per key): a traversal costs about what a pair query costs per vertex it
#: visits (uniprot's reachable pairs, a few targets that every vertex reaches: 36 ms by
#: traversals against 0.9 for 100K pairs asked one by one, on 2 cores)
VERTICES_PER_ROW = 8


def reached_ids(entry, key, forward: bool) -> np.ndarray | None:
    """Sorted int32 ids of the vertices ``key`` reaches (``forward``) or that reach it; None
    when ``key`` is not a vertex (NULL included)."""
    index = entry.index
    if key is None:
        return None
    vid = int(to_host(index.ids.encode(as_column([key]), np))[0])
    if vid < 0:
        return None
    k = index.kernels
    xp = k.xp
    nc = index.n_components
    identity = nc == index.n_vertices
    comp = None if identity else index.comp
    seeds = xp.zeros(nc, dtype=bool)
    seeds[vid if identity else int(comp[vid])] = True
    graph = index.dag if forward else _reverse_dag(entry)
    reached = k.reach_within_colour(graph, seeds, _zero_colour(entry))
    members = reached if identity else reached[comp]
    return to_host(xp.flatnonzero(members)).astype(np.int32)


def few_keys_answers(entry, src, dst) -> pa.Array | None:
    """Answers for a column pair of which one side takes few distinct keys (e.g. every paper
    against 20 candidates), by one traversal per distinct key: a bit per key on every vertex
    it reaches (or that reaches it), then one lookup per row. None when neither side is like
    that (the caller asks the engine pair by pair). Same answers as the engine's, NULLs and
    keys that are not vertices included."""
    src, dst = as_column(src), as_column(dst)
    n = len(src)
    for side, other, forward in ((src, dst, True), (dst, src, False)):
        if n < ROWS_PER_KEY or len(pc.unique(side.slice(0, 4096))) > FEW_KEYS:
            continue
        keys = pc.unique(side.drop_null())
        if len(keys) > FEW_KEYS or n < ROWS_PER_KEY * max(len(keys), 1):
            continue
        if len(keys) * entry.index.n_vertices > VERTICES_PER_ROW * n:
            continue
        return _answer_by_keys(entry, side, other, keys, forward)
    return None


def _equal_to(values: pa.Array, key) -> np.ndarray:
    """``values == key`` (False for NULL), exact across integer types: a key outside the
    values' type is equal to none of them.

    >>> _equal_to(pa.array([1, 2, None], pa.int32()), 5_000_000_000).tolist()
    [False, False, False]
    """
    typ = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
    if pa.types.is_integer(typ):
        info = np.iinfo(typ.to_pandas_dtype())
        if not info.min <= key <= info.max:
            return np.zeros(len(values), bool)
    return pc.equal(values, pa.scalar(key, typ)).fill_null(False).to_numpy(zero_copy_only=False)


def _answer_by_keys(entry, side, other, keys, forward: bool) -> pa.Array:
    index = entry.index
    bits = np.zeros(index.n_vertices + 1, np.uint64)  # the last slot: keys that are no vertex
    outside = []
    for c, key in enumerate(keys.to_pylist()):
        ids = reached_ids(entry, key, forward)
        if ids is None:
            outside.append((c, key))
        else:
            bits[ids] |= np.uint64(1) << np.uint64(c)
    oid = to_host(index.ids.encode(other, np)).astype(np.int64)
    code = pc.index_in(side, value_set=keys).fill_null(0).to_numpy(zero_copy_only=False)
    hit = (bits[np.where(oid < 0, len(bits) - 1, oid)] >> code.astype(np.uint64)) & np.uint64(1)
    out = hit.astype(np.bool_)
    for c, key in outside:  # a key that is no vertex reaches (and is reached by) itself only
        rows = np.flatnonzero(code == c)
        out[rows] = _equal_to(other.take(pa.array(rows)), key)
    null = pc.or_(side.is_null(), other.is_null()).to_numpy(zero_copy_only=False)
    return pa.array(out, pa.bool_(), mask=null if null.any() else None)


def key_set(entry, key, forward: bool) -> pa.Array:
    """The keys ``key`` reaches (``forward``) or that reach it, itself included (cached)."""
    return _cached(entry, key, forward)["keys"]


def set_count(entry, key, forward: bool) -> int | None:
    """How many keys are in :func:`key_set` (None for a NULL key)."""
    return None if key is None else len(key_set(entry, key, forward))


def _cached(entry, key, forward: bool) -> dict:
    """The cached record of one set: ``{"keys": Arrow keys, "ids": ids or None}``; callers add
    what they derive from it (e.g. a source registered in DuckDB)."""
    sets = entry.cache.setdefault("sets", OrderedDict())
    slot = (bool(forward), type(key).__name__, key)
    with entry.lock:
        rec = sets.get(slot)
        if rec is not None:
            sets.move_to_end(slot)
            return rec
    ids = reached_ids(entry, key, forward)
    if key is None:
        keys = pa.array([], entry.index.ids.keys.type)
    elif ids is None:
        keys = as_column([key])
    else:
        keys = entry.index.ids.keys.take(pa.array(ids))
    rec = {"keys": keys, "ids": ids}
    with entry.lock:
        sets[slot] = rec
        while len(sets) > CACHED_SETS:
            sets.popitem(last=False)
    return rec


def hops_record(entry, key, forward: bool) -> dict:
    """The cached record ``{"table": (key, hops)}`` of ``descendants(key)`` (``forward``) or
    ``ancestors(key)``: every key of the set with the hops of a shortest path
    (:func:`grail_duckdb.engine.paths.reached_within`); callers add what they derive from it."""
    sets = entry.cache.setdefault("sets", OrderedDict())
    slot = ("hops", bool(forward), type(key).__name__, key)
    with entry.lock:
        rec = sets.get(slot)
        if rec is not None:
            sets.move_to_end(slot)
            return rec
    rec = {"table": paths.reached_within(entry.index, key, forward)}
    with entry.lock:
        sets[slot] = rec
        while len(sets) > CACHED_SETS:
            sets.popitem(last=False)
    return rec


def record(entry, key, forward: bool) -> dict:
    """The cached record of a set (see :func:`_cached`)."""
    return _cached(entry, key, forward)


def keys_table(entry) -> pa.Table:
    """``(id, key)`` of every vertex of the index, in id order (kept per index)."""
    table = entry.cache.get("keys_table")
    if table is None:
        keys = entry.index.ids.keys
        table = pa.table({"id": pa.array(np.arange(len(keys), dtype=np.int32)), "key": keys})
        entry.cache["keys_table"] = table
    return table


def _reverse_dag(entry) -> CSR:
    """The condensed DAG with every edge reversed, on the index's backend (the engine's, made
    once per index for its exact search)."""
    return entry.index.query_index(need_reverse=True).rev


def _zero_colour(entry):
    """All components live and of one colour: the traversal reaches everything reachable."""
    colour = entry.cache.get("zero_colour")
    if colour is None:
        xp = entry.index.kernels.xp
        colour = entry.cache["zero_colour"] = xp.zeros(entry.index.n_components, dtype=xp.int32)
    return colour
