"""CPU twins of ``kernels/labels.cu``: the four breadth-first passes of the GRAIL labels (GRAIL
GPU paper, Section 4, Algorithms 2-6), as sweeps in topological order (the intervals are in
:mod:`.bounds`, the hub sets in :mod:`.hubs`, what the sweeps share in :mod:`.sweeps`).

Every array of a vertex or an edge is made by the caller (:class:`~.CpuKernels`) with NumPy and
passed in to be filled: NumPy asks the kernel for huge pages, so the first touch of a large
array costs a fraction of what Numba's own allocations cost. Independent sweeps run on a core
each (the intervals' lower and upper bounds, the hubs down and up, the labels' sibling sums),
the sweeps over graphs of several edges per vertex prefetch the rows they will read, and on
more than two cores the sweeps over wide levels share each level among the cores.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from ..shared import ORDER_BLOCK, order_params, permute_step
from .cores import cores, on_cores, task_range
from .intrinsics import atomic_add, atomic_load, prefetch, spin_pause, trailing_zeros
from .sweeps import (AHEAD, LONG_ROW, NONE, PIECES_PER_CORE, claim, piece, pieces,
                     prefetch_along, prefetch_rows, wait_level)

_JIT = dict(cache=True, nogil=True, boundscheck=False)
#: the sibling sums prefetch the block they visit this many blocks later
BLOCKS_AHEAD = 4
#: Kahn's sweep shares this many levels among the cores at most (the counters of a level
#: cost 24 bytes; a chain of more levels goes on on one core)
MAX_SHARED_LEVELS = 1 << 20
#: int32 entries per 64-byte cache line
LINE_INTS = 16


@njit(**_JIT)
def _count_parents(task, tasks, rev_ptr, pending, count):
    """Every vertex's count of parents in ``pending``; each chunk's count of roots in
    ``count[chunk + 1]`` (a task takes every ``tasks``-th chunk)."""
    n, chunks = pending.shape[0], count.shape[0] - 1
    for c in range(task, chunks, tasks):
        lo, hi = task_range(n, c, chunks)
        roots = 0  # counted here: the chunks' counts share a cache line
        for v in range(lo, hi):
            pending[v] = rev_ptr[v + 1] - rev_ptr[v]
            if pending[v] == 0:
                roots += 1
        count[c + 1] = roots


@njit(**_JIT)
def _queue_roots(task, tasks, pending, level, order, count):
    """Each chunk's roots at level 0, in id order, from ``order[count[chunk]]`` on."""
    n, chunks = pending.shape[0], count.shape[0] - 1
    for c in range(task, chunks, tasks):
        at = count[c]
        lo, hi = task_range(n, c, chunks)
        for v in range(lo, hi):
            if pending[v] == 0:
                level[v] = 0
                order[at] = v
                at += 1


def _roots(rev_ptr, pending, level, order, chunks):
    """Every vertex's count of parents in ``pending``; the roots (none) at level 0, in id
    order, at the head of ``order``; returns how many there are."""
    count = np.zeros(chunks + 1, np.int64)
    tasks = min(cores(), chunks)
    on_cores(_count_parents, tasks, rev_ptr, pending, count)
    np.cumsum(count, out=count)
    on_cores(_queue_roots, tasks, pending, level, order, count)
    return int(count[chunks])


@njit(**_JIT)
def _kahn(fwd_ptr, fwd_idx, pending, level, order, offsets, head, tail, levels, fetch):
    """Kahn's sweep on one core from a queue ``order[head:tail]`` (levels 0 .. ``levels`` - 1
    begun, their ``offsets`` set): returns (levels, vertices visited). The queue holds the
    vertices in order of level, so a vertex is queued by its deepest parent, the last of
    them: its level is that parent's plus one, set once."""
    while head < tail:
        if fetch:
            prefetch_rows(head, 1, tail, order, fwd_ptr, fwd_idx, pending, 1, level)
        v = order[head]
        head += 1
        lv = level[v] + 1
        end = fwd_ptr[v + 1]
        long = end - fwd_ptr[v] > LONG_ROW
        for e in range(fwd_ptr[v], end):
            prefetch_along(e, end, long, fwd_idx, pending, 1, NONE)
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


@njit(**_JIT)
def _kahn_levels(task, tasks, fwd_ptr, fwd_idx, pending, level, order, offsets, tail, parts,
                 narrow, taken, done, ready):
    """Kahn's sweep level by level, one of ``tasks`` side by side: the tasks take the
    pieces of a level in turn, each parent's release of a child an atomic decrement, each
    child queued at an atomic tail; the task that finishes a level's last piece records
    where the next one ends and lets the others go on. Stops after ``ready.shape[0] - 1``
    levels at most, or at the first level of ``narrow`` vertices or fewer (the sweep goes
    on on one core)."""
    cap = ready.shape[0]
    lv = 0
    while lv + 1 < cap:
        lo, hi = offsets[lv], offsets[lv + 1]
        if hi - lo <= narrow:
            break
        k = pieces(lo, hi, parts)
        c = claim(taken, lv, k)
        while c >= 0:
            a, b = piece(lo, hi, c, k)
            for i in range(a, b):
                v = order[i]
                for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
                    w = fwd_idx[e]
                    if atomic_add(pending, w, -1) == 1:
                        level[w] = lv + 1
                        order[atomic_add(tail, 0, 1)] = w
            if atomic_add(done, lv, 1) == k - 1:
                offsets[lv + 2] = atomic_load(tail, 0)
                atomic_add(ready, lv, 1)
            c = claim(taken, lv, k)
        while atomic_load(ready, lv) == 0:
            spin_pause()
        lv += 1


def topological_levels(fwd_ptr, fwd_idx, rev_ptr, pending, level, order, offsets, fetch,
                       parts, chunks, narrow=0):
    """Kahn's sweep: level[v] = length of the longest path from a root to v; ``order`` lists
    the vertices by non-decreasing level, level L at ``order[offsets[L]:offsets[L + 1]]``
    (``offsets``: n + 2 entries of room). Returns (levels, n_visited): fewer than n visited
    when the graph has a cycle (then the levels are not all set). ``parts`` > 0: the levels
    on every core, each level in up to that many pieces (the order inside a level then
    depends on the timing; nothing computed from it does); ``fetch``: on one core, prefetch
    the rows ahead; ``chunks``: pieces of the count of parents; ``narrow``: from the first
    level of that many vertices or fewer on, the sweep goes on on one core (where a wait at
    the end of each level would cost more than the level's work)."""
    tail = _roots(rev_ptr, pending, level, order, chunks)
    offsets[0], offsets[1] = 0, tail
    if tail == 0:
        return 0, 0
    if parts == 0:
        return _kahn(fwd_ptr, fwd_idx, pending, level, order, offsets, 0, tail, 1, fetch)
    cap = min(offsets.shape[0] - 2, MAX_SHARED_LEVELS)
    ready = np.zeros(cap, np.int64)
    queue_tail = np.array([tail], np.int64)
    on_cores(_kahn_levels, parts // PIECES_PER_CORE, fwd_ptr, fwd_idx, pending, level, order,
             offsets, queue_tail, parts, np.int64(narrow), np.zeros(cap, np.int64),
             np.zeros(cap, np.int64), ready)
    last = int(np.argmin(ready)) if ready.min() == 0 else cap  # the first level not done
    if offsets[last] == offsets[last + 1]:  # the sweep ended: levels 0 .. last - 1
        return last, int(offsets[last])
    return _kahn(fwd_ptr, fwd_idx, pending, level, order, offsets, int(offsets[last]),
                 int(offsets[last + 1]), last + 1, fetch)


def tree_parents(rev_ptr, rev_idx, level, parent):
    """Step 1 (DAG -> directed tree): each vertex keeps, as its tree parent, the smallest-id
    in-neighbour one level above it; roots get -1. Deterministic on every backend. The rows
    are sorted, so the first such in-neighbour is the one (a row stops there)."""
    on_cores(_tree_parents, cores(), rev_ptr, rev_idx, level, parent)


@njit(**_JIT)
def _tree_parents(task, tasks, rev_ptr, rev_idx, level, parent):
    """:func:`tree_parents` of task ``task``'s share of the vertices."""
    lo, hi = task_range(level.shape[0], task, tasks)
    for v in range(lo, hi):
        want = level[v] - 1
        best = -1
        end = rev_ptr[v + 1]
        long = end - rev_ptr[v] > LONG_ROW
        for e in range(rev_ptr[v], end):
            prefetch_along(e, end, long, rev_idx, level, 1, NONE)
            u = rev_idx[e]
            if level[u] == want:
                best = u
                break
        parent[v] = best


def tree_children(fwd_ptr, fwd_idx, level, child):
    """The mirror of step 1: each vertex keeps, as its link in the tree of chosen children,
    its out-neighbour of smallest level (ties: the smallest id); sinks get -1. The rows are
    sorted, so a row stops at its first out-neighbour one level down (no level is
    smaller)."""
    on_cores(_tree_children, cores(), fwd_ptr, fwd_idx, level, child)


@njit(**_JIT)
def _tree_children(task, tasks, fwd_ptr, fwd_idx, level, child):
    """:func:`tree_children` of task ``task``'s share of the vertices."""
    lo, hi = task_range(level.shape[0], task, tasks)
    for v in range(lo, hi):
        best = -1
        lb = 0
        least = level[v] + 1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            lw = level[w]
            if best < 0 or lw < lb:
                best = w
                lb = lw
                if lw == least:
                    break
        child[v] = best


@njit(**_JIT)
def _subtree_sizes(parent, order, size):
    """Step 2 (Algorithm 4) on one core: size[v] = number of tree descendants of v, v
    included (``size`` comes filled with ones)."""
    for i in range(parent.shape[0] - 1, -1, -1):
        v = order[i]
        p = parent[v]
        if p >= 0:
            size[p] += size[v]


def subtree_sizes(parent, order, offsets, size, parts):
    """Step 2 (Algorithm 4): size[v] = number of tree descendants of v, v included
    (``size`` comes filled with ones); ``parts`` > 0: level by level from the deepest on
    every core, each vertex adding its size to its parent's atomically (a level's sizes are
    final when it starts: every child lies deeper), else on one core."""
    if parts == 0:
        _subtree_sizes(parent, order, size)
        return
    levels = offsets.shape[0] - 1
    on_cores(_subtree_levels, parts // PIECES_PER_CORE, parent, order, offsets, size, parts,
             np.zeros(levels, np.int64), np.zeros(levels, np.int64))


@njit(**_JIT)
def _subtree_levels(task, tasks, parent, order, offsets, size, parts, taken, done):
    """:func:`subtree_sizes` level by level, one of ``tasks`` side by side."""
    levels = offsets.shape[0] - 1
    for step in range(levels):
        lo, hi = offsets[levels - 1 - step], offsets[levels - step]
        k = pieces(lo, hi, parts)
        c = claim(taken, step, k)
        while c >= 0:
            a, b = piece(lo, hi, c, k)
            for i in range(a, b):
                v = order[i]
                if parent[v] >= 0:
                    atomic_add(size, parent[v], size[v])
            atomic_add(done, step, 1)
            c = claim(taken, step, k)
        wait_level(done, step, k)


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
def _children_sums(parent, size, j, seed, children, post, acc):
    """Label j's sizes of earlier siblings, ``post[v, j]`` for every v of a real parent, in
    label j's order (the blocks in the order ``permuted_block``, ids xored inside a block):
    each parent's running sum of its children's sizes, ``acc[p]``. Only the blocks that
    hold such children (``children[b]``, a bit per id) are visited; those BLOCKS_AHEAD
    further on are prefetched. (The roots, children of a virtual root: :func:`_roots_sums`.)"""
    n, d = post.shape
    n_blocks = children.shape[0]
    blocks, xor = _block_order(n_blocks, j, seed)
    acc[:] = 0
    for b in range(n_blocks):
        ahead = blocks[b + BLOCKS_AHEAD]
        if children[ahead // ORDER_BLOCK]:
            for q in range(0, ORDER_BLOCK, LINE_INTS):
                prefetch(parent, ahead + q)
                prefetch(size, ahead + q)
            for q in range(0, ORDER_BLOCK * d, LINE_INTS):
                prefetch(post, ahead * d + q)
        base = blocks[b]
        kids = children[base // ORDER_BLOCK]
        if kids == ~np.uint64(0):
            for o in range(ORDER_BLOCK):
                _add_sibling(parent, size, post, j, acc, base + (o ^ xor))
            continue
        left = _xor_bits(kids, xor)
        while left:
            o = trailing_zeros(left)
            left &= left - np.uint64(1)
            _add_sibling(parent, size, post, j, acc, base + (o ^ xor))


@njit(**_JIT)
def _roots_sums(task, tasks, size, children, starts, xors, post):
    """Every label's running sums of the roots' sizes (the roots are the children of a
    virtual root), ``post[v, j]`` for every root v, their own size included (their post
    ranks, final here), task ``task``'s share of the blocks in id order: label j's sum
    starts each block at ``starts[j, block]`` and visits its roots in label j's order inside
    it (ids xored with ``xors[j]``). One pass writes every label's column of a row at once."""
    n, d = post.shape
    first, last = task_range(starts.shape[1], task, tasks)
    for blk in range(first, last):
        base = blk * ORDER_BLOCK
        roots = ~children[blk]
        if base + ORDER_BLOCK > n:  # the last block: no ids from n on
            roots &= (np.uint64(1) << np.uint64(n - base)) - np.uint64(1)
        if roots == 0:
            continue
        for j in range(d):
            xor = xors[j]
            running = starts[j, blk]
            if roots == ~np.uint64(0):  # a block of roots only
                for o in range(ORDER_BLOCK):
                    v = base + (o ^ xor)
                    running += size[v]
                    post[v, j] = running
                continue
            left = _xor_bits(roots, xor)  # the set bits in the order the block is visited
            while left:
                v = base + (trailing_zeros(left) ^ xor)
                left &= left - np.uint64(1)
                running += size[v]
                post[v, j] = running


@njit(**_JIT)
def _root_starts(root_sum, seed, starts, xors):
    """``starts[j, block]``: the sizes of the roots in the blocks before it in label j's
    block order (``root_sum``: each block's), and ``xors[j]``, label j's xor inside a block."""
    n_blocks = root_sum.shape[0]
    for j in range(starts.shape[0]):
        blocks, xor = _block_order(n_blocks, j, seed)
        xors[j] = xor
        running = 0
        for b in range(n_blocks):
            blk = blocks[b] // ORDER_BLOCK
            starts[j, blk] = running
            running += root_sum[blk]


@njit(inline="always", **_JIT)
def _add_sibling(parent, size, post, j, acc, v):
    """v's sum of earlier siblings in label j, and its size added to its parent's running
    sum."""
    p = parent[v]
    post[v, j] = acc[p]
    acc[p] += size[v]


#: the bit groups that :func:`_xor_bits` swaps, halves of 2, 4, ... 64 bits
_HALVES = (np.uint64(0x5555555555555555), np.uint64(0x3333333333333333),
           np.uint64(0x0F0F0F0F0F0F0F0F), np.uint64(0x00FF00FF00FF00FF),
           np.uint64(0x0000FFFF0000FFFF), np.uint64(0x00000000FFFFFFFF))


@njit(inline="always", **_JIT)
def _xor_bits(x, xor):
    """``x`` with its bit q moved to bit ``q ^ xor`` (a swap of halves per bit of ``xor``)."""
    width = np.uint64(1)
    for half in _HALVES:
        if xor & np.int64(width):
            x = ((x >> width) & half) | ((x & half) << width)
        width <<= np.uint64(1)
    return x


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


@njit(**_JIT)
def _starts_range(parent, order, size, post, lo, hi):
    """``post[v] += size[v]`` plus the parent's start (``post[p] - size[p]``), for every
    label at once, for the vertices at ``order[lo:hi]`` but the roots (whose rows are final;
    each parent's row is final before its children's)."""
    n, d = post.shape
    if d == 1:
        _starts_one(parent, order, size, post.reshape(-1), lo, hi)
        return
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


@njit(inline="always", **_JIT)
def _starts_one(parent, order, size, post, lo, hi):
    """:func:`_starts_range` of one label (``post`` flat): no loop over the labels and no
    prefetch (measured twice as fast as the general loop on the trees of chosen children,
    whose parents a level's vertices share)."""
    for i in range(lo, hi):
        v = order[i]
        p = parent[v]
        if p >= 0:
            post[v] += post[p] + size[v] - size[p]


def _starts_down(parent, order, offsets, size, post, parts):
    """:func:`_starts_range` over the order from level 1 on (level 0 holds only roots: a
    vertex of a deeper level has a tree parent one level up): level by level, each level in
    up to ``parts`` pieces that the cores take in turn (a core waits at the end of each
    level for the pieces others hold), else (``parts`` 0) in one sweep."""
    if offsets.shape[0] < 3:
        return
    if parts == 0:
        _starts_range(parent, order, size, post, offsets[1], order.shape[0])
        return
    levels = offsets.shape[0] - 1
    on_cores(_starts_levels, parts // PIECES_PER_CORE, parent, order, offsets, size, post,
             parts, np.zeros(levels, np.int64), np.zeros(levels, np.int64))


@njit(**_JIT)
def _starts_levels(task, tasks, parent, order, offsets, size, post, parts, taken, done):
    """:func:`_starts_down` level by level from level 1, one of ``tasks`` side by side."""
    levels = offsets.shape[0] - 1
    for level in range(1, levels):
        lo, hi = offsets[level], offsets[level + 1]
        k = pieces(lo, hi, parts)
        c = claim(taken, level, k)
        while c >= 0:
            a, b = piece(lo, hi, c, k)
            _starts_range(parent, order, size, post, a, b)
            atomic_add(done, level, 1)
            c = claim(taken, level, k)
        wait_level(done, level, k)


def _all_sibling_sums(parent, size, seed, post, acc):
    """Every label's sibling sums into its column of ``post``: the roots' in one pass over
    the blocks in id order, shared by the cores; the others', ``acc.shape[0]`` workers side
    by side, each taking every so many labels with its own running sums (``acc[worker]``;
    the workers write apart columns of rows, in blocks each visits in its own order)."""
    n, d = post.shape
    n_blocks = (n + ORDER_BLOCK - 1) // ORDER_BLOCK
    children = np.empty(n_blocks, np.uint64)
    root_sum = np.empty(n_blocks, np.int64)
    _blocks_of_children(parent, size, children, root_sum)
    starts = np.empty((d, n_blocks), np.int64)
    xors = np.empty(d, np.int64)
    _root_starts(root_sum, seed, starts, xors)
    on_cores(_roots_sums, min(cores(), n_blocks), size, children, starts, xors, post)
    if children.any():
        on_cores(_labels_sibling_sums, acc.shape[0], parent, size, seed, children, post, acc)


@njit(**_JIT)
def _labels_sibling_sums(task, tasks, parent, size, seed, children, post, acc):
    """The sibling sums of every ``tasks``-th label from ``task`` on, with ``acc[task]``."""
    for j in range(task, post.shape[1], tasks):
        _children_sums(parent, size, j, seed, children, post, acc[task])


def post_orders(parent, order, offsets, size, seed, acc, post, parts):
    """Step 3 (Algorithm 5): post-order ranks (1-based) of the tree for d sibling orders,
    into ``post[C, d]`` (``acc``: workers x C of room; ``parts``: the last sweep level by
    level, each level in up to that many pieces on every core, or 0: in one sweep).

    In label j, siblings (children of one tree parent; roots are the children of a virtual
    root) are ordered as they appear in label j's pseudo-random vertex order: blocks of
    ORDER_BLOCK consecutive ids in the order ``permuted_block``, and inside a block ids xored
    with a per-label constant. A vertex's post rank is the number of vertices finished before
    its subtree starts (the sizes of earlier siblings along its root path) plus its own size:
    each label's sibling sums in its column, then one sweep down the order adds the parent's
    start to all d labels of a vertex at once.
    """
    _all_sibling_sums(parent, size, seed, post, acc)
    _starts_down(parent, order, offsets, size, post, parts)
