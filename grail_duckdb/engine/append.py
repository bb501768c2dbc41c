"""Appending a batch of edges out of new vertices to a built index, without a rebuild.

A citation table grows by new papers citing older ones (and each other). A batch whose edges
all leave vertices the index does not hold yet is absorbed: its new vertices are condensed
among themselves (a cycle among them is a component of its own), their components get labels
folded from their children, and the index's arrays grow by their rows
(:mod:`.growth`); no label of the index changes. An edge that leaves a vertex the index holds
is absorbed only when that vertex reaches its target already (a duplicate edge, an edge that
adds no path); any other batch raises :class:`~grail_duckdb.errors.NotAppendableError`, and
the index must be built again.

Why every cut stays exact. Nothing reaches a new vertex but new vertices (every edge into one
leaves a new vertex), so the reachability among the old components is unchanged and their
labels stay exact. Let ``C0`` be the components before the batch and ``N`` the new ones, with
ids ``C0 .. C0 + N - 1``; ranks of every label are at most ``C0`` before the batch.

* **Level** (``level_u >= level_t`` excludes u -> t): a new component's level is
  ``floor - H + h``, ``floor`` the lowest level so far (0 after a build), ``h`` its longest
  path from a root of the new components' DAG and ``H - 1`` the longest of those: the new
  components take the ``H`` levels just above every old one, in the order a build would give
  them (its roots at the top). Every edge still leads strictly down: new -> old goes from
  below ``floor`` to at least ``floor``, new -> new from depth h to a larger one. Old -> new
  pairs are then always excluded, which is true.
* **GRAIL intervals** (t's interval not inside u's excludes u -> t): a new component with
  children takes the smallest inner and the largest outer bound of its children, so each
  child's interval lies inside its parent's and, by induction, every descendant's inside
  every ancestor's; one without children takes its own rank ``C0 + post`` (a post order of
  the new components' spanning forest), above every older rank. Only the containment of
  reachable pairs is needed, and it holds.
* **The two tree intervals** (t's post rank in u's interval proves u -> t): the new
  components get the post orders of their own spanning forests (a parent, resp. a chosen
  child, among the new components) shifted by ``C0``: a new interval holds only new ranks
  of its own subtree (vertices it reaches, resp. that reach it), an old interval only old
  ranks. A new component whose chosen child is old is a root of its forest: the cut never
  fires between it and the old components, rather than claim anything unproven.
* **Hub bits** (``down[u] & up[t]`` proves u -> t; ``down[t] & ~down[u]`` or ``up[u] &
  ~up[t]`` excludes it): the hubs are old components, so no hub reaches a new one (``up`` is
  0, exact) and a new one reaches exactly the hubs its children reach (``down`` the OR of
  theirs, exact): both cuts keep their proofs for every pair.
* **Window hubs** (a hub in u's down window that reaches t proves u -> t): a level below 0
  reads the table of windows at its first entry (:func:`~grail_duckdb.kernels.cpu.hubs.
  window_base`), so a new component's down window is the first ``64 * WIN_WORDS`` hubs and
  holds the OR of its children's windows rebased into it (every bit a hub it reaches); its
  up window is empty (no hub reaches it). Only set bits claim anything, and each is true.

The exact search walks the grown DAG: the new rows are appended to the forward CSR, and the
reverse CSR and the per-edge levels that only the search of deferred pairs reads are made
again from it on first need.

A level is stored in 16 bits beside each edge for the exact search
(:data:`~grail_duckdb.kernels.shared.EDGE_LEVEL_CAP`): an append that would put a level at
or below ``-EDGE_LEVEL_CAP`` (tens of thousands of appended levels) is refused: rebuild.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KeyTypeError, NotAppendableError
from ..kernels import to_host
from ..kernels.host.transfers import copy_into
from ..kernels.records import label_record, with_record
from ..kernels.shared import EDGE_LEVEL_CAP, pack_pairs, swap_pairs
from ..model import DENSE_FACTOR, CSR, AppendBatch, Labels, as_int64, as_large_string, one_array
from .condensation import Condensation, condense
from ..growth import grow
from ..indexfile.digest import hash_bytes
from .ingest import edge_stream
from .labels import reversed_levels, tree_of_children

__all__ = ["COMPACT_SHARE", "absorb", "apply_batch", "compute_batch", "parts_share",
           "with_labels"]

#: the appended batches of an index (the edge rows of its parts) may reach this share of the
#: edge rows of its file before a build should fold them in (a rebuild: fresh labels; the
#: appended components' labels settle fewer pairs, so the exact search works more)
COMPACT_SHARE = 0.25

#: the label arrays of a component, in ``Labels``'s order (the windows where there are some)
_LABEL_ROWS = ("level", "inner", "outer", "tree", "hub_down", "hub_up", "win_down", "win_up")


def absorb(index, edges, dst="dst", *, src: str = "src"):
    """``index`` with a batch of edges absorbed (see the module): a new
    :class:`~grail_duckdb.engine.index.GrailIndex`; ``index`` itself answers as before.
    ``edges``, ``src``, ``dst`` as for :func:`~grail_duckdb.engine.build.build_index`."""
    batch = compute_batch(index, edges, dst, src=src)
    return index if batch is None else apply_batch(index, batch)


def compute_batch(index, edges, dst="dst", *, src: str = "src") -> AppendBatch | None:
    """The batch that absorbs ``edges`` into ``index`` (None for no rows); raises
    :class:`NotAppendableError` for a batch that needs a rebuild."""
    stream = edge_stream(edges, dst, src=src)
    table = stream.table
    if table.num_rows == 0:
        return None
    if stream.kind != index.ids.kind:
        want = "integer" if index.ids.kind == "int" else "string (VARCHAR)"
        raise KeyTypeError(f"this index has {want} vertex keys but the appended edges' keys are "
                           f"{table.column(0).type}; cast them to the index's key type")
    s_keys, d_keys = one_array(table.column(0)), one_array(table.column(1))
    s_new, d_sel, d_old, held_s, held_d = _out_of_new(index, s_keys, d_keys)
    if index.ids.kind == "int":
        keys, sl, dl, d_old = _int_batch_keys(index.kernels.xp, s_new, d_sel, d_old)
    else:
        keys, sl, dl, d_old = _string_batch_keys(index.kernels.xp, s_new, d_sel, d_old)
    fp = _fingerprint(index, keys, sl, dl, d_old, held_s, held_d, table.num_rows)
    comp, dag, lab = _new_components(index, len(keys), sl, dl, d_old)
    return AppendBatch(keys, comp, dag, lab, table.num_rows, index.fingerprint, fp)


def _out_of_new(index, s_keys, d_keys):
    """``(s_new, d_sel, d_old, held_s, held_d)``: the edges out of new vertices (their source
    and target keys, the target's id or -1 where new) and the ids of the others' ends, which
    must add no path (:func:`_check_held`)."""
    s_id = index.ids.encode(s_keys)
    d_id = index.ids.encode(d_keys)
    held = s_id >= 0
    if not held.any():  # new papers only: no copies
        return s_keys, d_keys, d_id, s_id[:0], d_id[:0]
    _check_held(index, s_keys, d_keys, held, d_id)
    fresh = pa.array(~held)
    return s_keys.filter(fresh), d_keys.filter(fresh), d_id[~held], s_id[held], d_id[held]


def _int_batch_keys(xp, s_new, d_sel, d_old):
    """``(keys, sl, dl, d_old)`` of integer keys: the batch's new keys, sorted (Arrow), the
    position among them of each source and of each new target (-1 where the target is held),
    and the held targets' ids, all but ``keys`` arrays of ``xp``: the keys' sort and searches
    run where the index lives."""
    new_host = d_old < 0
    s_dev, d_old, d_new = _on(xp, as_int64(s_new), d_old, as_int64(d_sel)[new_host])
    sorted_keys, sl, dl = _int_positions(xp, s_dev, d_new, d_old < 0)
    return pa.array(to_host(sorted_keys), pa.int64()), sl, dl, d_old


def _string_batch_keys(xp, s_new, d_sel, d_old):
    """:func:`_int_batch_keys` of string keys (sorted and searched by Arrow on the host)."""
    d_old = xp.asarray(d_old)
    new_dst = d_old < 0
    mask = pa.array(to_host(new_dst))
    keys = _sorted_strings(pa.concat_arrays([_plain(s_new), _plain(d_sel.filter(mask))]))
    sl = xp.asarray(_string_positions(keys, s_new))
    dl = np.full(len(d_sel), -1, np.int64)
    if mask.true_count:
        dl[to_host(new_dst)] = _string_positions(keys, d_sel.filter(mask))
    return keys, sl, xp.asarray(dl), d_old


def _check_held(index, s_keys, d_keys, held, d_id) -> None:
    """Refuse a batch with an edge out of a vertex the index holds, unless it adds no path
    (its target is held and reached already: a duplicate edge, for one)."""
    mask = pa.array(held)
    bad = held & (d_id < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise NotAppendableError(
            f"an edge {s_keys[i].as_py()!r} -> {d_keys[i].as_py()!r} leaves a vertex the index "
            "holds toward a new one: only edges out of new vertices are appended; rebuild the "
            "index from the grown edge list")
    answers = index.reaches(s_keys.filter(mask), d_keys.filter(mask))
    if answers.false_count:
        i = int(np.flatnonzero(~answers.to_numpy(zero_copy_only=False))[0])
        a, b = s_keys.filter(mask)[i].as_py(), d_keys.filter(mask)[i].as_py()
        raise NotAppendableError(
            f"an edge {a!r} -> {b!r} leaves a vertex the index holds and adds a path: only "
            "edges out of new vertices are appended; rebuild the index from the grown edge list")


def _on(xp, *arrays):
    """Host arrays as arrays of ``xp``: themselves on the CPU, on a GPU copied up together
    through pinned buffers (:func:`~grail_duckdb.kernels.host.transfers.copy_into`)."""
    if xp is np:
        return arrays
    out = [xp.empty(a.shape, a.dtype) for a in arrays]
    copy_into(list(zip(out, arrays)))
    return out


def _plain(arr: pa.Array) -> pa.Array:
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _sorted_strings(keys: pa.Array) -> pa.Array:
    """The distinct string keys, sorted, as large strings."""
    keys = pc.unique(as_large_string(keys))
    return keys.take(pc.sort_indices(keys))


def _unique(xp, a):
    """The distinct values of ``a``, sorted (a sort and a comparison of neighbours)."""
    a = xp.sort(a)
    if a.shape[0] < 2:
        return a
    keep = xp.empty(a.shape[0], dtype=bool)
    keep[0] = True
    xp.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def _int_positions(xp, s, d_new, new_dst):
    """``(keys, sl, dl)`` of integer keys: the distinct keys of ``s`` and of ``d_new`` (the
    targets where ``new_dst``), sorted, and the position among them of each of ``s`` and of
    each target (-1 where not ``new_dst``). New papers are numbered in order: where the keys from the
    smallest source on span a small range, they are ranked through a table of that range
    and only the few below it (older papers cited for the first time) are sorted; other
    keys are sorted and searched.

    >>> s, d = np.array([12, 10, 12]), np.array([3, 11, 10])
    >>> [a.tolist() for a in _int_positions(np, s, d[d != 10], d != 10)]
    [[3, 10, 11, 12], [3, 1, 3], [0, 2, -1]]
    """
    dl = xp.full(new_dst.shape[0], -1, xp.int64)
    if s.shape[0]:
        lo = int(s.min())
        hi = max(int(s.max()), int(d_new.max()) if d_new.shape[0] else lo)
        if hi - lo < DENSE_FACTOR * (s.shape[0] + d_new.shape[0]) + 1024:
            below = d_new < lo
            few = _unique(xp, d_new[below])
            at = xp.where(below, 0, d_new - lo)
            seen = xp.zeros(hi - lo + 1, xp.int32)
            seen[s - lo] = 1
            seen[at[~below]] = 1
            rank = xp.cumsum(seen, dtype=xp.int64) + (few.shape[0] - 1)
            dl[new_dst] = xp.where(below, xp.searchsorted(few, d_new), rank[at])
            keys = xp.concatenate([few, xp.flatnonzero(seen) + lo])
            return keys, rank[s - lo], dl
    keys = _unique(xp, xp.concatenate([s, d_new]))
    dl[new_dst] = xp.searchsorted(keys, d_new)
    return keys, xp.searchsorted(keys, s).astype(xp.int64), dl


def _string_positions(keys: pa.Array, of: pa.Array) -> np.ndarray:
    """The position of each string of ``of`` among the sorted distinct ``keys``."""
    return pc.index_in(as_large_string(_plain(of)), value_set=keys).to_numpy(
        zero_copy_only=False).astype(np.int64)


def _fingerprint(index, keys, sl, dl, d_old, held_s, held_d, rows) -> str:
    """The index's fingerprint after the batch: the one before, the new keys, the batch's
    edges (new vertex i as ``n + i``, a held one by its id; an order-independent sum, as in
    :func:`~grail_duckdb.engine.build.fingerprint_of`, duplicates counted) and its rows. It
    names the index's history: a rebuild of the same edges has a fingerprint of its own."""
    kern, xp = index.kernels, index.kernels.xp
    n = index.n_vertices
    h = hashlib.blake2b(digest_size=16)
    h.update(b"grail_duckdb append\0" + index.fingerprint.encode())
    for buf in _plain(keys).buffers():
        if buf is not None:
            h.update(hash_bytes(buf))  # (a million keys: blake2b took 15 ms, this 2)
    target = xp.where(dl >= 0, n + dl, d_old.astype(xp.int64))
    edges = kern.edge_hash_sum(pack_pairs(xp, n + sl, target)) if sl.shape[0] else 0
    h.update(edges.to_bytes(8, "little"))
    held = kern.edge_hash_sum(xp.asarray(pack_pairs(np, held_s, held_d))) if len(held_s) else 0
    h.update(held.to_bytes(8, "little"))
    h.update(int(rows).to_bytes(8, "little"))
    return h.hexdigest()


def _new_components(index, k: int, sl, dl, d_old):
    """``(comp, dag, labels)`` of the batch's new vertices: their components (condensed among
    themselves), those components' children and labels (see the module)."""
    kern = index.kernels
    xp = kern.xp
    c0 = index.n_components
    nn = dl >= 0
    among = pack_pairs(xp, sl[nn], dl[nn])
    fwd = _rows(xp, among, 0, k)
    swap_pairs(xp, among)
    cond = condense(kern, [fwd, _rows(xp, among, 0, k)])
    local = cond.comp
    n = cond.n_components
    if bool(nn.all()):
        target = c0 + local[dl].astype(xp.int64)
    elif not bool(nn.any()):
        target = _components_of(index, d_old)
    else:  # (the gathers read a valid row where the other side is taken)
        target = xp.where(nn, c0 + local[xp.where(nn, dl, 0)].astype(xp.int64),
                          _components_of(index, xp.where(nn, 0, d_old)))
    dag = _rows(xp, pack_pairs(xp, c0 + local[sl], target), c0, n)
    lab = _new_labels(index, cond, dag)
    return (c0 + local).astype(xp.int32), dag, lab


def _rows(xp, pairs, first: int, n: int) -> CSR:
    """The rows of sources ``first .. first + n - 1`` of packed edges (``src << 32 | dst``,
    every source among them), each row's targets sorted, duplicates and self-loops dropped:
    a sort, where the backend's CSR kernels would cost more in launches than a batch's few
    edges in work.

    >>> g = _rows(np, pack_pairs(np, [6, 5, 5, 5, 6], [5, 9, 5, 2, 5]), 5, 2)
    >>> g.indptr.tolist(), g.indices.tolist()
    ([0, 2, 3], [2, 9, 5])
    """
    pairs = _unique(xp, pairs)
    s = (pairs >> xp.uint64(32)).astype(xp.int64)
    t = (pairs & xp.uint64(0xFFFFFFFF)).astype(xp.int64)
    keep = s != t
    s, t = s[keep], t[keep]
    ptr = xp.zeros(n + 1, xp.int64)
    xp.cumsum(xp.bincount(s - first, minlength=n), out=ptr[1:])
    return CSR(ptr, t.astype(xp.int32))


def _components_of(index, ids):
    """The components (int64) of held vertices ``ids``: the ids themselves where every
    vertex is a component of its own (no gather)."""
    xp = index.kernels.xp
    return ids.astype(xp.int64) if index.identity else index.comp[ids].astype(xp.int64)


def _new_labels(index, cond, dag: CSR) -> Labels:
    """The labels of the new components (``cond``: their condensation; ``dag``: their
    children, ids of the grown index), folded from their children's (see the module)."""
    kern = index.kernels
    xp = kern.xp
    lab = index.labels
    c0, n = index.n_components, cond.n_components
    d, words = lab.d, int(lab.hub_down.shape[1])
    wwords = 0 if lab.win_down is None else int(lab.win_down.shape[1])
    topo = cond.topo if cond.topo is not None else kern.topological_levels(cond.dag,
                                                                            cond.dag_rev)
    floor = index.level_floor - topo.levels  # the lowest new level
    if n and floor <= -EDGE_LEVEL_CAP:
        raise NotAppendableError(
            f"this append would put a level at {floor}, below the {-EDGE_LEVEL_CAP + 1} an "
            "index keeps (the levels of many appends add up): rebuild the index")
    level = (floor + topo.level).astype(xp.int32)
    parent = kern.tree_parents(cond.dag_rev, topo.level)
    size = kern.subtree_sizes(parent, topo)
    post = kern.post_orders(parent, topo, size, d, index.seed)
    del parent
    tree = xp.empty((n, 4), xp.int32)
    tree[:, 0] = c0 + post[:, 0] - size + 1
    tree[:, 1] = c0 + post[:, 0]
    lo, rpost = tree_of_children(kern, cond, topo, index.seed)
    tree[:, 2] = c0 + lo
    tree[:, 3] = c0 + rpost
    # local ids of the fold: the new components, then a row per edge into a built one (a
    # built child of several new ones repeats: fewer rows than a sort and a search cost)
    is_new = dag.indices >= c0
    old = dag.indices[~is_new]
    m = int(old.shape[0])
    local = xp.where(is_new, dag.indices - c0, n - 1 + xp.cumsum(~is_new, dtype=xp.int32))
    inner = xp.empty((n + m, d), xp.int32)
    outer = xp.empty((n + m, d), xp.int32)
    inner[:n] = c0 + post
    outer[:n] = c0 + post
    down = xp.zeros((n + m, words), xp.uint64)
    wdown = xp.zeros((n + m, wwords), xp.uint64)
    base = xp.zeros(n + m, xp.int32)
    if wwords:
        base[:n] = int(lab.win_first[0])
    kern.gather_labels(lab, old, inner[n:], outer[n:], down[n:], wdown[n:], base[n:])
    kern.append_fold(CSR(dag.indptr, local.astype(xp.int32, copy=False)),
                     reversed_levels(xp, topo), inner, outer, down, wdown, base, 64 * wwords)
    windows = {} if not wwords else dict(win_down=wdown[:n].copy(),
                                         win_up=xp.zeros((n, wwords), xp.uint64))
    return Labels(level=level, inner=inner[:n].copy(), outer=outer[:n].copy(), tree=tree,
                  hub_down=down[:n].copy(), hub_up=xp.zeros((n, words), xp.uint64), **windows)


def with_labels(index, batch: AppendBatch) -> AppendBatch:
    """``batch`` with its new components' labels (on ``index``'s backend): a batch read from
    a part holds its graph alone, and its labels are folded again from its children's in
    ``index`` (the index it was absorbed into) as the absorb folded them: a part's bytes are
    mostly its children, and writing the labels too would more than double them, while the
    fold of a batch costs milliseconds."""
    if batch.labels is not None:
        return batch
    xp = index.kernels.xp
    batch = batch.on(xp, labels=False)
    n, c0 = batch.components, index.n_components
    ptr, children = batch.dag.indptr, batch.dag.indices
    row = xp.searchsorted(ptr[1:], xp.arange(children.shape[0], dtype=ptr.dtype), side="right")
    new = children >= c0
    among = pack_pairs(xp, row[new], children[new].astype(xp.int64) - c0)
    fwd = _rows(xp, among, 0, n)
    swap_pairs(xp, among)
    cond = Condensation(None, n, fwd, _rows(xp, among, 0, n))
    return replace(batch, labels=_new_labels(index, cond, batch.dag))


def apply_batch(index, batch: AppendBatch):
    """A new index: ``index`` grown by ``batch``'s vertices, components, rows and labels
    (its arrays moved to ``index``'s backend first); ``index`` itself is unchanged."""
    from .index import GrailIndex  # the index module imports this one

    kern = index.kernels
    xp = kern.xp
    batch = batch.on(xp)
    c0, n0 = index.n_components, index.n_vertices
    n_new, k = batch.components, batch.vertices
    rooms = dict(index._rooms)
    ids, moved = index.ids.appended(batch.keys)
    if moved is None:
        comp, rooms["comp"] = grow(xp, index.comp, batch.comp, rooms.get("comp"))
    else:
        comp = xp.empty(n0 + k, xp.int32)
        at = xp.asarray(moved)
        comp[at[:n0]] = index.comp
        comp[at[n0:]] = batch.comp
        rooms.pop("comp", None)
    ptr, rooms["indptr"] = grow(xp, index.dag.indptr, index.dag.m + batch.dag.indptr[1:],
                                rooms.get("indptr"))
    idx, rooms["indices"] = grow(xp, index.dag.indices, batch.dag.indices, rooms.get("indices"))
    labels = _grown_labels(xp, index.labels, batch.labels, rooms)
    kern.synchronize()  # written before other threads' streams read them
    floor = index.level_floor
    if n_new:
        floor = min(floor, int(batch.labels.level.min()))
    out = GrailIndex(
        ids=ids, comp=comp, n_components=c0 + n_new, dag=CSR(ptr, idx), labels=labels,
        seed=index.seed, edge_rows=index.edge_rows + batch.rows,
        fingerprint=batch.fingerprint, kernels=kern, level_floor=floor,
        comp_identity=index.identity and moved is None and n_new == k,
        appended=index.appended + (batch,), base_path=index.base_path,
        persisted=index.persisted, edge_source=index.edge_source, _rooms=rooms)
    host = index._host_copy
    if host is not None and host is not index:
        out._host_copy = apply_batch(host, batch.on(np))
    return out


def _grown_labels(xp, lab: Labels, new: Labels, rooms: dict) -> Labels:
    """``lab`` with ``new``'s rows after its own: array by array on the CPU, the record of
    each component (:mod:`grail_duckdb.kernels.records`), the levels and the windows on a
    GPU."""
    grown = {}
    names = _LABEL_ROWS if lab.win_down is not None else _LABEL_ROWS[:6]
    if lab.record is not None:
        rec, rooms["record"] = grow(xp, lab.record, label_record(xp, new), rooms.get("record"))
        for name in ("level",) + names[6:]:
            grown[name], rooms[name] = grow(xp, getattr(lab, name), getattr(new, name),
                                            rooms.get(name))
        return with_record(xp, lab, rec, **grown)
    for name in names:
        grown[name], rooms[name] = grow(xp, getattr(lab, name), getattr(new, name),
                                        rooms.get(name))
    return Labels(**grown, win_first=lab.win_first)


def parts_share(index) -> float:
    """The edge rows of ``index``'s appended batches over those of its file."""
    added = sum(b.rows for b in index.appended)
    return added / max(index.edge_rows - added, 1)
