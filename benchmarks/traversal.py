"""The bench's traversal primitive: GTEPS of single-source traversals with the kernels'
``reach_within_colour`` (the primitive of the SCC sweeps) on the input graph and on the condensed
DAG, and of one sweep seeded from every vertex (the kernel's raw edge throughput)."""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from grail_duckdb.engine.csr import CSR
from grail_duckdb.kernels import to_host

from . import baselines as bl


def traversal_gteps(idx, graph, roots: int = 64, seed: int = 0) -> dict:
    """GTEPS of single-source traversals of ``graph`` (a CSR on idx's backend) from random roots.

    Roots are drawn among the vertices with at least one out-edge (a root with none traverses
    nothing); the edges traversed from a root are the out-edges of every vertex it reaches.
    GTEPS = all edges traversed / all traversal time, over the ``roots`` traversals.
    """
    k = idx.kernels
    xp = k.xp
    outdeg = np.diff(to_host(graph.indptr))
    candidates = np.flatnonzero(outdeg > 0)
    if candidates.shape[0] == 0:
        return {"roots": 0, "edges": 0, "seconds": 0.0, "gteps": None}
    rng = np.random.default_rng(seed)
    picked = rng.choice(candidates, size=min(roots, candidates.shape[0]), replace=False)
    colour = xp.zeros(graph.n, dtype=xp.int32)
    seeds = xp.zeros(graph.n, dtype=bool)
    total_s, total_e, per_root = 0.0, 0, []
    for r in picked:
        seeds[int(r)] = True
        idx.kernels.synchronize()
        t0 = time.perf_counter()
        seen = k.reach_within_colour(graph, seeds, colour)
        idx.kernels.synchronize()
        dt = time.perf_counter() - t0
        seeds[int(r)] = False
        edges = int(outdeg[to_host(seen)].sum())
        total_s += dt
        total_e += edges
        per_root.append(edges)
    return {"roots": int(picked.shape[0]), "edges": total_e, "seconds": total_s,
            "gteps": total_e / total_s / 1e9 if total_s > 0 else None,
            "edges_per_root_median": float(np.median(per_root)),
            "edges_per_root_max": int(max(per_root))}


def sweep_gteps(idx, graph) -> dict:
    """GTEPS of one traversal seeded from every vertex at once: each edge is crossed once, so
    this is the kernel's edge throughput with no per-root set-up (best of three)."""
    k = idx.kernels
    xp = k.xp
    seeds = xp.ones(graph.n, dtype=bool)
    colour = xp.zeros(graph.n, dtype=xp.int32)

    def once():
        k.reach_within_colour(graph, seeds, colour)
        idx.kernels.synchronize()

    idx.kernels.synchronize()
    seconds, _ = bl.best_of(once)
    return {"roots": graph.n, "edges": graph.m, "seconds": seconds,
            "gteps": graph.m / seconds / 1e9 if seconds > 0 else None}


def input_graph(idx, edges: pa.Table):
    """The forward CSR of the input graph (not condensed), on the index's backend."""
    k = idx.kernels
    s = idx.ids.encode(edges.column("src"), k.xp)
    d = idx.ids.encode(edges.column("dst"), k.xp)
    return CSR(*k.csr(s, d, idx.n_vertices))


def bench_traversal(idx, edges: pa.Table, roots: int, seed: int) -> dict:
    """GTEPS on the input graph and on the condensed DAG (the graph the query search walks)."""
    g = input_graph(idx, edges)
    return {"input graph": traversal_gteps(idx, g, roots, seed),
            "condensed DAG": traversal_gteps(idx, idx.dag, roots, seed),
            "input graph, every vertex a root (one sweep)": sweep_gteps(idx, g)}
