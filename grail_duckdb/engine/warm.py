"""``warm_up()``: compile (or load from Numba's on-disk cache) every kernel before timed work.

The first build after an install compiles the CPU kernels (~9 s for all of them, announced on
stderr); a later process loads them from Numba's cache (~0.5 s). Either cost lands in whatever
call comes first, so a benchmark or a demo that times its first query would time the compiler: they call
``warm_up()`` first. It builds and queries small graphs that reach every kernel, with every
argument type the pipeline uses (dense, sparse and text keys; cycles; searched queries).
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ..kernels import resolve
from ..kernels.cpu import CpuKernels, CpuSettings
from ..kernels.cpu.digest import hash_bytes
from .index import build_index

__all__ = ["warm_up"]


def _graphs():
    """Small edge lists that exercise every kernel: two cycles (trim, forward-backward,
    colour propagation), a deep DAG part (levels, search), keys dense, sparse and text."""
    rng = np.random.default_rng(7)
    n = 400
    cycles = ([5, 6, 7, 50, 51], [6, 7, 5, 51, 50])      # two components for the colour pass
    src = np.r_[np.arange(n - 1), rng.integers(0, n, 200), cycles[0]]
    dst = np.r_[np.arange(1, n), rng.integers(0, n, 200), cycles[1]]
    keep = src < dst
    keep[-5:] = True                                     # the cycles; the rest forward (a DAG)
    src, dst = src[keep], dst[keep]
    yield src, dst
    yield src * 1_000_003, dst * 1_000_003             # sparse keys
    # a dense, deep DAG: every vertex cites 6 earlier ones, so random pairs outgrow the bounded
    # search and reach the exact (bidirectional) one
    later = np.repeat(np.arange(1, 3000), 6)
    yield later, (rng.random(later.shape[0]) * later).astype(np.int64)
    yield pa.array([f"v{i}" for i in src]), pa.array([f"v{i}" for i in dst])


def warm_up(backend=None) -> float:
    """Compile or load every kernel of the CPU backend (and of the GPU backend when
    ``backend`` resolves to it) now, so that no later call pays for it; returns the seconds
    spent.

    >>> seconds = warm_up("cpu")        # a no-op in effect once the kernels are loaded
    >>> seconds >= 0
    True
    """
    t0 = time.perf_counter()
    hash_bytes(bytes(64))                               # the index file's digest
    backends = ["cpu"] + (["gpu"] if resolve(backend) == "gpu" else [])
    # the CPU's build sweeps that share each level among the cores, which a small graph on
    # few cores would not take
    build_index(*next(_graphs()), backend=CpuKernels(settings=CpuSettings(
        level_work=0, level_threads=2, prefetch_degree=0)), progress=False)
    rng = np.random.default_rng(11)
    for name in backends:
        for src, dst in _graphs():
            idx = build_index(src, dst, backend=name, progress=False)
            keys = idx.ids.keys
            pick = rng.integers(0, len(keys), (2, 20_000))  # > one serial batch: the parallel pass
            qs, qd = keys.take(pa.array(pick[0])), keys.take(pa.array(pick[1]))
            idx.reaches(qs, qd)
            idx.reaches_with_stats(qs, qd, use_cuts=False)
            idx.reaches_with_stats(qs, qd, words=4)
            idx.reaches(keys[0].as_py(), keys[1].as_py())
    return time.perf_counter() - t0
