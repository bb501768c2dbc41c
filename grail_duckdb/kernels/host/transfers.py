"""Arrays between host and device: pinned, chunked copies both ways, the host memory that
a thread's copies land in, and the streams a copy runs on. Host arrays pass through
untouched, so the index file's reader and writer and the engine call these for either
backend.

The knobs are a :class:`TransferSettings` passed to the work that copies (a save's or a
load's settings); :data:`TRANSFERS` is the default.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

__all__ = ["Landing", "TRANSFERS", "TransferSettings", "copy_into", "is_device_array",
           "mark_ready", "on_own_stream", "to_host", "to_host_all", "to_host_columns",
           "upload_pages", "upload_staging"]


@dataclass(frozen=True)
class TransferSettings:
    """How device arrays cross to the host and back."""

    #: arrays larger than this go through the pinned staging buffers (a pageable copy runs at
    #: a few GB/s)
    pinned_min_bytes: int = 1 << 20
    #: bytes of each of a transfer's two pinned buffers: one size, so that CuPy's pinned pool
    #: hands them out again; they stay in the pool for the next save or load
    #: (``cupy.get_default_pinned_memory_pool().free_all_blocks()`` gives them back)
    chunk_bytes: int = 1 << 24


TRANSFERS = TransferSettings()


def to_host(a, out: np.ndarray | None = None, ready: bool = False,
            settings: TransferSettings = TRANSFERS) -> np.ndarray:
    """A NumPy array of a host or device (CuPy) array; host arrays are not copied. Device
    arrays over 1 MiB come through pinned buffers (:func:`.gpu_transfers.download`: a pageable copy
    runs at a few GB/s, as a save's host copy of a large index showed), into ``out`` when
    given (a C-contiguous host array of ``a``'s shape and type); ``ready``: ``a`` was
    complete before the device's last synchronization (a pinned copy waits for nothing
    else)."""
    if not is_device_array(a):
        return np.asarray(a)
    if a.nbytes > settings.pinned_min_bytes:
        from ..gpu_transfers import download

        return download(a, settings.chunk_bytes, out, ready)
    return a.get(out=out)  # small: it may wait for the current stream


def to_host_all(arrays, landing: Landing | None = None, ready: bool = False,
                settings: TransferSettings = TRANSFERS) -> list[np.ndarray]:
    """Contiguous NumPy arrays of several host or device arrays (:func:`to_host` each, with
    ``ready``: a save's gathered parts come through the pinned buffers); device arrays land
    in ``landing``'s memory when given (valid until its next use)."""
    arrays = list(arrays)
    pinned = [is_device_array(a) and a.nbytes > settings.pinned_min_bytes for a in arrays]
    outs = iter(landing.arrays([(a.shape, a.dtype) for a, p in zip(arrays, pinned) if p])
                if landing is not None else [])
    return [to_host(a, next(outs, None) if p else None, ready, settings) if p
            else np.ascontiguousarray(to_host(a, ready=ready, settings=settings))
            for a, p in zip(arrays, pinned)]


def to_host_columns(arrays, landing: Landing | None = None,
                    settings: TransferSettings = TRANSFERS) -> list[np.ndarray]:
    """Contiguous host copies of 1-D arrays, and of 2-D arrays as their columns (``(columns,
    rows)``). A 2-D device array comes over as it lies (a run of rows of a C-contiguous
    array is contiguous: the copy engines' work, with no kernel) and is transposed on the
    host (NumPy, without the interpreter's lock; 12 ms for 833K rows of 9 int32 on one
    core): a transposing kernel, while a build saves, could start only where the build's
    persistent label pass, launched to fill the device, leaves room. Device arrays land in
    ``landing``'s memory when given (valid until its next use)."""
    arrays = list(arrays)
    specs = ([(a.shape, a.dtype) for a in arrays if is_device_array(a)]
             + [(a.shape[::-1], a.dtype) for a in arrays if a.ndim == 2])
    views = iter(landing.arrays(specs) if landing is not None
                 else [np.empty(shape, dt) for shape, dt in specs])
    hosts = [to_host(a, next(views), settings=settings) if is_device_array(a) else np.asarray(a)
             for a in arrays]
    out = []
    for host in hosts:
        if host.ndim == 2:
            columns = next(views)
            np.copyto(columns, host.T)
            host = columns
        out.append(host)
    return out


def mark_ready(a):
    """What :func:`on_own_stream` waits for: for a device array, the work queued so far on
    the current stream (what made ``a`` included); None for a host array."""
    if not is_device_array(a):
        return None
    from ..gpu_transfers import mark

    return mark()


@contextlib.contextmanager
def on_own_stream(ready):
    """Run the block's device work on this thread's own stream, after the work of ``ready``
    (:func:`mark_ready`; None: host arrays, nothing to do). A thread that brings device
    arrays to the host while another thread's kernels run (a build's hub passes, while the
    build writes its file) would otherwise wait for those kernels on the default stream."""
    if ready is None:
        yield
        return
    from ..gpu_transfers import own_stream

    with own_stream(ready):
        yield


def is_device_array(a) -> bool:
    """Whether ``a`` lives on a GPU (a CuPy array)."""
    return not isinstance(a, np.ndarray) and hasattr(a, "get")


class Landing:
    """Host memory that one thread's device-to-host copies land in, call after call: a
    save's parts are copied, encoded and dropped one after the other, and fresh arrays for
    each would fault in (and the kernel zero) fresh pages every time, a large share of a save
    whose allocator holds no free pages yet."""

    #: bytes each array's place is rounded up to (each view starts a multiple of it in)
    ALIGN = 64

    def __init__(self):
        self._buf = np.empty(0, np.uint8)

    def arrays(self, specs) -> list[np.ndarray]:
        """Views of this landing's memory of the given ``(shape, dtype)``, one after the
        other (the memory grows when they do not fit; earlier views stay valid, over the old
        memory)."""
        sizes = [-(-int(np.prod(shape)) * np.dtype(dt).itemsize // self.ALIGN) * self.ALIGN
                 for shape, dt in specs]
        if sum(sizes) > self._buf.nbytes:
            self._buf = np.empty(sum(sizes) + sum(sizes) // 8, np.uint8)
        outs, pos = [], 0
        for (shape, dt), size in zip(specs, sizes):
            n = int(np.prod(shape)) * np.dtype(dt).itemsize
            outs.append(self._buf[pos:pos + n].view(dt).reshape(shape))
            pos += size
        return outs


def copy_into(pairs, staging=None, settings: TransferSettings = TRANSFERS) -> None:
    """``dst[...] = values`` for each ``(dst, values)`` pair of a contiguous host or device
    array ``dst`` and host values. Values reach a device through the pinned buffers of
    :func:`.gpu_transfers.upload` (a pageable copy runs at a few GB/s), one after the other, so small
    ones share a buffer and its wait: those of ``staging`` (:func:`upload_staging`) without
    waiting for the last copy to end, or fresh ones, waiting."""
    pairs = list(pairs)
    if pairs and isinstance(pairs[0][0], np.ndarray):
        for dst, values in pairs:
            dst[...] = values
    elif pairs:
        from ..gpu_transfers import upload

        upload(pairs, settings.chunk_bytes, staging)


def upload_pages(kernels, staging, runs, table, kept: int, scratch: int, err) -> None:
    """A row group's label pages decoded on the device (:func:`.gpu_transfers.upload_pages`; a CPU
    load leaves them to pyarrow: :mod:`grail_duckdb.indexfile.page_plan`)."""
    from ..gpu_transfers import upload_pages as on_device

    on_device(kernels, staging, runs, table, kept, scratch, err)


def upload_staging(xp, settings: TransferSettings = TRANSFERS):
    """Reusable upload buffers for many :func:`copy_into` calls onto arrays of ``xp`` from
    several threads (None for NumPy): the caller synchronizes the device before it reads the
    arrays or drops the staging."""
    if xp is np:
        return None
    from ..gpu_transfers import Staging

    return Staging(settings.chunk_bytes)
