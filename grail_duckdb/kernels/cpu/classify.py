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
from numba import prange

from ...jit import njit
from ..shared import (ANSWER_OF, DEFERRED, HUB_CUT, LABEL_CUT, LEVEL_CUT, LOOKUP_DENSE,
                      LOOKUP_IDS, LOOKUP_RANGE, N_STATUS, NULL_PAIR, PROBE_EXCLUDES,
                      PROBE_REACHES, PROBE_STACK, SAME_COMPONENT, SAME_KEY, SAME_VERTEX,
                      TREE_CUT, UNDECIDED, UNKNOWN, level_excludes)
from ..host.keys import above_int64
from .search import _hub_reaches, _may_reach, _tree_reaches, _window_reaches

_JIT = dict(cache=True, nogil=True, boundscheck=False)
#: children of a pair's source whose labels are touched before the bounded searches start
WARM_CHILDREN = 4


@njit(read_only=("keys",), **_JIT)
def _lookup_range(keys, lo, hi, mode, offset, size, table, sorted_keys, out):
    """out[i] = the vertex id of keys[lo + i], or a negative number when it is not a vertex
    (KeyLookup::id). ``keys``: any key type of :mod:`..host.keys` (a uint64 key above
    2**63 - 1 is no vertex). One tight loop per mode (the mode is fixed for a batch): a lookup
    that branches on the mode per key runs many times slower. Dense and range: key - offset
    is exact whenever key >= offset (a wrapped difference is negative)."""
    if mode == LOOKUP_IDS:
        for i in range(hi - lo):
            out[i] = np.int64(keys[lo + i])
    elif mode == LOOKUP_RANGE:
        for i in range(hi - lo):
            raw = keys[lo + i]
            key = np.int64(raw)
            j = key - offset
            inside = (key >= offset) & (j >= 0) & (j < size) & (not above_int64(raw))
            out[i] = j if inside else -1
    elif mode == LOOKUP_DENSE:
        for i in range(hi - lo):
            raw = keys[lo + i]
            key = np.int64(raw)
            j = key - offset
            inside = (key >= offset) & (j >= 0) & (j < size) & (not above_int64(raw))
            found = np.int64(table[j if inside else 0]) if size else np.int64(-1)
            out[i] = found if inside else -1
    else:
        for i in range(hi - lo):
            raw = keys[lo + i]
            found = _search_sorted(sorted_keys, np.int64(raw))
            out[i] = -1 if above_int64(raw) else found


@njit(**_JIT)
def _search_sorted(sorted_keys, key):
    """The position of key in the ascending sorted_keys, or -1."""
    lo = 0
    hi = sorted_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < sorted_keys.shape[0] and sorted_keys[lo] == key else -1


@njit(**_JIT)
def _probe(u, t, ptr, idx, level, inner, outer, tree, down, up, budget, stack):
    """The bounded search of one undecided pair (probe_pair): depth first from u, stopping at
    the first vertex that meets t (t itself, either tree cut, a hub reaching t), entering
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
            if w == t or _tree_reaches(w, t, tree) or _hub_reaches(w, t, down, up):
                return PROBE_REACHES
            if _may_reach(w, t, level, inner, outer, down, up):
                if top == PROBE_STACK:
                    return DEFERRED
                stack[top] = w
                top += 1
    return PROBE_EXCLUDES


@njit(read_only=("ks", "kt"), **_JIT)
def answer_range(lo, hi, ks, kt, valid, mode, offset, size, table, sorted_keys, comp, ptr, idx,
                 level, inner, outer, tree, down, up, wdown, wup, wfirst, prune, budget, bits,
                 codes, counts):
    """Rows [lo, hi) of a batch (classify_kernel + probe_kernel): the status code of each pair
    in ``codes``, its answer bit in ``bits`` (Arrow's order: bit q % 8 of byte q // 8; lo a
    multiple of 8, the bytes of the range zeroed here), each code counted in ``counts``.

    The cuts are the GPU's, in its order (classify_pair): NULL pair, unknown keys (equal ones:
    SAME_KEY), same vertex, same component, then with ``prune`` the level cut, the positive tree
    cut, the negative label and hub tests, the positive hub cuts (the window hubs' counted as
    HUB_CUT).
    counts[UNDECIDED] counts the pairs that reach the bounded search (with ``prune``); each then
    ends PROBE_REACHES, PROBE_EXCLUDES or DEFERRED. Without ``prune`` an undecided pair is
    DEFERRED at once. ``valid`` (empty: every pair is valid) holds 0 for a NULL pair. ``ks``
    and ``kt``: keys of one key type of :mod:`..host.keys` (equal keys compare equal as they
    are); with ``budget`` 0 the DAG is not read (``ptr``, ``idx`` may be empty).

    The first sweep does only what every pair needs (lookups, components, levels) with no
    unpredictable branch, so the processor keeps many cache misses in flight; then each
    further cut is one pass over the pairs still open, and the bounded search the last.
    """
    m = hi - lo
    cu = np.empty(m, np.int64)
    cv = np.empty(m, np.int64)
    _lookup_range(ks, lo, hi, mode, offset, size, table, sorted_keys, cu)
    _lookup_range(kt, lo, hi, mode, offset, size, table, sorted_keys, cv)
    identity = comp.shape[0] == 0
    for i in range(m):
        q = lo + i
        ka = ks[q]
        kb = kt[q]
        a = cu[i]
        b = cv[i]
        ok = (a >= 0) & (b >= 0)
        a0 = a if ok else 0
        b0 = b if ok else 0
        u = a0 if identity else np.int64(comp[a0])
        t = b0 if identity else np.int64(comp[b0])
        cu[i] = u
        cv[i] = t
        code = UNDECIDED
        code = LEVEL_CUT if prune & level_excludes(level[u], level[t]) else code
        code = SAME_COMPONENT if u == t else code
        code = SAME_VERTEX if a == b else code
        code = code if ok else (SAME_KEY if ka == kb else UNKNOWN)
        if valid.shape[0]:
            code = code if valid[q] else NULL_PAIR
        codes[q] = code
    # the pairs the first sweep left open, then one tight pass per cut over those still open:
    # consecutive pairs' loads are independent, so their cache misses overlap
    open_ = np.empty(m, np.int64)
    k = 0
    for i in range(m):
        if codes[lo + i] == UNDECIDED:
            open_[k] = i
            k += 1
    if not prune:
        for j in range(k):
            codes[lo + open_[j]] = DEFERRED
        k = 0
    lab = (tree, level, inner, outer, down, up, wdown, wup, wfirst)
    k = _settle(open_, k, codes, lo, cu, cv, TREE_CUT, 0, *lab)
    k = _settle(open_, k, codes, lo, cu, cv, LABEL_CUT, 3, *lab)
    k = _settle(open_, k, codes, lo, cu, cv, HUB_CUT, 1, *lab)
    k = _settle(open_, k, codes, lo, cu, cv, HUB_CUT, 2, *lab)
    counts[UNDECIDED] += k
    if k > 1 and budget > 0:  # (a sum of post ranks, levels and bits is never negative: adds 0)
        counts[UNDECIDED] += _warm(open_, k, cu, ptr, idx, level, inner, outer, tree, down,
                                   up) < 0
    stack = np.empty(PROBE_STACK, np.int64)
    for j in range(k):
        i = open_[j]
        codes[lo + i] = _probe(cu[i], cv[i], ptr, idx, level, inner, outer, tree,
                               down, up, budget, stack)
    for i in range(lo >> 3, (hi + 7) >> 3):
        bits[i] = 0
    for q in range(lo, hi):
        code = codes[q]
        counts[code] += 1
        if ANSWER_OF[code]:
            bits[q >> 3] |= np.uint8(1 << (q & 7))


@njit(**_JIT)
def _touched(open_, k, cu, cv, test, tree, inner, outer, down, up):
    """Load what ``test`` of :func:`_settle` reads first at both ends of the open pairs
    open_[:k] (tree intervals, hub words, first GRAIL intervals), every pair independent of
    the others, so the processor overlaps their cache misses: the test then branches on cached
    values (a branch on a missed load waits for it before the next pair's loads start).
    Returns a sum of ranks and bits that depends on every load (never negative)."""
    acc = 0
    for j in range(k if test != 2 and inner.shape[1] and down.shape[1] else 0):
        u = cu[open_[j]]
        t = cv[open_[j]]
        if test == 0:
            acc += tree[u, 0] + tree[t, 0]
        elif test == 1:
            acc += np.int64(down[u, 0] & up[t, 0] & np.uint64(1))
        else:
            acc += inner[u, 0] + outer[u, 0] + inner[t, 0] + outer[t, 0]
    return acc


@njit(**_JIT)
def _warm(open_, k, cu, ptr, idx, level, inner, outer, tree, down, up):
    """Touch what the bounded searches of the open pairs read first (u's row, its first
    child's labels), every pair independent of the others, so the processor overlaps their
    cache misses; each search then starts from cached lines instead of a chain of misses.
    Returns a value that depends on every load (so none is dropped)."""
    acc = 0
    for j in range(k):
        u = cu[open_[j]]
        for e in range(ptr[u], min(ptr[u + 1], ptr[u] + WARM_CHILDREN)):
            w = idx[e]
            acc += tree[w, 0] + tree[w, 3] + level[w] + inner[w, 0] + outer[w, 0]
            acc += np.int64(down[w, 0] & up[w, 0] & np.uint64(1))
    return acc


@njit(**_JIT)
def _settle(open_, k, codes, lo, cu, cv, code, test, tree, level, inner, outer,
            down, up, wdown, wup, wfirst):
    """One cut over the open pairs open_[:k]: those it settles get ``code`` (test 0: the tree
    interval holds t, 1: a hub meets, 2: a window hub meets, 3: the label and hub tests
    exclude), the others stay open, in order; returns how many stay."""
    if _touched(open_, k, cu, cv, test, tree, inner, outer, down, up) < 0:
        return k  # never (ranks are not negative): the loads only fill the cache
    left = 0
    for j in range(k):
        i = open_[j]
        u = cu[i]
        t = cv[i]
        if test == 0:
            hit = _tree_reaches(u, t, tree)
        elif test == 1:
            hit = _hub_reaches(u, t, down, up)
        elif test == 2:
            hit = _window_reaches(u, t, level, wdown, wup, wfirst)
        else:
            hit = not _may_reach(u, t, level, inner, outer, down, up)
        if hit:
            codes[lo + i] = code
        else:
            open_[left] = i
            left += 1
    return left


@njit(parallel=True, read_only=("ks", "kt"), cache=True, nogil=True, boundscheck=False)
def answer_parallel(ks, kt, valid, mode, offset, size, table, sorted_keys, comp, ptr, idx,
                    level, inner, outer, tree, down, up, wdown, wup, wfirst, prune, budget,
                    bits, codes, chunk):
    """:func:`answer_range` over the whole batch on every core: chunks of ``chunk`` rows (a
    multiple of 8, so no two chunks share an answer byte); returns each chunk's counts (the
    caller sums them: a sum here would be a parallel reduction, seconds more to compile).

    The one kernel of the package on Numba's own threads (``prange``), at 2.4 s more to
    compile than its serial body: a query call of 100K pairs takes well under a millisecond
    on 16 cores, where waking 15 Python threads (:mod:`.cores`) takes most of one, and
    DuckDB's per-chunk calls of 2,048 rows run it too."""
    nq = ks.shape[0]
    nchunks = (nq + chunk - 1) // chunk
    per = np.zeros((nchunks, N_STATUS), np.int64)
    for c in prange(nchunks):
        lo = c * chunk
        answer_range(lo, min(lo + chunk, nq), ks, kt, valid, mode, offset, size, table,
                     sorted_keys, comp, ptr, idx, level, inner, outer, tree, down,
                     up, wdown, wup, wfirst, prune, budget, bits, codes, per[c])
    return per


@njit(read_only=("ks", "kt"), **_JIT)
def pair_components(rows, ks, kt, mode, offset, size, table, sorted_keys, comp):
    """(u, t) components of the given rows (pairs of known keys, so none above 2**63 - 1): the
    deferred pairs' input to the exact search."""
    a = np.empty(rows.shape[0], np.int64)
    b = np.empty(rows.shape[0], np.int64)
    ka = np.empty(rows.shape[0], np.int64)
    kb = np.empty(rows.shape[0], np.int64)
    for i in range(rows.shape[0]):
        ka[i] = np.int64(ks[rows[i]])
        kb[i] = np.int64(kt[rows[i]])
    _lookup_range(ka, 0, rows.shape[0], mode, offset, size, table, sorted_keys, a)
    _lookup_range(kb, 0, rows.shape[0], mode, offset, size, table, sorted_keys, b)
    u = np.empty(rows.shape[0], np.int32)
    t = np.empty(rows.shape[0], np.int32)
    for i in range(rows.shape[0]):
        u[i] = a[i] if comp.shape[0] == 0 else comp[a[i]]
        t[i] = b[i] if comp.shape[0] == 0 else comp[b[i]]
    return u, t
