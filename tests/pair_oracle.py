"""An independent reachability oracle for tests: a plain depth-first search per pair over the
original edge list (no condensation, no labels, no pruning), compiled with Numba so that tens
of thousands of pairs on the real graphs stay fast."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _pairs(ptr, idx, qs, qd):
    n = ptr.shape[0] - 1
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    touched = np.empty(n, np.int64)
    out = np.zeros(qs.shape[0], np.bool_)
    for q in range(qs.shape[0]):
        s, t = qs[q], qd[q]
        if s == t:
            out[q] = True
            continue
        top = 0
        nt = 0
        seen[s] = True
        touched[nt] = s
        nt += 1
        stack[top] = s
        top += 1
        found = False
        while top > 0 and not found:
            top -= 1
            v = stack[top]
            for e in range(ptr[v], ptr[v + 1]):
                w = idx[e]
                if w == t:
                    found = True
                    break
                if not seen[w]:
                    seen[w] = True
                    touched[nt] = w
                    nt += 1
                    stack[top] = w
                    top += 1
        out[q] = found
        for i in range(nt):
            seen[touched[i]] = False
    return out


def reaches_by_dfs(src, dst, n, qs, qd):
    """Answers of the pairs (qs[i], qd[i]) over the graph with edges src -> dst on ids 0..n-1."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.add.at(ptr, src + 1, 1)
    ptr = np.cumsum(ptr)
    return _pairs(ptr, dst[order], np.asarray(qs, np.int64), np.asarray(qd, np.int64))
