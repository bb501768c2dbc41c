"""CPU twin of ``kernels/append.cu``: the labels of components appended to a built index,
folded from their children (:mod:`grail_duckdb.engine.append`), and the built children's
labels gathered for the fold.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from .cores import cores, on_cores, task_range
from .hubs import shifted_word
from .intrinsics import prefetch

_JIT = dict(cache=True, nogil=True, boundscheck=False)
_INT_MAX = np.iinfo(np.int32).max
_INT_MIN = np.iinfo(np.int32).min


@njit(**_JIT)
def append_fold(ptr, idx, order, inner, outer, down, wdown, base, span):
    """Each appended component's labels from its children's, children first.

    Local ids: the appended components are rows ``0 .. len(ptr) - 2`` (their children
    ``idx[ptr[v]:ptr[v + 1]]``), the built components they point to follow them, their rows
    holding their labels. ``order`` lists the appended ones with every child before its
    parents. A component with children gets, per GRAIL label, the smallest ``inner`` and the
    largest ``outer`` among them, the OR of their hub words (``down``) and of their window
    hub words rebased into its own window (``base``: each row's window start, ``span``:
    64 window words); one with none keeps its row as it is. One pass over each component's
    children (no child is the component itself)."""
    d = inner.shape[1]
    words = down.shape[1]
    wwords = wdown.shape[1]
    for i in range(order.shape[0]):
        v = order[i]
        a, b = ptr[v], ptr[v + 1]
        if a == b:
            continue
        for j in range(d):
            inner[v, j] = _INT_MAX
            outer[v, j] = _INT_MIN
        for k in range(words):
            down[v, k] = 0
        for k in range(wwords):
            wdown[v, k] = 0
        for e in range(a, b):
            w = idx[e]
            for j in range(d):
                inner[v, j] = min(inner[v, j], inner[w, j])
                outer[v, j] = max(outer[v, j], outer[w, j])
            for k in range(words):
                down[v, k] |= down[w, k]
            sh = base[w] - base[v]
            if -span < sh < span:
                for k in range(wwords):
                    wdown[v, k] |= shifted_word(wdown, w, k, sh)


#: rows named ahead of the one copied: the built components' rows are random reads
_AHEAD = 16


#: rows of a gather from which every core takes a share
GATHER_SPREAD = 16_384


def gather_labels(ids, *arrays) -> None:
    """Row i of ``o_inner``, ``o_outer``, ``o_down`` (and, where there are windows,
    ``o_wdown`` and the window's first hub ``o_base``) from built component ``ids[i]``'s
    labels (:func:`_gather_rows`; arguments as there), a share of the rows on each core
    from ``GATHER_SPREAD`` rows on (a 1% append to a citation graph of 1M papers gathers
    about 50,000)."""
    tasks = cores() if ids.shape[0] >= GATHER_SPREAD else 1
    on_cores(_gather_rows, tasks, ids, *arrays)


@njit(**_JIT)
def _gather_rows(task, tasks, ids, inner, outer, down, wdown, level, first, o_inner, o_outer,
                 o_down, o_wdown, o_base):
    """Rows ``task_range(len(ids), task, tasks)`` of :func:`gather_labels`, prefetching the
    rows ``_AHEAD`` components on (every row a cache miss, these overlap). A level outside
    ``first`` reads its nearest end (as ``hubs.window_base``)."""
    d = inner.shape[1]
    words = down.shape[1]
    wwords = o_wdown.shape[1]
    top = first.shape[0] - 1
    lo, m = task_range(ids.shape[0], task, tasks)
    for i in range(lo, m):
        if i + _AHEAD < m:
            u = ids[i + _AHEAD]
            prefetch(inner, u * d)
            prefetch(outer, u * d)
            prefetch(down, u * words)
            if wwords:
                prefetch(wdown, u * wwords)
                prefetch(level, u)
        w = ids[i]
        for j in range(d):
            o_inner[i, j] = inner[w, j]
            o_outer[i, j] = outer[w, j]
        for k in range(words):
            o_down[i, k] = down[w, k]
        if wwords:
            for k in range(wwords):
                o_wdown[i, k] = wdown[w, k]
            o_base[i] = first[min(max(level[w], 0), top)]
