"""Host-side staging for the GPU. Of a query batch: the two key columns copied into one pinned
buffer (sources, then targets), so that one DMA uploads both.

Narrow form: when every key k of the batch lies in ``[offset, offset + 2**31 - 1)`` (a dense
lookup table's range: every known key does), the buffer holds ``k - offset`` as int32, half
the bytes to upload; the kernel then looks ``k - offset`` up directly, and equal staged values
still mean equal keys. Otherwise the keys go as int64 (wide form).

A single thread copies about 10 GB/s; the copy of a large batch costs more than everything the
device does with it, so batches of ``PARALLEL_MIN`` keys or more are staged by every core.

Of the build's edges (:func:`pack_key_offsets`): each piece of the input packed straight into
the build's array of edges (a pinned buffer uploaded by :mod:`grail_duckdb.engine.transfer`,
or the host array itself on the CPU backend), one piece per worker thread.
"""
from __future__ import annotations

import contextlib

import numpy as np
from numba import prange

from ...jit import njit

#: columns shorter than this are staged on the calling thread
PARALLEL_MIN = 1 << 16
#: keys per parallel task (small: a 100K-pair batch then spreads over every core)
STAGE_BLOCK = 1 << 11
#: staged narrow keys are below this (int32, and not -1 - ...: every value is a key offset)
_NARROW_END = (1 << 31) - 1


@njit(cache=True, nogil=True, boundscheck=False)
def _narrow_block(src, lo, hi, offset, out, base):
    """out[base + j] = src[j] - offset for j in [lo, hi); the number of keys that do not fit."""
    bad = 0
    for j in range(lo, hi):
        k = src[j]
        x = k - offset
        bad += not ((k >= offset) & (x >= 0) & (x < _NARROW_END))
        out[base + j] = np.int32(x)
    return bad


@njit(cache=True, nogil=True, boundscheck=False)
def _narrow_serial(a, b, offset, out):
    n = a.shape[0]
    return _narrow_block(a, 0, n, offset, out, 0) + _narrow_block(b, 0, n, offset, out, n)


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def _narrow_parallel(a, b, offset, out, block):
    n = a.shape[0]
    blocks = (n + block - 1) // block
    bad = 0
    for i in prange(2 * blocks):
        lo = (i % blocks) * block
        hi = min(lo + block, n)
        if i < blocks:
            bad += _narrow_block(a, lo, hi, offset, out, 0)
        else:
            bad += _narrow_block(b, lo, hi, offset, out, n)
    return bad


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def _wide_parallel(a, b, out, block):
    n = a.shape[0]
    blocks = (n + block - 1) // block
    for i in prange(blocks):
        lo = i * block
        hi = min(lo + block, n)
        out[lo:hi] = a[lo:hi]
        out[n + lo:n + hi] = b[lo:hi]


def stage_pairs(a: np.ndarray, b: np.ndarray, out: np.ndarray, offset: int | None,
                lock=None) -> bool:
    """Stage the int64 key columns a, b (equal length n) into the byte buffer ``out``: narrow
    (int32 ``k - offset``, 8n bytes) when ``offset`` is given and every key fits, else wide
    (int64 keys, 16n bytes). Returns True for the wide form. ``lock`` is held around the
    parallel regions (Numba's default thread pool may not be entered by two threads at once).
    """
    n = a.shape[0]
    parallel = n >= PARALLEL_MIN
    guard = lock if lock is not None else contextlib.nullcontext()
    if offset is not None:
        narrow = out[:8 * n].view(np.int32)
        if not parallel:
            bad = _narrow_serial(a, b, offset, narrow)
        else:
            with guard:
                bad = _narrow_parallel(a, b, offset, narrow, STAGE_BLOCK)
        if bad == 0:
            return False
    wide = out[:16 * n].view(np.int64)
    if not parallel:
        np.copyto(wide[:n], a, casting="unsafe")
        np.copyto(wide[n:], b, casting="unsafe")
    else:
        with guard:
            _wide_parallel(a, b, wide, STAGE_BLOCK)
    return True


#: the largest 32-bit key offset
_OFFSET_MAX = (1 << 32) - 1


@njit(cache=True, nogil=True, boundscheck=False)
def pack_key_offsets(src, dst, lo, check, out, base):
    """The build's read of one piece of edges: ``out[base + i] = (src[i] - lo) << 32
    | (dst[i] - lo)`` as uint64, both halves 32 bits. With ``check``, offsets outside
    ``[0, 2**32)`` are counted (the caller's range was wrong); without, they wrap, which packs
    int32 keys as their bits (``lo`` = 0) for the device to offset later. Returns
    ``(min key, max key, offsets out of range)``; one pass over the keys, no temporaries."""
    mn = np.int64(np.iinfo(np.int64).max)
    mx = np.int64(np.iinfo(np.int64).min)
    bad = 0
    for i in range(src.shape[0]):
        s = np.int64(src[i])
        d = np.int64(dst[i])
        mn = min(mn, s, d)
        mx = max(mx, s, d)
        x = s - lo
        y = d - lo
        if check:
            bad += (x < 0) | (x > _OFFSET_MAX) | (y < 0) | (y > _OFFSET_MAX)
        out[base + i] = (np.uint64(x & _OFFSET_MAX) << np.uint64(32)) | np.uint64(y & _OFFSET_MAX)
    return mn, mx, bad
