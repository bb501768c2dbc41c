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

from ..kernels import shared as K
from ..kernels import to_host
from .ingest import as_column, key_kind

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


def _same_key(src: pa.Array, dst: pa.Array, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` pair two equal non-NULL keys (for keys that are not vertices)."""
    if pa.types.is_null(src.type) or pa.types.is_null(dst.type):
        return np.zeros(rows.shape[0], bool)
    if key_kind(src.type) == "int" and not (src.null_count or dst.null_count):
        a = src.to_numpy(zero_copy_only=False)
        b = dst.to_numpy(zero_copy_only=False)
        return a[rows].astype(np.int64) == b[rows].astype(np.int64)
    src, dst = src.take(rows), dst.take(rows)
    if key_kind(src.type) == "str":
        src, dst = src.cast(pa.large_string()), dst.cast(pa.large_string())
    else:
        src, dst = src.cast(pa.int64()), dst.cast(pa.int64())
    return pc.equal(src, dst).fill_null(False).to_numpy(zero_copy_only=False)


#: answer of each status code (index = code)
_ANSWER_OF = np.zeros(8, bool)
_ANSWER_OF[list(K.SETTLED_TRUE)] = True


def reaches(index, src, dst, *, words: int = SEARCH_WORDS, use_cuts: bool = True):
    """Answers for whole columns: ``(pyarrow.BooleanArray, QueryStats)``.

    One pass classifies every query (ids -> components -> cuts, ``kernels.query_cuts``); only
    the undecided ones go to the search. ``use_cuts=False`` sends every query between different
    components to the search with no pruning at all (the bench's "plain multi-source BFS").
    """
    src, dst = as_column(src, "source"), as_column(dst, "destination")
    if len(src) != len(dst):
        raise ValueError(f"src and dst differ in length ({len(src)} vs {len(dst)})")
    nq = len(src)
    k = index.kernels
    xp = k.xp
    sid = index.ids.encode(src, xp)
    did = index.ids.encode(dst, xp)
    identity = index.n_components == index.n_vertices  # acyclic input
    status = k.query_cuts(sid, did, None if identity else index.comp, index.labels, use_cuts)
    counts = to_host(xp.bincount(status.view(xp.uint8), minlength=8))
    answer = xp.asarray(_ANSWER_OF)[status]
    null = None
    if src.null_count or dst.null_count:
        null = ~(src.is_valid().to_numpy(zero_copy_only=False)
                 & dst.is_valid().to_numpy(zero_copy_only=False))
    same_key = int(counts[K.SAME_VERTEX])
    nulls = 0 if null is None else int(null.sum())
    stats = QueryStats(
        queries=nq, null=nulls, same_component=int(counts[K.SAME_COMPONENT]),
        level_cut=int(counts[K.LEVEL_CUT]), label_cut=int(counts[K.LABEL_CUT]),
        tree_cut=int(counts[K.TREE_CUT]), hub_cut=int(counts[K.HUB_CUT]),
        searched=int(counts[K.UNDECIDED]))
    if stats.searched:
        todo = xp.flatnonzero(status == K.UNDECIDED)
        found = _search(index, sid[todo], did[todo], words, use_cuts)
        answer[todo] = found
        stats.search_reachable = int(found.sum())
    answer = to_host(answer)
    if counts[K.UNKNOWN] > nulls:  # keys that are not vertices still reach themselves
        rows = np.flatnonzero(to_host(status) == K.UNKNOWN)
        eq = _same_key(src, dst, rows)
        answer[rows[eq]] = True
        same_key += int(eq.sum())
    stats.same_key = same_key
    stats.unknown_vertex = int(counts[K.UNKNOWN]) - nulls - (same_key - int(counts[K.SAME_VERTEX]))
    return pa.array(answer, pa.bool_(), mask=null), stats


def _search(index, sid, did, words, prune):
    """The label-pruned bitmask search over the condensed DAG for known, undecided pairs
    (arrays of the index's backend in and out)."""
    k = index.kernels
    xp = k.xp
    if index.n_components != index.n_vertices:
        sid, did = index.comp[sid], index.comp[did]
    order = xp.argsort(sid, kind="stable")  # queries from one source share a pass
    found = k.bitmask_search(index.dag, index.labels, sid[order], did[order], words, prune)
    hit = xp.zeros_like(found)
    hit[order] = found
    return hit

