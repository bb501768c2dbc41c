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
#: the sibling sums prefetch the block they visit this many blocks later
BLOCKS_AHEAD = 4
#: vertices per piece of a level that a core takes at a time
LEVEL_PIECE = 1024
#: int32 entries per 64-byte cache line
LINE_INTS = 16
#: no entries: what a sweep prefetches beside the rows when it reads nothing else
_NONE = np.empty(0, np.int32)


@njit(**_JIT)
def topological_levels(fwd_ptr, fwd_idx, rev_ptr, pending, level, order, offsets, fetch):
    """Kahn's sweep: level[v] = length of the longest path from a root to v; ``order`` lists
    the vertices by non-decreasing level, level L at ``order[offsets[L]:offsets[L + 1]]``
    (``offsets``: n + 2 entries of room). Returns (levels, n_visited): fewer than n visited
    when the graph has a cycle (then the levels are not all set). ``fetch``: prefetch the
    rows ahead (:func:`_prefetch_rows`).

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
def _sibling_sums(parent, size, j, seed, children, root_sum, out, acc):
    """Label j's sizes of earlier siblings, ``out[v]`` for every v, in label j's order (the
    blocks in the order ``permuted_block``, ids xored inside a block): each parent's running
    sum of its children's sizes (roots are the children of a virtual root).

    The roots' running sum needs the blocks in that order only through their totals
    (``root_sum[b]``): each block's start comes from a pass over those, then the blocks
    are visited in id order, a stream the cache can follow. Only the blocks that hold
    children of real parents (``children[b]``, a bit per id) are visited in label j's order,
    where each parent's sum is ``acc[p]``; those BLOCKS_AHEAD further on are prefetched."""
    n = parent.shape[0]
    n_blocks = root_sum.shape[0]
    blocks, xor = _block_order(n_blocks, j, seed)
    start = np.empty(n_blocks, np.int64)
    running = 0
    for b in range(n_blocks):
        blk = blocks[b] // ORDER_BLOCK
        start[blk] = running
        running += root_sum[blk]
    for blk in range(n_blocks):
        base = blk * ORDER_BLOCK
        roots = ~children[blk]
        running = start[blk]
        for o in range(ORDER_BLOCK):
            q = o ^ xor
            if (roots >> np.uint64(q)) & np.uint64(1) and base + q < n:
                out[base + q] = running
                running += size[base + q]
    acc[:] = 0
    for b in range(n_blocks):
        ahead = blocks[b + BLOCKS_AHEAD]
        if children[ahead // ORDER_BLOCK]:
            for q in range(0, ORDER_BLOCK, LINE_INTS):
                prefetch(parent, ahead + q)
                prefetch(size, ahead + q)
                prefetch(out, ahead + q)
        base = blocks[b]
        kids = children[base // ORDER_BLOCK]
        if kids == 0:
            continue
        for o in range(ORDER_BLOCK):
            q = o ^ xor
            if (kids >> np.uint64(q)) & np.uint64(1):
                v = base + q
                p = parent[v]
                out[v] = acc[p]
                acc[p] += size[v]


@njit(**_JIT)
def _blocks_of_children(parent, size, children, root_sum):
    """Per block of ORDER_BLOCK ids: a bit for each child of a real parent, and the sizes
    of its roots summed (what every label's sibling sums start from)."""
    n = parent.shape[0]
    for blk in range(root_sum.shape[0]):
        kids = np.uint64(0)
        total = 0
        for q in range(min(ORDER_BLOCK, n - blk * ORDER_BLOCK)):
            v = blk * ORDER_BLOCK + q
            if parent[v] >= 0:
                kids |= np.uint64(1) << np.uint64(q)
            else:
                total += size[v]
        children[blk] = kids
        root_sum[blk] = total


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
def _starts_range(parent, order, size, post, lo, hi):
    """``post[v] += size[v]`` plus, below a root, the parent's start (``post[p] - size[p]``),
    for every label at once, for the vertices at ``order[lo:hi]`` (each parent's row is
    final before)."""
    n, d = post.shape
    for i in range(lo, hi):
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


@njit(inline="always", **_JIT)
def _piece(lo, hi, c):
    """``[a, b)``: piece c of the level ``order[lo:hi]`` (LEVEL_PIECE vertices)."""
    a = np.int64(lo) + np.int64(c) * LEVEL_PIECE
    return a, min(np.int64(hi), a + LEVEL_PIECE)


@njit(inline="always", **_JIT)
def _pieces(lo, hi):
    """How many pieces the level ``order[lo:hi]`` has."""
    return (hi - lo + LEVEL_PIECE - 1) // LEVEL_PIECE


@njit(**_PAR)
def _starts_down(parent, order, offsets, size, post, levelwise):
    """:func:`_starts_range` over the whole order: level by level on every core
    (``levelwise``), else in one sweep."""
    n = order.shape[0]
    if not levelwise:
        _starts_range(parent, order, size, post, 0, n)
        return
    for level in range(offsets.shape[0] - 1):
        lo, hi = offsets[level], offsets[level + 1]
        for c in prange(_pieces(lo, hi)):
            a, b = _piece(lo, hi, c)
            _starts_range(parent, order, size, post, a, b)


@njit(**_PAR)
def _all_sibling_sums(parent, size, seed, sums, acc):
    """Every label's sibling sums (``sums[j]``), a label per core at a time, each core with
    its own running sums (``acc[thread]``)."""
    n_blocks = (parent.shape[0] + ORDER_BLOCK - 1) // ORDER_BLOCK
    children = np.empty(n_blocks, np.uint64)
    root_sum = np.empty(n_blocks, np.int64)
    _blocks_of_children(parent, size, children, root_sum)
    for j in prange(sums.shape[0]):
        _sibling_sums(parent, size, j, seed, children, root_sum, sums[j],
                      acc[get_thread_id()])


def post_orders(parent, order, offsets, size, seed, sums, acc, post, levelwise):
    """Step 3 (Algorithm 5): post-order ranks (1-based) of the tree for d sibling orders,
    into ``post[C, d]`` (``sums``: d x C of room, None for one label; ``acc``: threads x C
    of room; ``levelwise``: the last sweep level by level on every core).

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
    _starts_down(parent, order, offsets, size, post, levelwise)


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
def _bound(fwd_ptr, fwd_idx, order, out, upper, fetch):
    """Each row of ``out`` (the post ranks) the min (``upper`` False) or max over its DAG
    children's rows, bottom-up (``fetch``: prefetching the rows ahead)."""
    n, d = out.shape
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


@njit(**_JIT)
def _bounds_range(fwd_ptr, fwd_idx, order, inner, outer, lo, hi, fetch):
    """Both bounds of the vertices at ``order[lo:hi]`` (their children's rows are final)."""
    n, d = inner.shape
    for i in range(hi - 1, lo - 1, -1):
        if fetch:
            _prefetch_rows(i, -1, n, order, fwd_ptr, fwd_idx, inner, d, _NONE)
        v = order[i]
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            for j in range(d):
                inner[v, j] = min(inner[v, j], inner[w, j])
                outer[v, j] = max(outer[v, j], outer[w, j])


@njit(**_PAR)
def interval_bounds(fwd_ptr, fwd_idx, order, offsets, inner, outer, levelwise, fetch):
    """Step 4 (Algorithm 6): per label, the smallest and the largest post rank over v and
    every DAG descendant of v: the interval [inner, outer] (``inner`` comes as the post
    ranks, ``outer`` as room for a copy of them). ``levelwise``: both bounds level by level
    from the deepest, each level on every core; else a core for each bound. ``fetch``:
    prefetch the rows ahead.

    The bounds run over all DAG children, not only tree children. The paper's tree is a DFS
    tree, where the largest is always v's own rank; ours comes from breadth-first levels, so a
    non-tree edge may lead to a larger rank and the outer bound is propagated too. Either way
    u reaches w only if [inner(w), outer(w)] lies inside [inner(u), outer(u)].
    """
    n = inner.shape[0]
    for b in prange((n + ORDER_BLOCK - 1) // ORDER_BLOCK):
        lo, hi = b * ORDER_BLOCK, min(n, (b + 1) * ORDER_BLOCK)
        outer[lo:hi] = inner[lo:hi]
    if not levelwise:
        for task in prange(2):
            _bound(fwd_ptr, fwd_idx, order, outer if task else inner, task == 1, fetch)
        return
    for level in range(offsets.shape[0] - 2, -1, -1):
        lo, hi = offsets[level], offsets[level + 1]
        for c in prange(_pieces(lo, hi)):
            a, b = _piece(lo, hi, c)
            _bounds_range(fwd_ptr, fwd_idx, order, inner, outer, a, b, fetch)


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
def _hub_sweep(ptr, idx, order, hub_of, bits, up, fetch):
    """One side of :func:`hub_bits` for the global hubs (one window for all): each vertex's
    own bit, then the rows of its neighbours ORed in; down (``up`` False) bottom-up over the
    children, up top-down over the parents."""
    n = hub_of.shape[0]
    words = bits.shape[1]
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
def _window_sweep(ptr, idx, order, hub_of, level, first, bits, up, fetch):
    """One side of :func:`hub_bits` for the window hubs: each vertex's own bit in its window,
    then the rows of its neighbours, each rebased into the vertex's window."""
    n = hub_of.shape[0]
    span = 64 * bits.shape[1]
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


@njit(inline="always", **_JIT)
def _bit_pair(h):
    """The 128-bit row with bit h alone (none when h is outside 0..127): ``(lo, hi)``."""
    one, zero = np.uint64(1), np.uint64(0)
    lo = one << np.uint64(h & 63) if 0 <= h < 64 else zero
    hi = one << np.uint64(h & 63) if 64 <= h < 128 else zero
    return lo, hi


@njit(inline="always", **_JIT)
def _rebased_pair(lo, hi, sh):
    """``_shifted_pair`` without branches, for rows whose shifts vary from edge to edge (a
    mispredicted branch costs more than the few shifts computed for nothing)."""
    s = sh if sh >= 0 else -sh
    r = np.uint64(s & 63)
    wide = s >= 64
    if sh >= 0:
        out_lo = np.uint64(0) if wide else lo << r
        out_hi = lo << r if wide else (hi << r) | ((lo >> np.uint64(1)) >> (np.uint64(63) - r))
    else:
        out_lo = hi >> r if wide else (lo >> r) | ((hi << np.uint64(1)) << (np.uint64(63) - r))
        out_hi = np.uint64(0) if wide else hi >> r
    return out_lo, out_hi


@njit(**_JIT)
def _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec, base_of, bits, wbits,
                up, lo, hi):
    """One side of :func:`hub_and_window_bits` for rows of two words each: each vertex's
    hub row and window row made in registers from its own bits and its neighbours', then
    stored; ``base_of[v]``: the hub at bit 0 of v's window. With ``rec`` (C x 4) the two rows
    are also stored side by side, and read from there: one cache line per neighbour, worth
    its room on graphs of several edges per vertex (which prefetch them too); without
    (0 x 4), neighbours are read from the outputs. The vertices at ``order[lo:hi]``, in
    the sweep's direction."""
    n = hub_of.shape[0]
    records = rec.shape[0] > 0
    rows = rec if records else bits
    for k in range(hi - lo):
        i = lo + k if up else hi - 1 - k
        if records:
            _prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, rec, 4, base_of)
        v = order[i]
        a0, a1 = _bit_pair(hub_of[v])
        base = window_base(v, level, first, 128, up)
        base_of[v] = base
        w0, w1 = _bit_pair(win_of[v] - base if win_of[v] >= 0 else -1)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            a0 |= rows[w, 0]
            a1 |= rows[w, 1]
            sh = base_of[w] - base
            if -128 < sh < 128:
                if records:
                    x0, x1 = _rebased_pair(rec[w, 2], rec[w, 3], sh)
                else:
                    x0, x1 = _rebased_pair(wbits[w, 0], wbits[w, 1], sh)
                w0 |= x0
                w1 |= x1
        if records:
            rec[v, 0], rec[v, 1], rec[v, 2], rec[v, 3] = a0, a1, w0, w1
        bits[v, 0], bits[v, 1], wbits[v, 0], wbits[v, 1] = a0, a1, w0, w1


@njit(**_PAR)
def hub_and_window_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of, win_of,
                        level, first, down, up, win_down, win_up, rec, base_of, levelwise,
                        fetch):
    """:func:`hub_bits` of the global hubs (``hub_of``) and of the window hubs (``win_of``,
    ``first``) at once. Rows of two words: one walk a side (``rec``: 2 x C x 4, or 2 x 0 x 4
    for none, and ``base_of``: 2 x C of room; the outputs need not be zeroed), level by
    level on every core (``levelwise``), else down on one core and up on another; other
    widths: a walk for each set, down and up on a core each (the outputs come zeroed).
    ``fetch``: the other widths' walks prefetch the rows ahead."""
    n = hub_of.shape[0]
    two = down.shape[1] == 2 and win_down.shape[1] == 2
    if two and levelwise:
        levels = offsets.shape[0] - 1
        for step in range(2 * levels):
            task = 1 if step >= levels else 0  # down from the deepest level, then up
            at = step - levels if task else levels - 1 - step
            lo, hi = offsets[at], offsets[at + 1]
            ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
            bits, wbits = (up, win_up) if task else (down, win_down)
            for c in prange(_pieces(lo, hi)):
                a, b = _piece(lo, hi, c)
                _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec[task],
                            base_of[task], bits, wbits, task == 1, a, b)
        return
    for task in prange(2):
        ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
        bits, wbits = (up, win_up) if task else (down, win_down)
        if two:
            _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec[task],
                        base_of[task], bits, wbits, task == 1, 0, n)
        else:
            _hub_sweep(ptr, idx, order, hub_of, bits, task == 1, fetch)
            _window_sweep(ptr, idx, order, win_of, level, first, wbits, task == 1, fetch)


@njit(**_PAR)
def hub_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level, first, down, up,
             fetch):
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
    ``down`` and ``up`` (C x words) come zeroed; ``fetch``: prefetch the rows ahead.
    """
    for task in prange(2):
        ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
        bits = up if task else down
        if first.shape[0] == 0:
            _hub_sweep(ptr, idx, order, hub_of, bits, task == 1, fetch)
        else:
            _window_sweep(ptr, idx, order, hub_of, level, first, bits, task == 1, fetch)
