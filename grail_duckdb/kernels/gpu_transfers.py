"""Device arrays to the host and host values to a device through pinned buffers, the streams
a thread's copies run on, and a row group's label pages decoded on the device: the GPU side
of :mod:`grail_duckdb.kernels.host.transfers` (imported only where a GPU is used).
"""
from __future__ import annotations

import threading

import cupy as cp
import cupyx
import numpy as np

from .gpu_queries import _D2H, _H2D

__all__ = ["Staging", "download", "mark", "own_stream", "upload", "upload_pages"]


def download(a, chunk: int, out: np.ndarray | None = None, ready: bool = False) -> np.ndarray:
    """A device array copied to a new (pageable) host array, or into ``out`` (C-contiguous,
    of ``a``'s shape and type), through two pinned buffers of ``chunk`` bytes: the device
    copies one chunk into a pinned buffer on a stream of its own while this thread copies
    the previous one out of the other buffer (NumPy, without the GIL), so several threads
    can download arrays side by side at the link's speed. ``ready``: ``a`` was complete
    before the device's last synchronization, so the copy does not wait for the current
    stream (where other threads' kernels queue: the children written during a build's label
    passes waited for them at every part, and wrote almost nothing until they were over);
    ``a`` must then be contiguous, as the children's slices are (a contiguous copy would be
    made on the current stream, which the copy does not wait for)."""
    a = cp.ascontiguousarray(a)
    if out is None:
        out = np.empty(a.shape, a.dtype)
    elif out.shape != a.shape or out.dtype != a.dtype or not out.flags.c_contiguous:
        raise ValueError("download: out must be C-contiguous, of the array's shape and type")
    n = a.nbytes
    if n == 0:
        return out
    src = a.data.ptr
    dst = out.reshape(-1).view(np.uint8)
    bufs = [cupyx.empty_pinned(chunk, np.uint8) for _ in range(2)]
    if not ready:
        cp.cuda.get_current_stream().synchronize()  # whatever made ``a`` is done
    stream = cp.cuda.Stream(non_blocking=True)
    pending = None
    for i, lo in enumerate(range(0, n, chunk)):
        size = min(chunk, n - lo)
        buf = bufs[i & 1]
        cp.cuda.runtime.memcpyAsync(buf.ctypes.data, src + lo, size, _D2H, stream.ptr)
        done = stream.record()
        if pending is not None:
            _copy_out(dst, *pending)
        pending = (done, buf, lo, size)
    _copy_out(dst, *pending)
    return out


def _copy_out(dst: np.ndarray, done, buf: np.ndarray, lo: int, size: int) -> None:
    done.synchronize()
    dst[lo:lo + size] = buf[:size]


def mark() -> "cp.cuda.Event":
    """An event recorded on the current stream: the work queued on it so far (:func:`own_stream`
    waits for it)."""
    event = cp.cuda.Event(disable_timing=True)
    event.record()
    return event


_OWN = threading.local()


def own_stream(after: "cp.cuda.Event") -> "cp.cuda.Stream":
    """This thread's own non-blocking stream (made once per thread), waiting for ``after``;
    use it as a context manager to make it current. Its work does not queue behind the
    kernels of other threads on the default stream (a build's label passes while the build
    saves), nor wait for their synchronization."""
    stream = getattr(_OWN, "stream", None)
    if stream is None:
        stream = _OWN.stream = cp.cuda.Stream(non_blocking=True)
    stream.wait_event(after)
    return stream


#: bytes each value's place in a pinned buffer is rounded up to
_ALIGN = 64


class Staging:
    """Pinned buffers (two per thread) and a stream per thread for uploads that return while
    their last chunk is still on its way (:func:`upload` with ``staging``). The owner
    synchronizes the device before it reads the arrays or drops this object (the buffers go
    back to CuPy's pool then, and must not be in use)."""

    def __init__(self, chunk: int):
        self.chunk = chunk
        self._lanes: dict = {}
        self._lock = threading.Lock()

    def lane(self):
        """This thread's ``(buffers, stream, events, turn)``."""
        key = threading.get_ident()
        got = self._lanes.get(key)
        if got is None:
            with self._lock:
                got = self._lanes[key] = (
                    [cupyx.empty_pinned(self.chunk, np.uint8) for _ in range(2)],
                    cp.cuda.Stream(non_blocking=True), [None, None], [0])
        return got


def upload_pages(kernels, staging: Staging, runs, table: np.ndarray, kept: int,
                 scratch: int, err) -> None:
    """Bring a row group's label pages to the device as they lie in the file and decode
    them there, into the arrays whose addresses ``table`` holds
    (:meth:`.gpu.GpuKernels.place_pages`), all on this thread's stream of ``staging`` and without
    waiting: ``runs`` the pages' bytes (host uint8 arrays, laid one after the other:
    ``table``'s sources count from the first), ``kept`` the rows written (the rows after
    them are not), ``scratch`` bytes of room for the decompressed pages. Its buffers go back
    to CuPy's pool when it returns, for later work on the same stream only (the pool keeps a
    stream's blocks apart)."""
    _, stream, _, _ = staging.lane()
    with stream:
        raw = cp.empty(sum(int(r.nbytes) for r in runs), cp.uint8)
        pages = cp.empty(table.shape, cp.int64)
        pairs, at = [(pages, table)], 0
        for run in runs:
            pairs.append((raw[at:at + run.nbytes], run))
            at += run.nbytes
        upload(pairs, staging.chunk, staging)
        kernels.place_pages(raw, pages, int(table.shape[0]), kept,
                            cp.empty(max(scratch, 1), cp.uint8), err)


def upload(pairs, chunk: int, staging: Staging | None = None) -> None:
    """Host values copied into contiguous device arrays (``(dst, values)`` pairs, as many
    elements each) through two pinned buffers of ``chunk`` bytes: this thread fills one while
    the device takes the other on a stream of its own (the mirror of :func:`download`). The
    values follow one another through the buffers, so small ones share a buffer and its one
    wait (a load's row group: its 33 columns had a call, a copy and a wait each, and rmat's,
    of 1 MiB or less, took the pageable path). With a ``staging`` the buffers are the
    thread's lane of it and the call does not wait for its last buffer (the thread's next
    upload fills the other one meanwhile); without, it waits."""
    if staging is None:
        bufs, stream, done, turn = ([cupyx.empty_pinned(chunk, np.uint8) for _ in range(2)],
                                    cp.cuda.Stream(non_blocking=True), [None, None], [0])
    else:
        bufs, stream, done, turn = staging.lane()
        chunk = staging.chunk
    # the copies come after the work queued on the current stream so far: the destinations
    # may be fresh (``zeros``: a fill still queued) or blocks of the pool that queued work
    # still uses
    stream.wait_event(mark())
    j, pos = None, chunk
    for dst, values in pairs:
        src = np.ascontiguousarray(values, dst.dtype).reshape(-1).view(np.uint8)
        lo = 0
        while lo < src.nbytes:
            if pos >= chunk:  # this buffer is full: the other one, once its last copy is over
                if j is not None:
                    done[j] = stream.record()
                j = turn[0]
                turn[0] ^= 1
                if done[j] is not None:
                    done[j].synchronize()
                pos = 0
            size = min(chunk - pos, src.nbytes - lo)
            bufs[j][pos:pos + size] = src[lo:lo + size]
            cp.cuda.runtime.memcpyAsync(dst.data.ptr + lo, bufs[j].ctypes.data + pos, size,
                                        _H2D, stream.ptr)
            lo += size
            pos += -(-size // _ALIGN) * _ALIGN
    if j is not None:
        done[j] = stream.record()
    if staging is None:
        stream.synchronize()
