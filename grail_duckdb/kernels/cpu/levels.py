"""The CPU's topological levels, besides Kahn's sweep (:mod:`.labels`): a DAG whose ids are
in a topological order already gets its levels in one pass over the ids, and every order of
the levels is rewritten with each level's vertices in id order, the order the later sweeps
walk. Neither has a CUDA twin: the GPU's levels come from its own sweep, and nothing computed
from a level's order depends on it.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from .cores import cores, on_cores, task_range

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(**_JIT)
def _count_levels(task, tasks, level, count):
    """``count[task + 1, L]``: the vertices of level L among task ``task``'s share of the
    ids (counted in a row of the task's own: the rows of two tasks share cache lines)."""
    lo, hi = task_range(level.shape[0], task, tasks)
    row = np.zeros(count.shape[1], np.int64)
    for v in range(lo, hi):
        row[level[v]] += 1
    count[task + 1] = row


@njit(**_JIT)
def _place_by_level(task, tasks, level, start, order):
    """Task ``task``'s share of the ids, each at its level's next place (``start[task]``,
    the places of its first vertex of each level, advanced in a copy of the task's own)."""
    lo, hi = task_range(level.shape[0], task, tasks)
    at = start[task].copy()
    for v in range(lo, hi):
        lv = level[v]
        order[at[lv]] = v
        at[lv] += 1


def order_by_level(level, levels, order, offsets=None):
    """``order`` rewritten as the vertices by level, each level's in id order (a counting
    sort, its shares of the ids on every core): the order every later sweep walks, so that
    within a level they read and write their rows in address order, which the hardware
    prefetches, instead of in the order Kahn's sweep met them. Returns the levels' offsets
    (``offsets``: those already known, else counted here)."""
    n = level.shape[0]
    tasks = max(1, min(cores(), n // (4 * levels + 1)))  # each task's counts cost one row
    count = np.zeros((tasks + 1, levels), np.int64)
    if offsets is None or tasks > 1:
        on_cores(_count_levels, tasks, level, count)
    if offsets is None:
        offsets = np.zeros(levels + 1, np.int64)
        np.cumsum(count[1:].sum(axis=0), out=offsets[1:])
    count[0] = offsets[:-1]
    np.cumsum(count, axis=0, out=count)
    on_cores(_place_by_level, tasks, level, count[:tasks], order)
    return offsets


@njit(**_JIT)
def id_direction(ptr, idx):
    """-1 when every edge (of sorted rows without self-loops) goes to a smaller id, +1 when
    every one goes to a larger id, else 0 (then at the first row that shows it): the id
    order, or its reverse, is then a topological order (no cycle)."""
    down = True
    up = True
    for v in range(ptr.shape[0] - 1):
        lo, hi = ptr[v], ptr[v + 1]
        if lo < hi:
            if idx[hi - 1] > v:
                down = False
            if idx[lo] < v:
                up = False
            if not (down or up):
                return 0
    return -1 if down else 1


@njit(**_JIT)
def levels_in_id_order(rev_ptr, rev_idx, level, down):
    """The levels of a DAG whose edges all go to smaller ids (``down``) or all to larger
    ones: in that order of the ids every parent comes before its children, so one pass
    sets each level from its parents' (no queue, no counts of parents). Returns the number
    of levels."""
    n = level.shape[0]
    top = -1
    for k in range(n):
        v = n - 1 - k if down else k
        lv = 0
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            x = level[rev_idx[e]] + 1
            if x > lv:
                lv = x
        level[v] = lv
        if lv > top:
            top = lv
    return top + 1
