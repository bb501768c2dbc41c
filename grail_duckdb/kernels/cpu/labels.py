"""CPU twins of ``kernels/labels.cu``: the four breadth-first passes of the GRAIL labels (GRAIL
GPU paper, Section 4, Algorithms 2-6) and the hub sets, as worklist sweeps in topological order.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from ..shared import ORDER_BLOCK, funnel, order_params, permute_step

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(**_JIT)
def topological_levels(fwd_ptr, fwd_idx, rev_ptr):
    """Kahn's sweep: level[v] = length of the longest path from a root to v; ``order`` lists
    the vertices by non-decreasing level. Returns (level, order, n_visited)."""
    n = rev_ptr.shape[0] - 1
    pending = np.empty(n, np.int64)
    level = np.zeros(n, np.int32)
    order = np.empty(n, np.int32)
    tail = 0
    for v in range(n):
        pending[v] = rev_ptr[v + 1] - rev_ptr[v]
        if pending[v] == 0:
            order[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = order[head]
        head += 1
        lv = level[v] + 1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            if level[w] < lv:
                level[w] = lv
            pending[w] -= 1
            if pending[w] == 0:
                order[tail] = w
                tail += 1
    return level, order, tail


@njit(**_JIT)
def tree_parents(rev_ptr, rev_idx, level):
    """Step 1 (DAG -> directed tree): each vertex keeps, as its tree parent, the smallest-id
    in-neighbour one level above it; roots get -1. Deterministic on every backend."""
    n = level.shape[0]
    parent = np.full(n, -1, np.int32)
    for v in range(n):
        want = level[v] - 1
        best = -1
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            u = rev_idx[e]
            if level[u] == want and (best < 0 or u < best):
                best = u
        parent[v] = best
    return parent


@njit(**_JIT)
def tree_children(fwd_ptr, fwd_idx, level):
    """The mirror of step 1: each vertex keeps, as its link in the tree of chosen children,
    its out-neighbour of smallest level (ties: the smallest id); sinks get -1."""
    n = level.shape[0]
    child = np.full(n, -1, np.int32)
    for v in range(n):
        best = -1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            if best < 0 or level[w] < level[best] or (level[w] == level[best] and w < best):
                best = w
        child[v] = best
    return child


@njit(**_JIT)
def subtree_sizes(parent, order):
    """Step 2 (Algorithm 4): size[v] = number of tree descendants of v, v included."""
    n = parent.shape[0]
    size = np.ones(n, np.int32)
    for i in range(n - 1, -1, -1):
        v = order[i]
        p = parent[v]
        if p >= 0:
            size[p] += size[v]
    return size


@njit(**_JIT)
def permuted_block(b, n_blocks, mask, a1, c, a2, shift):
    """The block at rank b of a pseudo-random permutation of 0..n_blocks-1.

    A bijection of the k-bit integers (multiply by an odd number, add, xor-shift, multiply,
    xor-shift), cycle-walked until it lands below n_blocks: a permutation that needs no table
    and no sort, computed identically by the CUDA twin.
    """
    x = np.uint64(b)
    while True:
        x = permute_step(x, mask, a1, c, a2, shift)
        if x < np.uint64(n_blocks):
            return np.int64(x)


@njit(**_JIT)
def post_orders(parent, order, size, d, seed):
    """Step 3 (Algorithm 5): post-order ranks (1-based) of the tree for d sibling orders.

    In label j, siblings (children of one tree parent; roots are the children of a virtual
    root) are ordered as they appear in label j's pseudo-random vertex order: blocks of
    ORDER_BLOCK consecutive ids in the order ``permuted_block``, and inside a block ids xored
    with a per-label constant. A vertex's post rank is the number of vertices finished before
    its subtree starts (the sizes of earlier siblings along its root path) plus its own size.
    Returns post[C, d] int32.
    """
    n = parent.shape[0]
    post = np.empty((n, d), np.int32)
    start = np.zeros(n, np.int64)  # vertices finished before v's subtree begins
    excl = np.empty(n, np.int64)  # sizes of v's earlier siblings
    acc = np.empty(n + 1, np.int64)
    n_blocks = (n + ORDER_BLOCK - 1) // ORDER_BLOCK
    for j in range(d):
        mask, a1, c, a2, shift, xor = order_params(n_blocks, j, seed)
        acc[:] = 0
        for b in range(n_blocks):
            base = permuted_block(b, n_blocks, mask, a1, c, a2, shift) * ORDER_BLOCK
            for o in range(ORDER_BLOCK):
                v = base + np.int64(np.uint64(o) ^ xor)
                if v >= n:
                    continue
                p = parent[v] + 1
                excl[v] = acc[p]
                acc[p] += size[v]
        for i in range(n):
            v = order[i]
            p = parent[v]
            s = excl[v] + (start[p] if p >= 0 else 0)
            start[v] = s
            post[v, j] = s + size[v]
    return post


@njit(**_JIT)
def interval_bounds(fwd_ptr, fwd_idx, order, post):
    """Step 4 (Algorithm 6): per label, the smallest and the largest post rank over v and
    every DAG descendant of v: the interval [inner, outer].

    The bounds run over all DAG children, not only tree children. The paper's tree is a DFS
    tree, where the largest is always v's own rank; ours comes from breadth-first levels, so a
    non-tree edge may lead to a larger rank and the outer bound is propagated too. Either way
    u reaches w only if [inner(w), outer(w)] lies inside [inner(u), outer(u)].
    """
    n, d = post.shape
    inner = post.copy()
    outer = post.copy()
    for i in range(n - 1, -1, -1):
        v = order[i]
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            for j in range(d):
                if inner[w, j] < inner[v, j]:
                    inner[v, j] = inner[w, j]
                if outer[w, j] > outer[v, j]:
                    outer[v, j] = outer[w, j]
    return inner, outer


@njit(inline="always", **_JIT)
def shifted_word(bits, w, k, sh):
    """Word k of row w of ``bits`` shifted ``sh`` bits towards the high end (``sh`` < 0:
    towards the low end), with zeros shifted in: the row rebased from one window to another."""
    words = bits.shape[1]
    q = sh >> 6  # floor division, also for sh < 0
    r = np.uint64(sh & 63)
    a = k - q
    hi = bits[w, a] if 0 <= a < words else np.uint64(0)
    lo = bits[w, a - 1] if 0 <= a - 1 < words else np.uint64(0)
    return funnel(lo, hi, r)


@njit(inline="always", **_JIT)
def window_base(v, level, first, span, up):
    """Hub index of bit 0 of v's window: none (``first`` empty) 0; down (the hubs v may reach,
    from its own level on) ``first[level[v]]``; up (the hubs that may reach v, down to its
    own level) ``first[level[v] + 1] - span``. A level outside the table (an appended
    component's, below every built one: :mod:`grail_duckdb.engine.append`) reads the table's
    nearest end, as many hubs as lie above it: none above a level under 0."""
    if first.shape[0] == 0:
        return 0
    top = first.shape[0] - 1
    at = min(max(level[v] + 1 if up else level[v], 0), top)
    return first[at] - span if up else first[at]


@njit(inline="always", **_JIT)
def _pull_bits(bits, v, ptr, idx, level, first, up):
    """``bits[v] |=`` the rows of v's neighbours, each rebased into v's window."""
    words = bits.shape[1]
    span = 64 * words
    if first.shape[0] == 0:  # one window for all (the global hubs): nothing to rebase
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            for k in range(words):
                bits[v, k] |= bits[w, k]
        return
    base = window_base(v, level, first, span, up)
    for e in range(ptr[v], ptr[v + 1]):
        w = idx[e]
        sh = window_base(w, level, first, span, up) - base
        if -span < sh < span:
            for k in range(words):
                bits[v, k] |= shifted_word(bits, w, k, sh)


@njit(**_JIT)
def hub_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, words, level, first):
    """Reachability to and from hub vertices, as bit sets (one bit per hub).

    ``down[v]``: the hubs v reaches (v included), bottom-up over every DAG child;
    ``up[v]``: the hubs that reach v, top-down over every DAG parent. They are exact, so
    ``down[u] & up[t] != 0`` proves u reaches t (through a hub), while a hub t reaches that u
    does not (``down[t] & ~down[u]``), or one that reaches u but not t (``up[u] & ~up[t]``),
    proves it does not.

    ``first`` empty: ``hub_of[v]`` is v's bit, the same for every vertex. Else the hubs are
    numbered by level (``first[L]``: hubs above level L) and each vertex keeps a window of
    64 * ``words`` of them (:func:`window_base`): its down window starts at the first hub of
    its own level, its up window ends at the last one. The windows are exact too: a hub in
    v's down window that v reaches through a child c lies at c's level or below, so in c's
    window (c's starts at or after v's, and ends after v's ends); the same upwards.
    """
    n = hub_of.shape[0]
    span = 64 * words
    down = np.zeros((n, words), np.uint64)
    up = np.zeros((n, words), np.uint64)
    one = np.uint64(1)
    for i in range(n - 1, -1, -1):
        v = order[i]
        h = hub_of[v] - window_base(v, level, first, span, False)
        if hub_of[v] >= 0 and 0 <= h < span:
            down[v, h >> 6] |= one << np.uint64(h & 63)
        _pull_bits(down, v, fwd_ptr, fwd_idx, level, first, False)
    for i in range(n):
        v = order[i]
        h = hub_of[v] - window_base(v, level, first, span, True)
        if hub_of[v] >= 0 and 0 <= h < span:
            up[v, h >> 6] |= one << np.uint64(h & 63)
        _pull_bits(up, v, rev_ptr, rev_idx, level, first, True)
    return down, up
