"""Independent reachability oracles for tests: plain breadth-first search with SciPy, and a
plain depth-first search per pair compiled with Numba (for tens of thousands of pairs on the
real graphs).

No condensation, no labels, no pruning, over the original edge list: ``bfs_reachable`` /
``bfs_pairs`` run one ``scipy.sparse.csgraph.breadth_first_order`` per distinct source (for
small and medium graphs: each search costs O(n) set-up); ``reaches_by_dfs`` searches each pair
with early exit and clears only what it touched.
"""
from __future__ import annotations

import numpy as np
from numba import njit
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


def hop_distances(src, dst, n: int, sources) -> np.ndarray:
    """``out[i, v]``: edges of a shortest path ``sources[i]`` -> v over the edges src -> dst
    (ids 0..n-1), -1 where there is none (0 from a vertex to itself): plain BFS per source."""
    from scipy.sparse.csgraph import shortest_path

    graph = _graph(src, dst, n)
    d = shortest_path(graph, directed=True, unweighted=True, indices=np.asarray(sources, np.int64))
    return np.where(np.isinf(d), -1, d).astype(np.int64).reshape(len(sources), n)


def smallest_shortest_path(src, dst, to_t, s: int, t: int, rank) -> list | None:
    """The shortest path s -> t whose vertex sequence is smallest by ``rank`` (each step
    takes the smallest-ranked out-neighbour one hop nearer t); ``to_t[v]``: hops v -> t (-1:
    none, from :func:`hop_distances` over the reversed edges). None when t is unreachable."""
    if to_t[s] < 0:
        return None
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    path = [s]
    while path[-1] != t:
        v = path[-1]
        nxt = {int(w) for w in dst[src == v] if to_t[w] == to_t[v] - 1 and w != v}
        path.append(min(nxt, key=lambda w: rank[w]))
    return path
