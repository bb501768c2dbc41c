"""CPU twins of ``kernels/search.cu``: the label tests every query kernel shares, and the
label-pruned multi-query bitmask search (GRAIL GPU paper, Section 5, Algorithm 7).
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from ..shared import hubs_exclude, hubs_meet, label_excludes, level_excludes, tree_contains
from .hubs import shifted_word, window_base

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(**_JIT)
def _may_reach(u, t, level, inner, outer, down, up):
    """The negative cuts: False when u certainly does not reach t (u != t): levels, the d
    GRAIL intervals, and the hub sets (the shared predicates of :mod:`..shared`)."""
    if level_excludes(level[u], level[t]):
        return False
    for j in range(inner.shape[1]):
        if label_excludes(inner[u, j], outer[u, j], inner[t, j], outer[t, j]):
            return False
    for k in range(down.shape[1]):
        if hubs_exclude(down[u, k], up[u, k], down[t, k], up[t, k]):
            return False
    return True


@njit(**_JIT)
def _tree_reaches(u, t, tree):
    """Positive cut, the two spanning trees (``tree``'s columns: shared.TREE_COLUMNS): t lies
    in u's subtree of the tree of parents, or u in t's subtree of the tree of chosen children
    (u's chain of chosen children passes t)."""
    return (tree_contains(tree[u, 0], tree[u, 1], tree[t, 1])
            or tree_contains(tree[t, 2], tree[t, 3], tree[u, 3]))


@njit(**_JIT)
def _hub_reaches(u, t, down, up):
    """Positive cut: u reaches a hub that reaches t."""
    for k in range(down.shape[1]):
        if hubs_meet(down[u, k], up[t, k]):
            return True
    return False


@njit(**_JIT)
def _window_reaches(u, t, level, wdown, wup, wfirst):
    """Positive cut, the window hubs (:func:`grail_duckdb.engine.labels.window_hubs`): u's
    down window, rebased into t's up window, meets it (u reaches a window hub that reaches
    t). No windows (``wfirst`` empty): False."""
    if wfirst.shape[0] == 0:
        return False
    words = wdown.shape[1]
    span = 64 * words
    sh = window_base(u, level, wfirst, span, False) - window_base(t, level, wfirst, span, True)
    if sh <= -span or sh >= span:
        return False
    for k in range(words):
        if shifted_word(wdown, u, k, sh) & wup[t, k]:
            return True
    return False


@njit(**_JIT)
def bitmask_search(fwd_ptr, fwd_idx, level, inner, outer, tree, down, up, cs, ct, words, prune,
                   seen, pend, queued, marked, touched, stack):
    """Answer queries cs[i] ->? ct[i] with one bit per query, 64 * ``words`` queries a pass.

    Every vertex carries ``words`` 64-bit words: bit i of ``seen`` says query i has reached it,
    bit i of ``pend`` that it still has to expand it. A bit enters a child only when the child
    passes the level and label cuts for that query's target; a query stops (its bit is dropped
    everywhere) once it is answered, either by meeting its target or by entering a vertex
    whose tree interval holds the target or that reaches a hub reaching the target. ``prune=False`` turns every cut off (a plain
    multi-source BFS, the baseline the cuts are measured against). Returns bool answers.

    The scratch arrays (``seen``/``pend`` uint64[n, words] and ``queued``/``marked`` bool[n]
    all zero, ``touched``/``stack`` int32[n]) are handed back all zero again, so one set per
    thread serves every call without clearing n-sized memory each time.
    """
    nq = cs.shape[0]
    ans = np.zeros(nq, np.bool_)
    per = 64 * words
    done = np.zeros(words, np.uint64)
    one = np.uint64(1)
    for base in range(0, nq, per):
        nb = min(per, nq - base)
        ntouched = 0
        top = 0
        for wd in range(words):
            done[wd] = np.uint64(0)
        for i in range(nb):
            u = cs[base + i]
            wd = i >> 6
            b = one << np.uint64(i & 63)
            if not marked[u]:
                marked[u] = True
                touched[ntouched] = u
                ntouched += 1
            seen[u, wd] |= b
            pend[u, wd] |= b
            if not queued[u]:
                queued[u] = True
                stack[top] = u
                top += 1
        remaining = nb
        while top > 0 and remaining > 0:
            top -= 1
            v = stack[top]
            queued[v] = False
            for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
                w = fwd_idx[e]
                for wd in range(words):
                    new = pend[v, wd] & ~done[wd] & ~seen[w, wd]
                    if new == 0:
                        continue
                    if not marked[w]:
                        marked[w] = True
                        touched[ntouched] = w
                        ntouched += 1
                    seen[w, wd] |= new
                    keep = np.uint64(0)
                    bits = new
                    while bits != 0:
                        low = bits & (~bits + one)
                        bits ^= low
                        i = wd * 64 + _ctz(low)
                        t = ct[base + i]
                        if w == t or (prune and (_tree_reaches(w, t, tree)
                                                 or _hub_reaches(w, t, down, up))):
                            ans[base + i] = True
                            done[wd] |= low
                            remaining -= 1
                        elif not prune or _may_reach(w, t, level, inner, outer, down, up):
                            keep |= low
                    if keep != 0:
                        pend[w, wd] |= keep
                        if not queued[w]:
                            queued[w] = True
                            stack[top] = w
                            top += 1
            for wd in range(words):
                pend[v, wd] = np.uint64(0)
        for k in range(ntouched):
            u = touched[k]
            marked[u] = False
            queued[u] = False
            for wd in range(words):
                seen[u, wd] = np.uint64(0)
                pend[u, wd] = np.uint64(0)
    return ans


@njit(**_JIT)
def _ctz(low):
    """Index of the single set bit of a power of two."""
    i = 0
    if low & np.uint64(0xFFFFFFFF) == 0:
        i += 32
        low >>= np.uint64(32)
    if low & np.uint64(0xFFFF) == 0:
        i += 16
        low >>= np.uint64(16)
    if low & np.uint64(0xFF) == 0:
        i += 8
        low >>= np.uint64(8)
    if low & np.uint64(0xF) == 0:
        i += 4
        low >>= np.uint64(4)
    if low & np.uint64(0x3) == 0:
        i += 2
        low >>= np.uint64(2)
    if low & np.uint64(0x1) == 0:
        i += 1
    return i
