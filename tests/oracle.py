"""An independent reachability oracle for tests: plain breadth-first search with SciPy.

No condensation, no labels, no pruning: one ``scipy.sparse.csgraph.breadth_first_order`` per
distinct source over the original edge list. Meant for small and medium graphs (each search
costs O(n) set-up).
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order


def _graph(src_ids, dst_ids, n: int) -> csr_matrix:
    src = np.asarray(src_ids, np.int64)
    dst = np.asarray(dst_ids, np.int64)
    return csr_matrix((np.ones(src.shape[0], np.int8), (src, dst)), shape=(n, n))


def bfs_reachable(src_ids, dst_ids, n: int, sources) -> np.ndarray:
    """``out[i, v]``: does ``sources[i]`` reach vertex v (every vertex reaches itself)?

    The graph has the edges ``src_ids[e] -> dst_ids[e]`` over the vertices 0..n-1.
    Returns a bool matrix of shape ``(len(sources), n)``.
    """
    graph = _graph(src_ids, dst_ids, n)
    sources = np.asarray(sources, np.int64)
    out = np.zeros((sources.shape[0], n), bool)
    for i, s in enumerate(sources):
        out[i, breadth_first_order(graph, int(s), directed=True,
                                   return_predecessors=False)] = True
    return out


def bfs_pairs(src_ids, dst_ids, n: int, qs, qt) -> np.ndarray:
    """Answers of the pairs ``qs[i] -> qt[i]`` (dense ids), one BFS per distinct source."""
    graph = _graph(src_ids, dst_ids, n)
    qs = np.asarray(qs, np.int64)
    qt = np.asarray(qt, np.int64)
    out = np.zeros(qs.shape[0], bool)
    for s in np.unique(qs):
        reached = np.zeros(n, bool)
        reached[breadth_first_order(graph, int(s), directed=True,
                                    return_predecessors=False)] = True
        rows = np.flatnonzero(qs == s)
        out[rows] = reached[qt[rows]]
    return out
