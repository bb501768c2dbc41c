"""Host-side staging of a query batch for the GPU: the two key columns copied into one pinned
buffer (sources, then targets) with every core, so that one DMA uploads both.

A single thread copies about 5-10 GB/s; a batch of 2M pairs is 32 MB, which would cost more
than everything the device does with it. Small batches are copied by NumPy (a parallel region
costs more than it saves under ``PARALLEL_MIN`` elements).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

#: columns shorter than this are copied on the calling thread
PARALLEL_MIN = 1 << 16
#: elements per parallel copy task
_BLOCK = 1 << 16


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def _copy_pair(a, b, out):
    n = a.shape[0]
    blocks = (n + _BLOCK - 1) // _BLOCK
    for i in prange(blocks):
        lo = i * _BLOCK
        hi = min(lo + _BLOCK, n)
        out[lo:hi] = a[lo:hi]
        out[n + lo:n + hi] = b[lo:hi]


def stage_pairs(a: np.ndarray, b: np.ndarray, out: np.ndarray, lock=None) -> None:
    """out[:n] = a, out[n:2n] = b (int64 columns of equal length n; ``lock`` held around the
    parallel region, whose thread pool may not be entered by two threads at once)."""
    n = a.shape[0]
    if n < PARALLEL_MIN:
        np.copyto(out[:n], a, casting="unsafe")
        np.copyto(out[n:2 * n], b, casting="unsafe")
        return
    a = np.ascontiguousarray(a, np.int64)
    b = np.ascontiguousarray(b, np.int64)
    if lock is None:
        _copy_pair(a, b, out)
    else:
        with lock:
            _copy_pair(a, b, out)
