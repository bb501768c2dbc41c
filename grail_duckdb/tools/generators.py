"""Seeded synthetic graphs at any scale: citation DAGs, uniform random DAGs, R-MAT.

Every generator draws from ``numpy.random.default_rng(seed)`` with whole-array operations (no
Python loop per vertex or edge), so the same arguments give the same edges on every machine,
and millions of edges take seconds. Each returns a pyarrow Table with int64 columns ``src``
and ``dst`` (the NumPy buffers are handed over without a copy). The vertices are 0..n-1, and
n travels in the schema metadata (``b"grail.vertices"``, as for a .gra file) so that the
index counts vertices without edges too. Duplicate edges can occur; they change no
reachability answer.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..engine.ingest import edge_table

__all__ = ["citation_dag", "random_dag", "rmat"]

#: edges drawn per block by the generators that bound their working memory
_BLOCK = 1 << 24


def _index_dtype(n: int):
    """int32 when vertex ids fit, else int64 (halves the working memory of large graphs)."""
    return np.int32 if n <= 1 << 30 else np.int64          # a + b < 2n stays in range


def citation_dag(n: int, *, mean_citations: float = 4.38, seed: int = 0) -> pa.Table:
    """A synthetic citation DAG: paper i cites earlier papers only (edges citing -> cited).

    Papers are numbered in publication order. Paper i (i >= 1) cites Poisson(mean_citations)
    earlier papers; each citation is, with probability 1/2, *recent* (j = i - L, L geometric
    with mean max(0.02 i, 1), clipped at paper 0) or *old* (j = floor(i u^3), u uniform in
    [0, 1): skewed towards the first papers, the popular classics). So j < i always and the
    graph is a DAG whose depth grows with n; with n = 3,774,768 (cit-Patents' vertex count)
    it has about 16.5M edges.

    Parameters
    ----------
    n : int
        Number of papers (vertices 0..n-1).
    mean_citations : float
        Mean out-degree (cit-Patents: 4.38).
    seed : int
        Seed of the random generator.

    Returns
    -------
    pyarrow.Table
        int64 ``src`` (citing paper), ``dst`` (cited paper), sorted by ``src``.

    Examples
    --------
    >>> t = citation_dag(1000, seed=1)
    >>> bool((t["dst"].to_numpy() < t["src"].to_numpy()).all())
    True
    """
    rng = np.random.default_rng(seed)
    if n < 2:
        return edge_table(np.empty(0, np.int64), np.empty(0, np.int64), n)
    counts = rng.poisson(mean_citations, n)
    counts[0] = 0
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    dst = np.empty_like(src)
    recent = rng.random(src.shape[0]) < 0.5
    i = src[recent]
    lookback = rng.geometric(1.0 / np.maximum(0.02 * i, 1.0))
    dst[recent] = np.maximum(i - lookback, 0)
    i = src[~recent]
    dst[~recent] = np.floor(i * rng.random(i.shape[0]) ** 3).astype(np.int64)
    return edge_table(src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False), n)


def random_dag(n: int, avg_degree: float, *, seed: int = 0) -> pa.Table:
    """A uniform random DAG, as in the GRAIL GPU paper's synthetic graphs.

    Draws ``round(n * avg_degree)`` edges between uniformly random distinct positions a != b
    of a topological order and orients each from the earlier to the later position; then
    vertex ids are a random permutation of the positions, so ids say nothing about the order.

    Memory: work runs in blocks of 16M edges in int32 (for n < 2**31); the result itself is
    two int64 columns, 16 bytes per edge (n = 1M, avg_degree = 100: 1.6 GB, about 2 GB peak).

    Parameters
    ----------
    n : int
        Number of vertices.
    avg_degree : float
        Edges per vertex (the paper's random DAGs use 2 to 100).
    seed : int
        Seed of the random generator.

    Returns
    -------
    pyarrow.Table
        int64 ``src``, ``dst``.

    Examples
    --------
    >>> random_dag(100, 3.0, seed=2).num_rows
    300
    """
    rng = np.random.default_rng(seed)
    m = int(round(n * avg_degree)) if n >= 2 else 0
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    dtype = _index_dtype(n)
    vertex_at = rng.permutation(n).astype(dtype)          # vertex id at each order position
    for lo in range(0, m, _BLOCK):
        k = min(_BLOCK, m - lo)
        a = rng.integers(0, n, k, dtype=dtype)
        b = rng.integers(1, n, k, dtype=dtype)            # an offset != 0: b = a + offset mod n
        b += a
        b[b >= n] -= n
        src[lo:lo + k] = vertex_at[np.minimum(a, b)]
        dst[lo:lo + k] = vertex_at[np.maximum(a, b)]
    return edge_table(src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False), n)


def rmat(scale: int, edge_factor: int = 16, *, a: float = 0.57, b: float = 0.19,
         c: float = 0.19, seed: int = 0) -> pa.Table:
    """A directed R-MAT graph (Chakrabarti et al.): 2**scale vertices, skewed degrees.

    Each of ``edge_factor * 2**scale`` edges picks one quadrant of the adjacency matrix per
    bit of the vertex ids (top-left a, top-right b, bottom-left c, bottom-right 1 - a - b - c),
    all edges one bit at a time. Vertex ids are then permuted at random so that the
    high-degree vertices are not the low ids. The result has cycles and a giant strongly
    connected component; self-loops and duplicates are kept.

    Parameters
    ----------
    scale : int
        log2 of the vertex count.
    edge_factor : int
        Edges per vertex.
    a, b, c : float
        Quadrant probabilities (the Graph500 defaults).
    seed : int
        Seed of the random generator.

    Returns
    -------
    pyarrow.Table
        int64 ``src``, ``dst``.

    Examples
    --------
    >>> t = rmat(8, seed=3)
    >>> t.num_rows, int(max(t["src"].to_numpy().max(), t["dst"].to_numpy().max())) < 256
    (4096, True)
    """
    if not (a >= 0 and b >= 0 and c >= 0 and a + b + c <= 1):
        raise ValueError(f"R-MAT quadrant probabilities must be >= 0 and sum to <= 1, got {a, b, c}")
    rng = np.random.default_rng(seed)
    n = 1 << scale
    m = edge_factor * n
    dtype = _index_dtype(n)
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    relabel = rng.permutation(n).astype(dtype)
    for lo in range(0, m, _BLOCK):
        k = min(_BLOCK, m - lo)
        s = np.zeros(k, dtype)
        d = np.zeros(k, dtype)
        for bit in range(scale):
            r = rng.random(k, dtype=np.float32)
            down = r >= a + b                           # bottom half: quadrant c or d
            right = (r >= a) ^ down ^ (r >= a + b + c)  # right half: quadrant b or d
            s |= down.astype(dtype) << bit
            d |= right.astype(dtype) << bit
        src[lo:lo + k] = relabel[s]
        dst[lo:lo + k] = relabel[d]
    return edge_table(src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False), n)
