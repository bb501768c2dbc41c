"""CPU twin of step 4 of ``kernels/labels.cu`` (GRAIL GPU paper, Algorithm 6): the interval
bounds, each vertex's smallest and largest post rank over itself and its DAG descendants, as
sweeps from the deepest vertices up (what the sweeps share is in :mod:`.sweeps`).

On one core a bound a core, each walking ``TopoOrder.walk`` (the ids where they are a
topological order); on more, both bounds level by level, each level shared by the cores.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from .cores import on_cores
from .intrinsics import atomic_add
from .sweeps import (LONG_ROW, NONE, PIECES_PER_CORE, claim, piece, pieces, prefetch_along,
                     prefetch_rows, wait_level)

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(inline="always", **_JIT)
def _row3(fwd_idx, start, end, flat, v, upper):
    """:func:`_bound` of v's row of three labels (the CPU's default), held in registers
    while its children's rows are read (``flat``: the rows one after another)."""
    a0, a1, a2 = flat[3 * v], flat[3 * v + 1], flat[3 * v + 2]
    e = start
    if upper:
        while e < end:
            w = 3 * fwd_idx[e]
            a0, a1, a2 = max(a0, flat[w]), max(a1, flat[w + 1]), max(a2, flat[w + 2])
            e += 1
    else:
        while e < end:
            w = 3 * fwd_idx[e]
            a0, a1, a2 = min(a0, flat[w]), min(a1, flat[w + 1]), min(a2, flat[w + 2])
            e += 1
    flat[3 * v] = a0
    flat[3 * v + 1] = a1
    flat[3 * v + 2] = a2


@njit(inline="always", **_JIT)
def _bound3(fwd_ptr, fwd_idx, order, out, upper, fetch):
    """:func:`_bound` of rows of three labels; inlined with ``fetch`` a constant, so that
    a sweep that does not prefetch has no trace of it in its loop (measured twice as
    fast)."""
    n = out.shape[0]
    flat = out.reshape(-1)
    for i in range(n - 1, -1, -1):
        if fetch:
            prefetch_rows(i, -1, n, order, fwd_ptr, fwd_idx, out, 3, NONE)
        v = order[i]
        start, end = fwd_ptr[v], fwd_ptr[v + 1]
        if start < end:
            _row3(fwd_idx, start, end, flat, v, upper)


@njit(**_JIT)
def _bound(fwd_ptr, fwd_idx, order, out, upper, fetch):
    """Each row of ``out`` (the post ranks) the min (``upper`` False) or max over its DAG
    children's rows, bottom-up (``fetch``: prefetching the rows ahead)."""
    n, d = out.shape
    if d == 3:
        if fetch:
            _bound3(fwd_ptr, fwd_idx, order, out, upper, True)
        else:
            _bound3(fwd_ptr, fwd_idx, order, out, upper, False)
        return
    for i in range(n - 1, -1, -1):
        if fetch:
            prefetch_rows(i, -1, n, order, fwd_ptr, fwd_idx, out, d, NONE)
        v = order[i]
        end = fwd_ptr[v + 1]
        long = end - fwd_ptr[v] > LONG_ROW
        for e in range(fwd_ptr[v], end):
            prefetch_along(e, end, long, fwd_idx, out, d, NONE)
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
            prefetch_rows(i, -1, n, order, fwd_ptr, fwd_idx, inner, d, NONE)
        v = order[i]
        end = fwd_ptr[v + 1]
        long = end - fwd_ptr[v] > LONG_ROW
        for e in range(fwd_ptr[v], end):
            prefetch_along(e, end, long, fwd_idx, inner, d, NONE)
            prefetch_along(e, end, long, fwd_idx, outer, d, NONE)
            w = fwd_idx[e]
            for j in range(d):
                inner[v, j] = min(inner[v, j], inner[w, j])
                outer[v, j] = max(outer[v, j], outer[w, j])


def interval_bounds(fwd_ptr, fwd_idx, order, offsets, inner, outer, parts, fetch):
    """Step 4 (Algorithm 6): per label, the smallest and the largest post rank over v and
    every DAG descendant of v: the interval [inner, outer] (``inner`` comes as the post
    ranks, ``outer`` as room for a copy of them). ``parts`` > 0: both bounds level by level
    from the deepest, each level in up to that many pieces that the cores take in turn
    (:func:`_starts_down`); 0: a core for each bound. ``fetch``: prefetch the rows ahead.

    The bounds run over all DAG children, not only tree children. The paper's tree is a DFS
    tree, where the largest is always v's own rank; ours comes from breadth-first levels, so a
    non-tree edge may lead to a larger rank and the outer bound is propagated too. Either way
    u reaches w only if [inner(w), outer(w)] lies inside [inner(u), outer(u)].
    """
    np.copyto(outer, inner)
    if parts == 0:
        on_cores(_bound_side, 2, fwd_ptr, fwd_idx, order, inner, outer, fetch)
        return
    levels = offsets.shape[0] - 1
    on_cores(_bounds_levels, parts // PIECES_PER_CORE, fwd_ptr, fwd_idx, order, offsets, inner,
             outer, parts, fetch, np.zeros(levels, np.int64), np.zeros(levels, np.int64))


@njit(**_JIT)
def _bound_side(task, tasks, fwd_ptr, fwd_idx, order, inner, outer, fetch):
    """Task 0: the lower bounds (:func:`_bound` of ``inner``); task 1: the upper ones."""
    _bound(fwd_ptr, fwd_idx, order, outer if task else inner, task == 1, fetch)


@njit(**_JIT)
def _bounds_levels(task, tasks, fwd_ptr, fwd_idx, order, offsets, inner, outer, parts, fetch,
                   taken, done):
    """:func:`interval_bounds` level by level from the deepest, one of ``tasks`` side by
    side."""
    levels = offsets.shape[0] - 1
    for step in range(levels):
        level = levels - 1 - step
        lo, hi = offsets[level], offsets[level + 1]
        k = pieces(lo, hi, parts)
        c = claim(taken, step, k)
        while c >= 0:
            a, b = piece(lo, hi, c, k)
            _bounds_range(fwd_ptr, fwd_idx, order, inner, outer, a, b, fetch)
            atomic_add(done, step, 1)
            c = claim(taken, step, k)
        wait_level(done, step, k)


