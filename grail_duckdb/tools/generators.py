"""Seeded synthetic graphs at any scale: citation DAGs, uniform random DAGs, R-MAT.

Every generator draws from NumPy's seeded generators with whole-array operations (no Python loop
per vertex or edge), so the same arguments give the same edges on every machine, and millions
of edges take seconds; the citation generator draws blocks of papers in parallel and can write
them straight to Parquet (billions of edges: :func:`write_citation_parquet`). Each returns a pyarrow Table with int64 columns ``src``
and ``dst`` (the NumPy buffers are handed over without a copy). The vertices are 0..n-1, and
n travels in the schema metadata (``b"grail.vertices"``, as for a .gra file) so that the
index counts vertices without edges too. Duplicate edges can occur; they change no
reachability answer.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..engine.ingest import edge_table

__all__ = ["citation_dag", "random_dag", "rmat", "write_citation_parquet"]

#: edges drawn per block by the generators that bound their working memory
_BLOCK = 1 << 24


def _index_dtype(n: int):
    """int32 when vertex ids fit, else int64 (halves the working memory of large graphs)."""
    return np.int32 if n <= 1 << 30 else np.int64          # a + b < 2n stays in range


def citation_dag(n: int, *, mean_citations: float = 4.38, seed: int = 0,
                 threads: int | None = None) -> pa.Table:
    """A synthetic citation DAG: paper i cites earlier papers only (edges citing -> cited).

    Papers are numbered in publication order. Paper i (i >= 1) cites Poisson(mean_citations)
    earlier papers; each citation is, with probability 1/2, *recent* (j = i - L, L geometric
    with mean max(0.02 i, 1), clipped at paper 0) or *old* (j = floor(i u^3), u uniform in
    [0, 1): skewed towards the first papers, the popular classics). So j < i always and the
    graph is a DAG whose depth grows with n; with n = 3,774,768 (cit-Patents' vertex count)
    it has about 16.5M edges.

    The papers are drawn in blocks of 2**20, each from its own generator seeded with
    ``(seed, block)``, on ``threads`` threads (default: every core; NumPy's generators release
    the GIL): the same edges whatever the number of threads. :func:`write_citation_parquet`
    writes the same blocks as Parquet files without holding the graph.

    Parameters
    ----------
    n : int
        Number of papers (vertices 0..n-1).
    mean_citations : float
        Mean out-degree (cit-Patents: 4.38).
    seed : int
        Seed of the random generator.
    threads : int, optional
        Worker threads.

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
    blocks = _blocks(n)
    with ThreadPoolExecutor(_workers(threads)) as pool:
        parts = list(pool.map(lambda b: _citation_block(n, *b, mean_citations, seed, np.int64),
                              blocks))
    if not parts:
        return edge_table(np.empty(0, np.int64), np.empty(0, np.int64), n)
    src = pa.chunked_array([pa.array(p[0]) for p in parts], pa.int64())
    dst = pa.chunked_array([pa.array(p[1]) for p in parts], pa.int64())
    return edge_table(src.combine_chunks(), dst.combine_chunks(), n)


#: papers per block of :func:`citation_dag` (fixed: the block is part of the seed)
_VERTEX_BLOCK = 1 << 20


def _workers(threads: int | None) -> int:
    return max(1, threads or os.cpu_count() or 1)


def _blocks(n: int) -> list[tuple[int, int]]:
    """Vertex ranges of the generator's blocks (none when there is no edge to draw)."""
    if n < 2:
        return []
    return [(lo, min(n, lo + _VERTEX_BLOCK)) for lo in range(0, n, _VERTEX_BLOCK)]


def _citation_block(n: int, lo: int, hi: int, mean: float, seed: int, dtype):
    """``(src, dst)`` of the papers lo..hi-1 of :func:`citation_dag`, in ``dtype``.

    Three draws per citation, no gathers: recent or old (a fair coin), the old paper
    ``floor(i u^3)``, and the look-back L = ceil(E / -ln(1 - 1/mu)) with E standard
    exponential, which is geometric with mean mu = max(0.02 i, 1) (the logarithm taken once
    per paper, not per citation)."""
    rng = np.random.default_rng([seed, lo // _VERTEX_BLOCK])
    counts = rng.poisson(mean, hi - lo)
    if lo == 0:
        counts[0] = 0
    papers = np.arange(lo, hi, dtype=dtype)
    src = np.repeat(papers, counts)
    m = src.shape[0]
    u = rng.random(m)
    old = (src * (u * u * u)).astype(dtype)
    del u
    with np.errstate(divide="ignore"):  # mu = 1: rate inf, L = 1
        rate = -np.log1p(-1.0 / np.maximum(0.02 * papers, 1.0)).astype(np.float32)
    lookback = np.ceil(rng.standard_exponential(m, dtype=np.float32) / np.repeat(rate, counts))
    recent = np.maximum(src - np.maximum(lookback, 1).astype(np.int64), 0).astype(dtype)
    del lookback
    dst = np.where(rng.random(m, dtype=np.float32) < 0.5, recent, old)
    return src, dst


def write_citation_parquet(folder, n: int, *, mean_citations: float = 4.38, seed: int = 0,
                           threads: int | None = None) -> dict:
    """:func:`citation_dag` written as a folder of Parquet files, one per block, in parallel
    (each thread draws a block and writes it; nothing else is held). Ids are int32 when they
    fit (half the file and the upload); ``src`` is delta-encoded (sorted), ``dst`` zstd; every
    file carries ``grail.vertices`` = n, so the build knows the keys are 0..n-1.

    Returns ``{"files", "edges", "bytes", "seconds"}``.

    >>> import tempfile
    >>> info = write_citation_parquet(tempfile.mkdtemp(), 5000, seed=1)
    >>> info["edges"] == citation_dag(5000, seed=1).num_rows
    True
    """
    import time

    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dtype = np.int32 if n < 2**31 else np.int64

    def write(block):
        k, (lo, hi) = block
        src, dst = _citation_block(n, lo, hi, mean_citations, seed, dtype)
        path = folder / f"part-{k:05d}.parquet"
        pq.write_table(edge_table(src, dst, n), path, use_dictionary=False,
                       column_encoding={"src": "DELTA_BINARY_PACKED"}, compression="zstd",
                       compression_level=1, write_statistics=True)
        return src.shape[0], path.stat().st_size

    with ThreadPoolExecutor(_workers(threads)) as pool:
        done = list(pool.map(write, enumerate(_blocks(n))))
    return {"files": len(done), "edges": sum(e for e, _ in done),
            "bytes": sum(b for _, b in done), "seconds": time.perf_counter() - t0}


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
