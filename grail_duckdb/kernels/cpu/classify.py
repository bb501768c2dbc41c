"""CPU twins of ``kernels/classify.cu``: the fused classification of a batch of key pairs
(key -> id -> component -> every cut -> answer bit and status count) and the bounded per-pair
search of the pairs no cut settles.

Every kernel here handles a range of rows ``[lo, hi)``; the serial driver runs one range on the
calling thread (DuckDB's 2,048-row chunks, several threads at once: ``nogil``), the parallel
driver splits a batch into chunks of whole answer bytes over all cores (``prange``). Both give
the GPU's answers and counts exactly: the same cuts in the same order, the same bounded search.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..shared import (ANSWER_OF, DEFERRED, HUB_CUT, LABEL_CUT, LEVEL_CUT, LOOKUP_DENSE,
                      LOOKUP_IDS, N_STATUS, NULL_PAIR, PROBE_EXCLUDES, PROBE_REACHES,
                      PROBE_STACK, SAME_COMPONENT, SAME_KEY, SAME_VERTEX, TREE_CUT, UNDECIDED,
                      UNKNOWN, level_excludes)
from .search import _hub_reaches, _may_reach, _tree_reaches

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(**_JIT)
def _lookup(key, mode, offset, table, sorted_keys):
    """The vertex id of a key, or a negative number when it is not a vertex (KeyLookup::id)."""
    if mode == LOOKUP_IDS:
        return np.int64(key)
    if mode == LOOKUP_DENSE:
        j = np.uint64(key) - np.uint64(offset)  # exact for any two 64-bit keys
        return np.int64(table[j]) if j < np.uint64(table.shape[0]) else np.int64(-1)
    lo = 0
    hi = sorted_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return np.int64(lo) if lo < sorted_keys.shape[0] and sorted_keys[lo] == key else np.int64(-1)


@njit(**_JIT)
def _classify(ka, kb, mode, offset, table, sorted_keys, comp, level, inner, outer, tree_lo,
              tree_post, down, up, prune):
    """(code, u, t) of one valid pair of keys (classify_pair): unknown keys (equal ones:
    SAME_KEY), same vertex, same component, then with ``prune`` the level cut, the positive
    tree and hub cuts and the negative label and hub tests; UNDECIDED when none settles it."""
    a = _lookup(ka, mode, offset, table, sorted_keys)
    b = _lookup(kb, mode, offset, table, sorted_keys)
    if a < 0 or b < 0:
        return (SAME_KEY if ka == kb else UNKNOWN), 0, 0
    if a == b:
        return SAME_VERTEX, 0, 0
    u = a if comp.shape[0] == 0 else np.int64(comp[a])
    t = b if comp.shape[0] == 0 else np.int64(comp[b])
    if u == t:
        return SAME_COMPONENT, u, t
    if not prune:
        return UNDECIDED, u, t
    if level_excludes(level[u], level[t]):
        return LEVEL_CUT, u, t
    if _tree_reaches(u, t, tree_lo, tree_post):
        return TREE_CUT, u, t
    if _hub_reaches(u, t, down, up):
        return HUB_CUT, u, t
    if not _may_reach(u, t, level, inner, outer, down, up):
        return LABEL_CUT, u, t
    return UNDECIDED, u, t


@njit(**_JIT)
def _probe(u, t, ptr, idx, level, inner, outer, tree_lo, tree_post, down, up, budget, stack):
    """The bounded search of one undecided pair (probe_pair): depth first from u, stopping at
    the first vertex that meets t (t itself, t in its tree interval, a hub reaching t), entering
    only children that pass the negative cuts; DEFERRED after ``budget`` edges or when the
    stack (PROBE_STACK entries) is full."""
    if budget <= 0:
        return DEFERRED
    top = 1
    steps = 0
    stack[0] = u
    while top > 0:
        top -= 1
        v = stack[top]
        for e in range(ptr[v], ptr[v + 1]):
            if steps == budget:
                return DEFERRED
            steps += 1
            w = idx[e]
            if w == t or _tree_reaches(w, t, tree_lo, tree_post) or _hub_reaches(w, t, down, up):
                return PROBE_REACHES
            if _may_reach(w, t, level, inner, outer, down, up):
                if top == PROBE_STACK:
                    return DEFERRED
                stack[top] = w
                top += 1
    return PROBE_EXCLUDES


@njit(**_JIT)
def answer_range(lo, hi, ks, kt, valid, mode, offset, table, sorted_keys, comp, ptr, idx, level,
                 inner, outer, tree_lo, tree_post, down, up, prune, budget, bits, codes, counts):
    """Rows [lo, hi) of a batch (classify_kernel + probe_kernel): the status code of each pair
    in ``codes``, its answer bit in ``bits`` (Arrow's order: bit q % 8 of byte q // 8; lo a
    multiple of 8, the bytes of the range zeroed here), each code counted in ``counts``.

    ``valid`` (empty: every pair is valid) holds 0 for a NULL pair. counts[UNDECIDED] counts the
    pairs that reached the bounded search (with ``prune``); each then ends PROBE_REACHES,
    PROBE_EXCLUDES or DEFERRED. Without ``prune`` an undecided pair is DEFERRED at once.
    """
    stack = np.empty(PROBE_STACK, np.int64)
    for i in range(lo >> 3, (hi + 7) >> 3):
        bits[i] = 0
    for q in range(lo, hi):
        if valid.shape[0] and not valid[q]:
            code = NULL_PAIR
        else:
            code, u, t = _classify(ks[q], kt[q], mode, offset, table, sorted_keys, comp, level,
                                   inner, outer, tree_lo, tree_post, down, up, prune)
            if code == UNDECIDED:
                if prune:
                    counts[UNDECIDED] += 1
                    code = _probe(u, t, ptr, idx, level, inner, outer, tree_lo, tree_post, down,
                                  up, budget, stack)
                else:
                    code = DEFERRED
        counts[code] += 1
        codes[q] = code
        if ANSWER_OF[code]:
            bits[q >> 3] |= np.uint8(1 << (q & 7))


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def answer_parallel(ks, kt, valid, mode, offset, table, sorted_keys, comp, ptr, idx, level,
                    inner, outer, tree_lo, tree_post, down, up, prune, budget, bits, codes,
                    chunk):
    """:func:`answer_range` over the whole batch on every core: chunks of ``chunk`` rows (a
    multiple of 8, so no two chunks share an answer byte); returns the summed counts."""
    nq = ks.shape[0]
    nchunks = (nq + chunk - 1) // chunk
    per = np.zeros((nchunks, N_STATUS), np.int64)
    for c in prange(nchunks):
        lo = c * chunk
        answer_range(lo, min(lo + chunk, nq), ks, kt, valid, mode, offset, table, sorted_keys,
                     comp, ptr, idx, level, inner, outer, tree_lo, tree_post, down, up, prune,
                     budget, bits, codes, per[c])
    return per.sum(axis=0)


@njit(**_JIT)
def pair_components(rows, ks, kt, mode, offset, table, sorted_keys, comp):
    """(u, t) components of the given rows (pairs of known keys): the deferred pairs' input to
    the multi-query search."""
    u = np.empty(rows.shape[0], np.int32)
    t = np.empty(rows.shape[0], np.int32)
    for i in range(rows.shape[0]):
        a = _lookup(ks[rows[i]], mode, offset, table, sorted_keys)
        b = _lookup(kt[rows[i]], mode, offset, table, sorted_keys)
        u[i] = a if comp.shape[0] == 0 else comp[a]
        t[i] = b if comp.shape[0] == 0 else comp[b]
    return u, t
