"""Memory while the bench runs: the host's resident set (peak and growth over a block, by a
sampling thread) and CuPy's pool (its peak during a build; its growth over the query calls).
"""
from __future__ import annotations

import gc
import os
import resource
import sys
import threading

__all__ = ["PeakMemory", "PoolGrowth", "free_device", "max_rss_bytes", "query_memory",
           "rss_bytes"]


def free_device(backend: str) -> None:
    """Hand the device memory of dropped objects back to the driver (CuPy keeps freed blocks
    in its pool): the next index or step starts from an empty pool."""
    gc.collect()
    if backend == "gpu":
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


def rss_bytes() -> int:
    """Current resident set size (Linux: /proc/self/statm; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return max_rss_bytes()


def max_rss_bytes() -> int:
    """The process's high-water resident set size (``getrusage``; KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class PeakMemory:
    """Peak host RSS (and CuPy pool bytes, on a GPU) while a block runs, sampled by a thread.

    ``growth`` is the peak minus the RSS when the block began: what the block itself needed.
    Sampling every ``interval`` seconds can miss a shorter spike; the kernels release the GIL,
    so the sampler keeps running while they work.
    """

    def __init__(self, gpu: bool = False, interval: float = 0.002):
        self.gpu = gpu
        self.interval = interval
        self.pool = None
        if gpu:
            import cupy

            self.pool = cupy.get_default_memory_pool()

    def _sample(self) -> None:
        self.peak = max(self.peak, rss_bytes())
        if self.pool is not None:
            self.gpu_peak = max(self.gpu_peak, int(self.pool.total_bytes()))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "PeakMemory":
        if self.pool is not None:
            self.pool.free_all_blocks()
        self.start = rss_bytes()
        self.peak = self.start
        self.gpu_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def as_dict(self) -> dict:
        return {"rss_start_bytes": self.start, "rss_peak_bytes": self.peak,
                "rss_growth_bytes": self.peak - self.start,
                "gpu_pool_peak_bytes": self.gpu_peak if self.pool is not None else None}


class PoolGrowth:
    """How much CuPy's memory pool grew over a block (``grown`` bytes): it keeps the blocks
    freed inside the block, so its size at the end is its peak. Emptied of unused blocks at
    the start; nothing is sampled (no thread beside timed calls). Without ``gpu``, 0."""

    def __init__(self, gpu: bool):
        self.pool = None
        if gpu:
            import cupy

            self.pool = cupy.get_default_memory_pool()

    def __enter__(self) -> "PoolGrowth":
        self.start = self.grown = 0
        if self.pool is not None:
            self.pool.free_all_blocks()
            self.start = int(self.pool.total_bytes())
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.grown = int(self.pool.total_bytes()) - self.start


def query_memory(idx, mem: PoolGrowth) -> dict:
    """What the query calls held on the device beyond the index: how much CuPy's pool grew
    over them, less the reverse DAG that the first exact search makes and keeps (the index's,
    not a call's); as bytes and as a fraction of the index's footprint."""
    qi = idx.query_index()
    rev = 0 if qi.rev is None else int(qi.rev.nbytes)
    scratch = max(0, mem.grown - rev)
    return {"footprint_bytes": qi.footprint, "reverse_dag_bytes": rev, "scratch_bytes": scratch,
            "scratch_fraction": scratch / max(qi.footprint, 1)}
