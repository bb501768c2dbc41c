"""CPU twin of ``kernels/append.cu``: the labels of components appended to a built index,
folded from their children (:mod:`grail_duckdb.engine.append`).
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from .hubs import shifted_word

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
