"""What the build's sweeps over a DAG share (:mod:`.labels`, :mod:`.hubs`): the prefetches
ahead of a sweep, and the pieces of a level that the cores take in turn.

A sweep visits the vertices in a topological order (``order``, level by level), reading each
vertex's neighbours' rows. Two ways to use several cores: independent sweeps side by side, a
core each; or one sweep level by level, each level cut into pieces that the cores take from a
counter, a core waiting at the end of a level until the pieces others hold are done (one
parallel region for the whole sweep: :func:`claim`, :func:`wait_level`).
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from .intrinsics import atomic_add, atomic_load, prefetch, spin_pause

_JIT = dict(cache=True, nogil=True, boundscheck=False)
#: a sweep prefetches what it reads this many vertices ahead (and twice, thrice as far, the
#: arrays it reads to find those)
AHEAD = 8
#: rows longer than this prefetch their own neighbours AHEAD edges on (a vertex of a million
#: parents reads a million rows one after the other)
LONG_ROW = 4 * AHEAD
#: vertices at least in a piece of a level that a core takes at a time
LEVEL_PIECE = 64
#: pieces of a level per core at most (a core that finds its piece cheap takes another)
PIECES_PER_CORE = 4
#: no entries: what a sweep prefetches beside the rows when it reads nothing else
NONE = np.empty(0, np.int32)


@njit(inline="always", **_JIT)
def prefetch_along(e, end, long, idx, rows, width, extra):
    """In a row of more than LONG_ROW edges (``long``), at edge e: prefetch the row (of
    ``rows``, ``width`` entries) and the ``extra`` entry of the neighbour AHEAD edges on."""
    if long and e + AHEAD < end:
        w = idx[e + AHEAD]
        prefetch(rows, w * width)
        if extra.shape[0]:
            prefetch(extra, w)


@njit(inline="always", **_JIT)
def prefetch_rows(i, step, n, order, ptr, idx, rows, width, extra):
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


@njit(inline="always", **_JIT)
def piece(lo, hi, c, pieces):
    """``[a, b)``: piece c of the ``pieces`` of the level ``order[lo:hi]``."""
    width = np.int64(hi) - np.int64(lo)
    return lo + width * np.int64(c) // pieces, lo + width * (np.int64(c) + 1) // pieces


@njit(inline="always", **_JIT)
def pieces(lo, hi, parts):
    """How many pieces the level ``order[lo:hi]`` is cut into: ``parts``, or fewer so that
    each holds LEVEL_PIECE vertices at least."""
    return max(1, min(np.int64(parts), (np.int64(hi) - np.int64(lo)) // LEVEL_PIECE))


@njit(inline="always", **_JIT)
def claim(taken, step, pieces):
    """The next piece of sweep step ``step`` for this core, or -1 when all are taken."""
    c = atomic_add(taken, step, 1)
    return c if c < pieces else -1


@njit(inline="always", **_JIT)
def wait_level(done, step, pieces):
    """Wait until every piece of sweep step ``step`` is done (they are all taken already:
    each by a core at work on it, so the wait ends)."""
    while atomic_load(done, step) < pieces:
        spin_pause()
