"""Whole columns of (src, dst) keys -> exact reachability answers.

queries -> ids -> components -> cuts -> search, in that order:

* NULL on either side: NULL; equal non-NULL keys: true (the empty path);
* a key that is not a vertex (and differs from the other): false;
* same strongly connected component: true;
* the negative cuts: topological level, then the d GRAIL label containments and the hub
  sets: false;
* the positive cuts: the target lies in the source's spanning-tree interval, or the source
  reaches a hub that reaches the target: true;
* every other query goes to the label-pruned multi-query bitmask search (GRAIL GPU paper,
  Section 5, Algorithm 7), one bit per query.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels as K
from .ids import key_kind

#: queries per search pass = 64 * SEARCH_WORDS
SEARCH_WORDS = 1


@dataclass
class QueryStats:
    """How the queries of one call were settled (each query counted once)."""

    queries: int = 0
    null: int = 0
    same_key: int = 0
    unknown_vertex: int = 0
    same_component: int = 0
    level_cut: int = 0
    label_cut: int = 0
    tree_cut: int = 0
    hub_cut: int = 0
    searched: int = 0
    search_reachable: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def __iadd__(self, other: "QueryStats") -> "QueryStats":
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)
        return self


def as_key_array(x) -> pa.Array:
    """Any column-like (pyarrow, NumPy, list) as one pyarrow Array."""
    if isinstance(x, pa.ChunkedArray):
        return x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
    if isinstance(x, pa.Array):
        return x
    if isinstance(x, np.ndarray) and x.dtype.kind in "US":
        return pa.array(x.astype(str).tolist(), pa.string())
    return pa.array(x)


def _same_key(src: pa.Array, dst: pa.Array) -> np.ndarray:
    """Non-NULL pairs whose keys are equal (works for keys that are not vertices too)."""
    if key_kind(src.type) == "str":
        src, dst = src.cast(pa.large_string()), dst.cast(pa.large_string())
    else:
        src, dst = src.cast(pa.int64()), dst.cast(pa.int64())
    eq = pc.equal(src, dst)
    return eq.fill_null(False).to_numpy(zero_copy_only=False)


def reaches(index, src, dst, *, words: int = SEARCH_WORDS, use_cuts: bool = True):
    """Answers for whole columns: ``(pyarrow.BooleanArray, QueryStats)``.

    ``use_cuts=False`` sends every query between different components to the search with no
    label pruning at all (the bench's "plain multi-source BFS" baseline).
    """
    src, dst = as_key_array(src), as_key_array(dst)
    if len(src) != len(dst):
        raise ValueError(f"src and dst differ in length ({len(src)} vs {len(dst)})")
    nq = len(src)
    stats = QueryStats(queries=nq)
    null = np.zeros(nq, bool)
    for arr in (src, dst):
        if arr.null_count:
            null |= arr.is_null().to_numpy(zero_copy_only=False)
    stats.null = int(null.sum())
    sid = index.ids.encode(src)
    did = index.ids.encode(dst)
    same = (sid == did) & (sid >= 0)
    unknown = ((sid < 0) | (did < 0)) & ~null
    if unknown.any():  # keys that are not vertices still reach themselves
        rows = np.flatnonzero(unknown)
        same[rows] = _same_key(src.take(rows), dst.take(rows))
    answer = same.copy()
    stats.same_key = int(same.sum())
    known = ~(unknown | same | null)
    stats.unknown_vertex = int(unknown.sum() - same[unknown].sum()) if unknown.any() else 0
    if known.all():
        qidx = None
        ans_known, sub = _answer_ids(index, sid, did, words, use_cuts)
    else:
        qidx = np.flatnonzero(known)
        ans_known, sub = _answer_ids(index, sid[qidx], did[qidx], words, use_cuts)
    if sub.queries:
        if qidx is None:
            answer = ans_known
        else:
            answer[qidx] = ans_known
        stats += sub
        stats.queries -= sub.queries
    mask = null if stats.null else None
    return pa.array(answer, pa.bool_(), mask=mask), stats


def _answer_ids(index, sid, did, words, use_cuts):
    """Answers for pairs of known, distinct vertex ids (on the index's backend)."""
    k = index.kernels
    xp = k.xp
    stats = QueryStats(queries=int(sid.shape[0]))
    sid, did = xp.asarray(sid), xp.asarray(did)
    if index.n_components == index.n_vertices:  # acyclic input: components are the vertices
        cs, ct = sid, did
    else:
        cs, ct = index.comp[sid], index.comp[did]
    lab = index.labels
    if use_cuts:
        status = k.query_cuts(cs, ct, lab)
        counts = np.bincount(_host(xp, status).astype(np.int64), minlength=6)
        stats.same_component = int(counts[K.SAME_COMPONENT])
        stats.level_cut = int(counts[K.LEVEL_CUT])
        stats.label_cut = int(counts[K.LABEL_CUT])
        stats.tree_cut = int(counts[K.TREE_CUT])
        stats.hub_cut = int(counts[K.HUB_CUT])
        answer = (status == K.SAME_COMPONENT) | (status == K.TREE_CUT) | (status == K.HUB_CUT)
        todo = xp.flatnonzero(status == K.UNDECIDED)
    else:
        same = cs == ct
        stats.same_component = int(same.sum())
        answer = same.copy()
        todo = xp.flatnonzero(~same)
    stats.searched = int(todo.shape[0])
    if stats.searched:
        qs, qt = cs[todo], ct[todo]
        order = xp.argsort(qs, kind="stable")  # queries from one source share a pass
        found = k.bitmask_search(index.dag, lab, qs[order], qt[order], words, use_cuts)
        hit = xp.zeros_like(found)
        hit[order] = found
        answer[todo] = hit
        stats.search_reachable = int(hit.sum())
    return _host(xp, answer), stats


def _host(xp, a):
    return a.get() if hasattr(a, "get") and xp is not np else np.asarray(a)
