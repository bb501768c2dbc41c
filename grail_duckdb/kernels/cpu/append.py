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
    64 window words); one with none keeps its row as it is."""
    d = inner.shape[1]
    words = down.shape[1]
    wwords = wdown.shape[1]
    for i in range(order.shape[0]):
        v = order[i]
        a, b = ptr[v], ptr[v + 1]
        if a == b:
            continue
        for j in range(d):
            lo = _INT_MAX
            hi = _INT_MIN
            for e in range(a, b):
                w = idx[e]
                lo = min(lo, inner[w, j])
                hi = max(hi, outer[w, j])
            inner[v, j] = lo
            outer[v, j] = hi
        for k in range(words):
            acc = np.uint64(0)
            for e in range(a, b):
                acc |= down[idx[e], k]
            down[v, k] = acc
        for k in range(wwords):
            acc = np.uint64(0)
            for e in range(a, b):
                w = idx[e]
                sh = base[w] - base[v]
                if -span < sh < span:
                    acc |= shifted_word(wdown, w, k, sh)
            wdown[v, k] = acc
