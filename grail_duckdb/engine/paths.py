"""Beyond yes / no: hop-bounded reachability, distances and shortest paths for whole columns
of (src, dst) keys, and one-to-all sets with their hop counts.

Hops count the edges of the original graph (inside a strongly connected component they are
not zero), so these answers read the original graph's rows, both ways (:class:`PathGraph`,
made on first need: :func:`path_graph`). Each call goes:

* keys -> vertex ids; NULL on either side: NULL; equal keys (vertices or not): the empty path
  (0 hops, true for any k >= 0, the one-key path ``[x]``); a key that is not a vertex and
  differs from the other: no path;
* :func:`reaches_within` first drops the pairs whose components lie more than k topological
  levels apart (a path of at most k edges spans at most k levels of the condensation);
* every call then applies the index's cuts and its bounded probe: the pairs they exclude
  have no path. On the CPU the rest, settled reachable or not settled, go to the pair search
  (the index's own search of the pairs the cuts leave open costs more, on the citation DAGs,
  than the pair search of them, which the reachable ones need anyway); on a GPU
  (``GpuSettings.paths_settle_first``) the index's exact search settles them first, and only
  the reachable ones go on;
* the pair search is ``Kernels.pair_hops``: a bidirectional breadth-first search on the
  original graph, level by level, cut by the topological levels, bounded by k when there is
  one; it settles reachability too (a side that runs out of vertices: no path). The path it
  returns is the lexicographically smallest shortest path by vertex id, that is by
  key (ids follow the keys' sorted order): it depends on the graph alone, so both backends,
  and indices built with other labels, return the same path.

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3, 1, 4], [2, 3, 1, 4, 3], backend="cpu")
>>> idx.hops([1, 3, 1, 9, None], [3, 2, 1, 1, 2]).to_pylist()
[2, 2, 0, None, None]
>>> idx.path(1, 3), idx.path(3, 2), idx.path(9, 9)
([1, 2, 3], [3, 1, 2], [9])
>>> idx.reaches_within([1, 1], [3, 3], [1, 2]).to_pylist()
[False, True]
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EdgeInputError, GrailError, StaleIndexError
from ..kernels import to_host
from ..kernels.protocol import CSR, PathGraph, edge_levels_of
from .csr import forward_and_reverse
from .ids import assign_read, read_edges
from .ingest import as_column, edge_stream

__all__ = ["EdgeSource", "PathGraph", "hops", "path_graph", "paths", "reached_ids",
           "reached_within", "reaches_within"]

#: ``limit`` of a search with no hop bound (Kernels.pair_hops)
UNBOUNDED = np.iinfo(np.int32).max


@dataclass(frozen=True)
class EdgeSource:
    """Where an index's original edges can be read again: ``read()`` returns an edge input of
    :func:`~grail_duckdb.engine.ingest.edge_stream` (with the column names ``src`` / ``dst``),
    ``what`` names it in errors. Only an index with cycles needs it: an acyclic index's
    condensed DAG is its graph."""

    read: object
    src: str = "src"
    dst: object = "dst"
    what: str = "the edges it was built from"
    #: the reader's edges are the index's by construction (SQL's registry checks the table
    #: before every statement): they are read through the index's own key lookup, which an
    #: index grown by appends needs (its fingerprint names its history, not its edges)
    trusted: bool = False

    @classmethod
    def of_input(cls, edges, dst, src) -> "EdgeSource | None":
        """The source of an input :func:`build_index` read, when it can be read again (not a
        one-pass ``RecordBatchReader``); an Arrow input is kept by reference, no copy."""
        if isinstance(edges, pa.RecordBatchReader):
            return None
        return cls(lambda: edges, src, dst, "the edge input of the build")


def path_graph(index, host: bool = False) -> PathGraph:
    """The original graph of ``index`` both ways, on its backend (``host``: on the CPU, for a
    GPU index's small calls), made once, then kept.

    An acyclic index (every component one vertex) reads its own DAG and reverse DAG: no
    memory beyond the exact search's. An index with cycles reads its edges again from its
    :class:`EdgeSource` (``index.edge_source``: set by the build, by SQL's registry, or by
    :meth:`GrailIndex.attach_edges`), checked against its fingerprint, and keeps both rows
    with the levels beside them: 6 bytes per distinct edge and 8 per vertex, each way (a GPU
    index's host copy takes its own copy of them).

    Raises
    ------
    GrailError
        An index with cycles that has no edge source (loaded from a file).
    StaleIndexError
        The source's edges are not those the index was built from.
    """
    if host and index.backend != "cpu":
        twin = index.host_copy()
        if twin._path_graph is None and index.n_components != index.n_vertices:
            g = path_graph(index)
            _keep(twin, lambda: tuple(CSR(to_host(r.indptr), to_host(r.indices))
                                      for r in (g.fwd, g.rev)))
        return path_graph(twin)
    if index._path_graph is None:
        if index.n_components == index.n_vertices:
            qi = index.query_index(need_reverse=True)
            index._path_graph = PathGraph(qi.dag, qi.rev, None, qi.labels.level,
                                          edge_levels_of(index.kernels, qi))
        else:
            _keep(index, lambda: _original_rows(index))
    return index._path_graph


def _keep(index, rows) -> None:
    """Set ``index._path_graph`` from the CSRs ``rows()`` gives, ``(fwd, rev)`` (called once,
    under the index's path lock), and the index's condensation."""
    with index._path_lock:
        if index._path_graph is None:
            fwd, rev = rows()
            qi = index.query_index(need_reverse=False)
            k = index.kernels
            per_vertex = qi.labels.level[qi.comp]
            index._path_graph = PathGraph(fwd, rev, qi.comp, qi.labels.level,
                                          (k.edge_levels(fwd, per_vertex),
                                           k.edge_levels(rev, per_vertex)))


def _original_rows(index) -> tuple[CSR, CSR]:
    """Both CSRs of the index's original edges, read from its edge source and checked."""
    from .build import fingerprint_of  # the build module imports this one

    source = index.edge_source
    if source is None:
        raise GrailError(
            f"this index has cycles ({index.n_vertices:,} vertices in {index.n_components:,} "
            "strongly connected components), so hop counts and paths need its original edges, "
            "which an index loaded from a file does not hold: attach them with "
            "index.attach_edges(edges, src=..., dst=...) (the table it was built from)")
    k = index.kernels
    if index.appended:
        if not source.trusted:
            raise GrailError(
                "this index has cycles and appended batches, so hop counts and paths need its "
                "grown edge list, which only its SQL table holds: build the index from the "
                "grown edges (or query it through SQL)")
        return _rows_by_lookup(index, source)
    stream = edge_stream(source.read(), source.dst, src=source.src)
    ids, pairs = assign_read(read_edges(stream, k.xp), k.xp)
    if fingerprint_of(k, ids, pairs) != index.fingerprint:
        raise StaleIndexError(f"{source.what} are not the edges this index was built from "
                              "(they changed since); rebuild the index or attach its own edges")
    return forward_and_reverse(k, pairs, ids.n)


def _rows_by_lookup(index, source: EdgeSource) -> tuple[CSR, CSR]:
    """Both CSRs of a trusted source's edges, their keys looked up by the index itself (an
    index grown by appends numbers its new vertices after the old ones); every key must be a
    vertex and every row there, or the source is not the index's."""
    from ..kernels.shared import pack_pairs

    k = index.kernels
    table = edge_stream(source.read(), source.dst, src=source.src).table
    s = to_host(index.ids.encode(table.column("src").combine_chunks()))
    d = to_host(index.ids.encode(table.column("dst").combine_chunks()))
    if table.num_rows != index.edge_rows or (s < 0).any() or (d < 0).any():
        raise StaleIndexError(f"{source.what} are not the edges this index holds (they changed "
                              "since); rebuild the index")
    return forward_and_reverse(k, k.xp.asarray(pack_pairs(np, s, d)), index.n_vertices)


@dataclass
class _Pairs:
    """A call's key columns sorted out: ``null`` (either key NULL), ``same`` (equal keys, not
    NULL), ``search`` (rows of two different vertices) with their ids ``s``, ``t``."""

    src: pa.Array
    dst: pa.Array
    null: np.ndarray
    same: np.ndarray
    search: np.ndarray
    s: np.ndarray
    t: np.ndarray


def _pairs(index, src, dst) -> _Pairs:
    """Sort out a call's key columns (see :class:`_Pairs`); keys of another kind than the
    index's raise its KeyTypeError."""
    src, dst = as_column(src, "source"), as_column(dst, "destination")
    if len(src) != len(dst):
        raise ValueError(f"src and dst differ in length ({len(src)} vs {len(dst)})")
    sid = to_host(index.ids.encode(src)).astype(np.int32)
    tid = to_host(index.ids.encode(dst)).astype(np.int32)
    null = pc.or_(src.is_null(), dst.is_null()).to_numpy(zero_copy_only=False)
    same = np.zeros(len(src), np.bool_)
    if len(src) and not (pa.types.is_null(src.type) or pa.types.is_null(dst.type)):
        typ = index.ids.keys.type
        if any(pa.types.is_uint64(c.type) for c in (src, dst)) and all(
                pa.types.is_integer(c.type) for c in (src, dst)):
            typ = pa.decimal128(20, 0)  # every int64 and uint64 key, compared exactly
        same = pc.equal(src.cast(typ), dst.cast(typ)).fill_null(False).to_numpy(
            zero_copy_only=False)
    search = np.flatnonzero(~null & ~same & (sid >= 0) & (tid >= 0))
    return _Pairs(src, dst, null, same, search, sid[search], tid[search])


def _open(index, p: _Pairs, cancel=None) -> np.ndarray:
    """The rows of ``p.search`` the pair search takes: those the index's cuts do not exclude
    (reachable, or not settled), or on a GPU that settles them first (see the module) the
    reachable ones."""
    if p.search.shape[0] == 0:
        return np.zeros(0, np.int64)
    rows = np.arange(p.search.shape[0])
    if index.backend == "gpu" and index.kernels.settings.paths_settle_first:
        return rows[_reachable(index, p, rows, cancel)]
    _, maybe = _cuts(index, p, rows)
    return np.flatnonzero(maybe)


def _reachable(index, p: _Pairs, rows: np.ndarray, cancel=None) -> np.ndarray:
    """Which of the rows ``rows`` (of ``p.search``) are reachable, by the index."""
    take = pa.array(p.search[rows])
    ans, _ = index.reaches_with_stats(p.src.take(take), p.dst.take(take), cancel=cancel)
    return ans.to_numpy(zero_copy_only=False).astype(np.bool_)


def _levels(index, ids: np.ndarray) -> np.ndarray:
    """The topological level of each vertex id's component (host int64)."""
    qi = index.query_index(need_reverse=False)
    at = index.kernels.xp.asarray(ids)
    return to_host(qi.labels.level[at if qi.comp is None else qi.comp[at]]).astype(np.int64)


def _search(index, p: _Pairs, rows: np.ndarray, limits: np.ndarray, want_paths: bool,
            cancel=None):
    """``Kernels.pair_hops`` over the rows ``rows`` of ``p.search`` (a GPU index answers a
    small call on its host copy: :meth:`GrailIndex.answering`)."""
    from .queries import _stopper

    target = index.answering(rows.shape[0])
    host = target is not index
    kernels = target.kernels
    stop = _stopper(cancel)
    return kernels.pair_hops(path_graph(index, host), p.s[rows], p.t[rows],
                             limits.astype(np.int32), want_paths, lambda done: stop())


def reaches_within(index, src, dst, k, cancel=None) -> pa.BooleanArray:
    """Whether a directed path of at most k edges leads src -> dst, for whole columns.

    ``k``: one whole number for every pair, or a column of them (NULL where k is NULL; a
    negative k is false, also for equal keys). The pairs the index's cuts exclude are false
    at once; on an acyclic index, a pair the cuts find reachable whose target lies at most k
    levels below its source is true at once (a path crosses a level at least per edge, so
    none has more edges than the levels between its ends); the rest are searched, at most k
    edges deep.
    """
    p = _pairs(index, src, dst)
    kk, knull = _limits(k, n=len(p.src))
    out = p.same & (kk >= 0)
    cand = np.flatnonzero(kk[p.search] >= 0)
    if cand.shape[0]:
        true, maybe = _cuts(index, p, cand)
        if index.n_components == index.n_vertices and true.any():
            gap = _levels(index, p.t[cand]) - _levels(index, p.s[cand])
            settled = true & (gap <= kk[p.search[cand]])
            out[p.search[cand[settled]]] = True
            maybe &= ~settled
        cand = cand[maybe]
    if cand.shape[0]:
        found, _ = _search(index, p, cand, np.minimum(kk[p.search[cand]], UNBOUNDED), False,
                           cancel)
        out[p.search[cand]] = found >= 0
    mask = p.null | knull
    return pa.array(out, pa.bool_(), mask=mask if mask.any() else None)


def _cuts(index, p: _Pairs, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The index's cuts and its bounded probe on the rows ``rows`` of ``p.search``, no exact
    search: ``(reachable, maybe)``, masks of the pairs settled reachable and of those not
    settled unreachable (a GPU index answers a small call on its host copy)."""
    from ..kernels import shared as K
    from .queries import PROBE_BUDGET

    target = index.answering(rows.shape[0])
    k = target.kernels
    qi = _by_component(target)
    comp = None if index.n_components == index.n_vertices else to_host(target.comp)
    s = (p.s[rows] if comp is None else comp[p.s[rows]]).astype(np.int64)
    t = (p.t[rows] if comp is None else comp[p.t[rows]]).astype(np.int64)
    true = np.zeros(rows.shape[0], np.bool_)
    maybe = np.zeros(rows.shape[0], np.bool_)
    for lo in range(0, rows.shape[0], k.query_batch):
        hi = min(rows.shape[0], lo + k.query_batch)
        part = k.answer_pairs(qi, s[lo:hi], t[lo:hi], None, True, PROBE_BUDGET)
        true[lo:hi] = np.unpackbits(part.bits, bitorder="little")[:hi - lo].astype(np.bool_)
        n_def = int(part.counts[K.DEFERRED])
        if n_def:
            maybe[lo + to_host(part.deferred[0][:n_def]).astype(np.int64)] = True
    return true, maybe | true


#: id of an index's QueryIndex -> (a weak reference to it, its view keyed by components)
_COMPONENT_VIEWS: dict = {}


def _by_component(index):
    """The index's query arrays read with component ids as the keys (the pairs' components
    are looked up already)."""
    from ..kernels.protocol import QueryIndex
    from ..kernels.shared import LOOKUP_RANGE

    qi = index.query_index(need_reverse=False)
    ref, view = _COMPONENT_VIEWS.get(id(qi), (None, None))
    if ref is None or ref() is not qi:
        for key in [key for key, (r, _) in _COMPONENT_VIEWS.items() if r() is None]:
            del _COMPONENT_VIEWS[key]
        view = QueryIndex(LOOKUP_RANGE, 0, index.n_components, qi.lookup_table[:0], None,
                          qi.dag, qi.labels)
        _COMPONENT_VIEWS[id(qi)] = (weakref.ref(qi), view)
    return view


def _limits(k, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` as an int64 column of n rows and its NULL mask."""
    if k is None or isinstance(k, (int, np.integer)):
        if isinstance(k, bool):
            raise TypeError("k must be a whole number of edges, not a bool")
        value = -1 if k is None else int(k)
        return np.full(n, value, np.int64), np.full(n, k is None, np.bool_)
    col = as_column(k, "k")
    if len(col) != n:
        raise ValueError(f"k has {len(col)} rows, the key columns {n}")
    if not (pa.types.is_integer(col.type) or pa.types.is_null(col.type)):
        raise TypeError(f"k must be whole numbers of edges, got {col.type}")
    null = col.is_null().to_numpy(zero_copy_only=False)
    vals = col.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False) if len(col) \
        else np.zeros(0, np.int64)
    return vals.astype(np.int64), null


def hops(index, src, dst, cancel=None) -> pa.Int32Array:
    """The edges of a shortest path src -> dst (NULL when there is none), whole columns."""
    p = _pairs(index, src, dst)
    out = np.zeros(len(p.src), np.int32)
    valid = p.same.copy()
    cand = _open(index, p, cancel)
    if cand.shape[0]:
        found, _ = _search(index, p, cand, np.full(cand.shape[0], UNBOUNDED), False, cancel)
        out[p.search[cand]] = found
        valid[p.search[cand]] = found >= 0
    return pa.array(out, pa.int32(), mask=~valid if not valid.all() else None)


def paths(index, src, dst, cancel=None) -> pa.ListArray:
    """One shortest path src -> dst per pair as a list of keys (src first, dst last; the
    lexicographically smallest one by key), NULL when there is none, ``[x]`` for x -> x."""
    p = _pairs(index, src, dst)
    n = len(p.src)
    lengths = p.same.astype(np.int64)
    cand = _open(index, p, cancel)
    verts = np.zeros(0, np.int32)
    if cand.shape[0]:
        found, (_, verts) = _search(index, p, cand, np.full(cand.shape[0], UNBOUNDED), True,
                                    cancel)
        lengths[p.search[cand]] = np.where(found >= 0, found.astype(np.int64) + 1, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keys = index.ids.keys
    values = _path_values(index, p, offsets, verts)
    valid = lengths > 0
    typ = pa.list_(keys.type) if offsets[-1] < 2**31 else pa.large_list(keys.type)
    arr_type = pa.ListArray if typ == pa.list_(keys.type) else pa.LargeListArray
    return arr_type.from_arrays(pa.array(offsets.astype(np.int32 if arr_type is pa.ListArray
                                                         else np.int64)), values,
                                type=typ, mask=pa.array(~valid) if not valid.all() else None)


def _path_values(index, p: _Pairs, offsets: np.ndarray, verts: np.ndarray) -> pa.Array:
    """The keys of every row's path, rows in order (``offsets``): the path vertices ``verts``
    (ids, the searched rows' paths one after another, rows in order) as the index's keys, and
    each x -> x row's own key at its place."""
    keys = index.ids.keys
    same_rows = np.flatnonzero(p.same)
    if same_rows.shape[0] == 0:
        return keys.take(pa.array(verts))
    try:
        own = p.src.take(pa.array(same_rows)).cast(keys.type)
    except (pa.ArrowInvalid, OverflowError):  # a uint64 key beyond the index's int64 keys
        raise EdgeInputError(f"a source key does not fit the index's {keys.type} keys, so its "
                             f"path [key] cannot be listed as them; cast the keys first") from None
    if verts.shape[0] == 0:
        return own
    mine = np.zeros(int(offsets[-1]), np.bool_)
    mine[offsets[same_rows]] = True
    take = np.zeros(mine.shape[0], np.int32)  # vertex 0 stands in for the own keys
    take[~mine] = verts
    return pc.replace_with_mask(keys.take(pa.array(take)), pa.array(mine), own)


def reached_ids(index, key, forward: bool, max_hops=None):
    """``(ids, hops)`` (host int32, by hops then id) of the vertices ``key`` reaches
    (``forward``) or that reach it within ``max_hops`` edges (None: any number), itself first;
    None when ``key`` is not a vertex; empty for a NULL key or a negative ``max_hops``."""
    none = (np.zeros(0, np.int32), np.zeros(0, np.int32))
    if key is None or (max_hops is not None and int(max_hops) < 0):
        return none
    vid = int(to_host(index.ids.encode(as_column([key])))[0])
    if vid < 0:
        return None
    g = path_graph(index)
    limit = UNBOUNDED if max_hops is None else min(int(max_hops), UNBOUNDED)
    found, dist = index.kernels.bounded_bfs(g.fwd if forward else g.rev, vid, limit)
    order = np.lexsort((found, dist))
    return found[order], dist[order]


def reached_within(index, key, forward: bool, max_hops=None) -> pa.Table:
    """The keys ``key`` reaches (``forward``) or that reach it within ``max_hops`` edges
    (None: any number), with ``hops``, the edges of a shortest path: ``(key, hops)`` by hops
    then key. The key itself comes first with 0 hops, also when it is not a vertex (then
    alone); a NULL key or a negative ``max_hops`` gives no rows."""
    keys = index.ids.keys
    found = reached_ids(index, key, forward, max_hops)
    if found is None:
        return pa.table({"key": as_column([key]).cast(keys.type), "hops": pa.array([0], pa.int32())})
    ids, dist = found
    return pa.table({"key": keys.take(pa.array(ids)), "hops": pa.array(dist, pa.int32())})
