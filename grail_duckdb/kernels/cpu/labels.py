"""CPU twins of ``kernels/labels.cu``: the four breadth-first passes of the GRAIL labels (GRAIL
GPU paper, Section 4, Algorithms 2-6) and the hub sets, as worklist sweeps in topological order.

Every array of a vertex or an edge is made by the caller (:class:`~.CpuKernels`) with NumPy and
passed in to be filled: NumPy asks the kernel for huge pages, so the first touch of a large
array costs a fraction of what Numba's own allocations cost. Independent sweeps run on a core
each (the intervals' lower and upper bounds, the hubs down and up, the labels' sibling sums),
and the sweeps over graphs of several edges per vertex prefetch the rows they will read.
"""
from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from ..shared import ORDER_BLOCK, funnel, order_params, permute_step
from .hints import prefetch

_JIT = dict(cache=True, nogil=True, boundscheck=False)
_PAR = dict(_JIT, parallel=True)
#: a sweep prefetches what it reads this many vertices ahead (and twice, thrice as far, the
#: arrays it reads to find those)
AHEAD = 8
#: sweeps over graphs of fewer edges per vertex than this do without the prefetches (their
#: rows are few and mostly in order: the hints would cost more than the misses they hide)
PREFETCH_DEGREE = 2
#: the sibling sums prefetch the block they visit this many blocks later
BLOCKS_AHEAD = 4
#: int32 entries per 64-byte cache line
LINE_INTS = 16
#: no entries: what a sweep prefetches beside the rows when it reads nothing else
_NONE = np.empty(0, np.int32)


@njit(**_JIT)
def topological_levels(fwd_ptr, fwd_idx, rev_ptr, pending, level, order, offsets):
    """Kahn's sweep: level[v] = length of the longest path from a root to v; ``order`` lists
    the vertices by non-decreasing level, level L at ``order[offsets[L]:offsets[L + 1]]``
    (``offsets``: n + 2 entries of room). Returns (levels, n_visited): fewer than n visited
    when the graph has a cycle (then the levels are not all set).

    The queue holds the vertices in order of level, so a vertex is queued by its deepest
    parent, the last of them: its level is that parent's plus one, set once."""
    n = rev_ptr.shape[0] - 1
    offsets[0] = 0
    tail = 0
    for v in range(n):
        pending[v] = rev_ptr[v + 1] - rev_ptr[v]
        if pending[v] == 0:
            level[v] = 0
            order[tail] = v
            tail += 1
    levels = 1 if tail else 0
    head = 0
    fetch = fwd_idx.shape[0] >= PREFETCH_DEGREE * n
    while head < tail:
        if fetch:
            _prefetch_rows(head, 1, tail, order, fwd_ptr, fwd_idx, pending, 1, level)
        v = order[head]
        head += 1
        lv = level[v] + 1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            left = pending[w] - 1
            pending[w] = left
            if left == 0:
                level[w] = lv
                if lv == levels:
                    offsets[levels] = tail
                    levels += 1
                order[tail] = w
                tail += 1
    offsets[levels] = tail
    return levels, tail


@njit(**_PAR)
def tree_parents(rev_ptr, rev_idx, level, parent):
    """Step 1 (DAG -> directed tree): each vertex keeps, as its tree parent, the smallest-id
    in-neighbour one level above it; roots get -1. Deterministic on every backend."""
    for v in prange(level.shape[0]):
        want = level[v] - 1
        best = -1
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            u = rev_idx[e]
            if level[u] == want and (best < 0 or u < best):
                best = u
        parent[v] = best


@njit(**_PAR)
def tree_children(fwd_ptr, fwd_idx, level, child):
    """The mirror of step 1: each vertex keeps, as its link in the tree of chosen children,
    its out-neighbour of smallest level (ties: the smallest id); sinks get -1."""
    for v in prange(level.shape[0]):
        best = -1
        lb = 0
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            lw = level[w]
            if best < 0 or lw < lb or (lw == lb and w < best):
                best = w
                lb = lw
        child[v] = best


@njit(**_JIT)
def subtree_sizes(parent, order, size):
    """Step 2 (Algorithm 4): size[v] = number of tree descendants of v, v included
    (``size`` comes filled with ones)."""
    for i in range(parent.shape[0] - 1, -1, -1):
        v = order[i]
        p = parent[v]
        if p >= 0:
            size[p] += size[v]


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
def _block_order(n_blocks, j, seed):
    """Label j's permutation of the blocks, ``BLOCKS_AHEAD`` zeros after it (so that a sweep
    can name the block it will visit a few steps later without a test), and its xor."""
    mask, a1, c, a2, shift, xor = order_params(n_blocks, j, seed)
    blocks = np.zeros(n_blocks + BLOCKS_AHEAD, np.int64)
    for b in range(n_blocks):
        blocks[b] = permuted_block(b, n_blocks, mask, a1, c, a2, shift) * ORDER_BLOCK
    return blocks, np.int64(xor)


@njit(**_JIT)
def _sibling_sums(parent, size, j, seed, out, acc):
    """Label j's sizes of earlier siblings, ``out[v]`` for every v: the vertices in label j's
    order (``permuted_block``, ids xored inside a block), each parent's running sum of its
    children's sizes in ``acc`` (roots are the children of a virtual root, ``acc[0]``). The
    blocks come in an order no cache can guess: those BLOCKS_AHEAD further on are
    prefetched."""
    n = parent.shape[0]
    n_blocks = (n + ORDER_BLOCK - 1) // ORDER_BLOCK
    blocks, xor = _block_order(n_blocks, j, seed)
    acc[:] = 0
    for b in range(n_blocks):
        ahead = blocks[b + BLOCKS_AHEAD]
        for q in range(0, ORDER_BLOCK, LINE_INTS):
            prefetch(parent, ahead + q)
            prefetch(size, ahead + q)
            prefetch(out, ahead + q)
        base = blocks[b]
        for o in range(ORDER_BLOCK):
            v = base + (o ^ xor)
            if v < n:
                p = parent[v] + 1
                out[v] = acc[p]
                acc[p] += size[v]


@njit(**_PAR)
def _transposed(rows, out):
    """``out[v, j] = rows[j, v]``, a block of ORDER_BLOCK vertices at a time."""
    d, n = rows.shape
    for b in prange((n + ORDER_BLOCK - 1) // ORDER_BLOCK):
        lo = b * ORDER_BLOCK
        hi = min(n, lo + ORDER_BLOCK)
        for j in range(d):
            for v in range(lo, hi):
                out[v, j] = rows[j, v]


@njit(**_JIT)
def _starts_down(parent, order, size, post):
    """``post[v] += size[v]`` plus, below a root, the parent's start (``post[p] - size[p]``),
    for every label at once, in topological order (the parent's row is final before)."""
    n, d = post.shape
    for i in range(n):
        if i + 2 * AHEAD < n:
            prefetch(parent, order[i + 2 * AHEAD])
        if i + AHEAD < n:
            u = order[i + AHEAD]
            prefetch(post, u * d)
            prefetch(size, u)
            q = parent[u]
            if q >= 0:
                prefetch(post, q * d)
                prefetch(size, q)
        v = order[i]
        p = parent[v]
        sv = size[v]
        if p >= 0:
            base = sv - size[p]
            for j in range(d):
                post[v, j] += post[p, j] + base
        else:
            for j in range(d):
                post[v, j] += sv


@njit(**_PAR)
def _all_sibling_sums(parent, size, seed, sums, acc):
    """Every label's sibling sums (``sums[j]``), a label per core at a time, each core with
    its own running sums (``acc[thread]``)."""
    for j in prange(sums.shape[0]):
        _sibling_sums(parent, size, j, seed, sums[j], acc[get_thread_id()])


def post_orders(parent, order, size, seed, sums, acc, post):
    """Step 3 (Algorithm 5): post-order ranks (1-based) of the tree for d sibling orders,
    into ``post[C, d]`` (``sums``: d x C of room, None for one label; ``acc``: threads x
    (C + 1) of room).

    In label j, siblings (children of one tree parent; roots are the children of a virtual
    root) are ordered as they appear in label j's pseudo-random vertex order: blocks of
    ORDER_BLOCK consecutive ids in the order ``permuted_block``, and inside a block ids xored
    with a per-label constant. A vertex's post rank is the number of vertices finished before
    its subtree starts (the sizes of earlier siblings along its root path) plus its own size:
    each label's sibling sums in a row of its own, turned into a row per vertex, then one
    sweep down the order adds the parent's start to all d labels of a vertex at once.
    """
    if sums is None:  # one label: its sums are the one column of ``post`` already
        _all_sibling_sums(parent, size, seed, post.reshape(1, -1), acc)
    else:
        _all_sibling_sums(parent, size, seed, sums, acc)
        _transposed(sums, post)
    _starts_down(parent, order, size, post)


@njit(inline="always", **_JIT)
def _prefetch_rows(i, step, n, order, ptr, idx, rows, width, extra):
    """The prefetches of a sweep over ``order[:n]`` at position i (``step`` +1 or -1): the
    row start of the vertex 3 * AHEAD on, the edges and own row (of ``rows``, ``width``
    entries each) of the one 2 * AHEAD on, the rows and ``extra`` entries of the first
    neighbours of the one AHEAD on. Each stage finds in the cache what the one before asked
    for."""
    k = i + 3 * AHEAD * step
    if 0 <= k < n:
        prefetch(ptr, order[k])
    k = i + 2 * AHEAD * step
    if 0 <= k < n:
        u = order[k]
        prefetch(idx, ptr[u])
        prefetch(rows, u * width)
    k = i + AHEAD * step
    if 0 <= k < n:
        u = order[k]
        for e in range(ptr[u], min(ptr[u + 1], ptr[u] + AHEAD)):
            w = idx[e]
            prefetch(rows, w * width)
            if extra.shape[0]:
                prefetch(extra, w)


@njit(**_JIT)
def _bound(fwd_ptr, fwd_idx, order, out, upper):
    """Each row of ``out`` (the post ranks) the min (``upper`` False) or max over its DAG
    children's rows, bottom-up."""
    n, d = out.shape
    fetch = fwd_idx.shape[0] >= PREFETCH_DEGREE * n
    for i in range(n - 1, -1, -1):
        if fetch:
            _prefetch_rows(i, -1, n, order, fwd_ptr, fwd_idx, out, d, _NONE)
        v = order[i]
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            if upper:
                for j in range(d):
                    out[v, j] = max(out[v, j], out[w, j])
            else:
                for j in range(d):
                    out[v, j] = min(out[v, j], out[w, j])


@njit(**_PAR)
def interval_bounds(fwd_ptr, fwd_idx, order, inner, outer):
    """Step 4 (Algorithm 6): per label, the smallest and the largest post rank over v and
    every DAG descendant of v: the interval [inner, outer] (both come as the post ranks; a
    core each).

    The bounds run over all DAG children, not only tree children. The paper's tree is a DFS
    tree, where the largest is always v's own rank; ours comes from breadth-first levels, so a
    non-tree edge may lead to a larger rank and the outer bound is propagated too. Either way
    u reaches w only if [inner(w), outer(w)] lies inside [inner(u), outer(u)].
    """
    for task in prange(2):
        _bound(fwd_ptr, fwd_idx, order, outer if task else inner, task == 1)


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
    own level) ``first[level[v] + 1] - span``."""
    if first.shape[0] == 0:
        return 0
    return first[level[v] + 1] - span if up else first[level[v]]


@njit(**_JIT)
def _hub_sweep(ptr, idx, order, hub_of, bits, up):
    """One side of :func:`hub_bits` for the global hubs (one window for all): each vertex's
    own bit, then the rows of its neighbours ORed in; down (``up`` False) bottom-up over the
    children, up top-down over the parents."""
    n = hub_of.shape[0]
    words = bits.shape[1]
    fetch = idx.shape[0] >= PREFETCH_DEGREE * n
    for k in range(n):
        i = k if up else n - 1 - k
        if fetch:
            _prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, bits, words, _NONE)
        v = order[i]
        _own_bit(bits, v, hub_of[v], 64 * words)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            for q in range(words):
                bits[v, q] |= bits[w, q]


@njit(inline="always", **_JIT)
def _shifted_pair(lo, hi, sh):
    """A 128-bit row ``hi:lo`` shifted ``sh`` bits towards the high end (``sh`` < 0: towards
    the low end), -128 < sh < 128, zeros shifted in: ``(lo, hi)``."""
    zero = np.uint64(0)
    if sh == 0:
        return lo, hi
    if sh >= 64:
        return zero, lo << np.uint64(sh - 64)
    if sh > 0:
        return lo << np.uint64(sh), funnel(lo, hi, np.uint64(sh))
    if sh <= -64:
        return hi >> np.uint64(-sh - 64), zero
    r = np.uint64(-sh)
    return (lo >> r) | (hi << (np.uint64(64) - r)), hi >> r


@njit(inline="always", **_JIT)
def _own_bit(bits, v, h, span):
    """Set bit ``h`` of row v when it lies in the row (0 <= h < span)."""
    if 0 <= h < span:
        bits[v, h >> 6] |= np.uint64(1) << np.uint64(h & 63)


@njit(inline="always", **_JIT)
def _pull_window(wbits, v, w, sh, span):
    """``wbits[v] |=`` row w rebased by ``sh`` bits (nothing when the windows do not meet)."""
    if -span < sh < span:
        if wbits.shape[1] == 2:
            lo, hi = _shifted_pair(wbits[w, 0], wbits[w, 1], sh)
            wbits[v, 0] |= lo
            wbits[v, 1] |= hi
        else:
            for q in range(wbits.shape[1]):
                wbits[v, q] |= shifted_word(wbits, w, q, sh)


@njit(**_JIT)
def _window_sweep(ptr, idx, order, hub_of, level, first, bits, up):
    """One side of :func:`hub_bits` for the window hubs: each vertex's own bit in its window,
    then the rows of its neighbours, each rebased into the vertex's window."""
    n = hub_of.shape[0]
    span = 64 * bits.shape[1]
    fetch = idx.shape[0] >= PREFETCH_DEGREE * n
    for k in range(n):
        i = k if up else n - 1 - k
        if fetch:
            _prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, bits, bits.shape[1], level)
        v = order[i]
        base = window_base(v, level, first, span, up)
        if hub_of[v] >= 0:
            _own_bit(bits, v, hub_of[v] - base, span)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            _pull_window(bits, v, w, window_base(w, level, first, span, up) - base, span)


@njit(**_JIT)
def _both_sweep(ptr, idx, order, hub_of, win_of, level, first, bits, wbits, up):
    """One side of :func:`hub_and_window_bits`: :func:`_hub_sweep` and :func:`_window_sweep`
    in one walk (the order, the rows and the prefetches read once for both)."""
    n = hub_of.shape[0]
    span, wspan = 64 * bits.shape[1], 64 * wbits.shape[1]
    fetch = idx.shape[0] >= PREFETCH_DEGREE * n
    for k in range(n):
        i = k if up else n - 1 - k
        if fetch:
            _prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, bits, bits.shape[1], level)
            _prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, wbits, wbits.shape[1],
                           _NONE)
        v = order[i]
        _own_bit(bits, v, hub_of[v], span)
        base = window_base(v, level, first, wspan, up)
        if win_of[v] >= 0:
            _own_bit(wbits, v, win_of[v] - base, wspan)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            for q in range(bits.shape[1]):
                bits[v, q] |= bits[w, q]
            _pull_window(wbits, v, w, window_base(w, level, first, wspan, up) - base, wspan)


@njit(**_PAR)
def hub_and_window_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, win_of, level,
                        first, down, up, win_down, win_up):
    """:func:`hub_bits` of the global hubs (``hub_of``) and of the window hubs (``win_of``,
    ``first``) at once: down on one core, up on another (the four arrays come zeroed)."""
    for task in prange(2):
        if task:
            _both_sweep(rev_ptr, rev_idx, order, hub_of, win_of, level, first, up, win_up,
                        True)
        else:
            _both_sweep(fwd_ptr, fwd_idx, order, hub_of, win_of, level, first, down,
                        win_down, False)


@njit(**_PAR)
def hub_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level, first, down, up):
    """Reachability to and from hub vertices, as bit sets (one bit per hub).

    ``down[v]``: the hubs v reaches (v included), bottom-up over every DAG child;
    ``up[v]``: the hubs that reach v, top-down over every DAG parent (one core each). They are
    exact, so ``down[u] & up[t] != 0`` proves u reaches t (through a hub), while a hub t
    reaches that u does not (``down[t] & ~down[u]``), or one that reaches u but not t
    (``up[u] & ~up[t]``), proves it does not.

    ``first`` empty: ``hub_of[v]`` is v's bit, the same for every vertex. Else the hubs are
    numbered by level (``first[L]``: hubs above level L) and each vertex keeps a window of
    64 * ``words`` of them (:func:`window_base`): its down window starts at the first hub of
    its own level, its up window ends at the last one. The windows are exact too: a hub in
    v's down window that v reaches through a child c lies at c's level or below, so in c's
    window (c's starts at or after v's, and ends after v's ends); the same upwards.
    ``down`` and ``up`` (C x words) come zeroed.
    """
    for task in prange(2):
        ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
        bits = up if task else down
        if first.shape[0] == 0:
            _hub_sweep(ptr, idx, order, hub_of, bits, task == 1)
        else:
            _window_sweep(ptr, idx, order, hub_of, level, first, bits, task == 1)
