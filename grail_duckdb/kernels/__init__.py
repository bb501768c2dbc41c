"""The kernels and the choice of backend: the GPU when CuPy sees a device, else the CPU.

* :mod:`.protocol`: the :class:`~.protocol.Kernels` interface, every operation the pipeline and
  the queries need, and the data it passes (:class:`~.protocol.CSR`, :class:`~.protocol.TopoOrder`);
* :mod:`.shared`: constants and small functions shared by both backends, written once;
* :mod:`.cpu`: the Numba backend; :mod:`.gpu`: the CuPy + CUDA backend (sources in the
  repository's ``kernels/*.cu``), imported only when a GPU is used.

Choose with ``backend="cpu" | "gpu" | "auto"`` (or a :class:`~.protocol.Kernels` instance) or
the environment variable ``GRAIL_DUCKDB_BACKEND``. Asking for ``gpu`` where there is none is an
error, never a silent fallback.
"""
from __future__ import annotations

import contextlib
import functools
import os

import numpy as np

from ..errors import BackendError
from .cpu import CpuKernels
from .protocol import CSR, Kernels, TopoOrder

__all__ = ["CSR", "CpuKernels", "Kernels", "TopoOrder", "gpu_available", "kernels_for",
           "Landing", "copy_into", "is_device_array", "mark_ready", "on_own_stream", "resolve",
           "to_host", "to_host_all", "to_host_columns", "upload_pages", "upload_staging"]

ENV_VAR = "GRAIL_DUCKDB_BACKEND"


#: device arrays larger than this come to the host (and host arrays to a device) through
#: pinned staging buffers
PINNED_MIN_BYTES = 1 << 20
#: bytes of each of a transfer's two pinned staging buffers: of one size, so that CuPy's
#: pinned pool hands them out again (pinning fresh host memory costs more than the copy), and
#: 16 MiB rather than 4, a fourth of the Python steps per byte: loads of the 2.5B-edge index
#: from memory took 6.4-6.6 s against 6.9-7.5 s in one process (H200 host, 16 threads; README,
#: Scale, stop 28, where the caveats are). They stay in the pool once a save or a load is over (two
#: per thread: 512 MiB from 16 threads), for the next one to take: a save that gave them back
#: made the load after it pin them again, 1.4-2.0x the time of a load after a save that kept
#: them (250M edges, H100 host; README, Scale, stop 29).
#: ``cupy.get_default_pinned_memory_pool().free_all_blocks()`` gives them back.
DOWNLOAD_CHUNK = 1 << 24


def to_host(a, out: np.ndarray | None = None, ready: bool = False) -> np.ndarray:
    """A NumPy array of a host or device (CuPy) array; host arrays are not copied. Device
    arrays over 1 MiB come through pinned buffers (:func:`.gpu.download`: a pageable copy
    runs at a few GB/s, as a save's host copy of a large index showed), into ``out`` when
    given (a C-contiguous host array of ``a``'s shape and type); ``ready``: ``a`` was
    complete before the device's last synchronization (a pinned copy waits for nothing
    else)."""
    if not is_device_array(a):
        return np.asarray(a)
    if a.nbytes > PINNED_MIN_BYTES:
        from .gpu import download

        return download(a, DOWNLOAD_CHUNK, out, ready)
    return a.get(out=out)  # small: it may wait for the current stream


def to_host_all(arrays, landing: Landing | None = None, ready: bool = False
                ) -> list[np.ndarray]:
    """Contiguous NumPy arrays of several host or device arrays (:func:`to_host` each, with
    ``ready``: a save's gathered parts come through the pinned buffers); device arrays land
    in ``landing``'s memory when given (valid until its next use)."""
    arrays = list(arrays)
    pinned = [is_device_array(a) and a.nbytes > PINNED_MIN_BYTES for a in arrays]
    outs = iter(landing.arrays([(a.shape, a.dtype) for a, p in zip(arrays, pinned) if p])
                if landing is not None else [])
    return [to_host(a, next(outs, None) if p else None, ready) if p
            else np.ascontiguousarray(to_host(a, ready=ready)) for a, p in zip(arrays, pinned)]


def to_host_columns(arrays, landing: Landing | None = None) -> list[np.ndarray]:
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
    hosts = [to_host(a, next(views)) if is_device_array(a) else np.asarray(a) for a in arrays]
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
    from .gpu import mark

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
    from .gpu import own_stream

    with own_stream(ready):
        yield


def is_device_array(a) -> bool:
    """Whether ``a`` lives on a GPU (a CuPy array)."""
    return not isinstance(a, np.ndarray) and hasattr(a, "get")


class Landing:
    """Host memory that one thread's device-to-host copies land in, call after call: a
    save's parts are copied, encoded and dropped one after the other, and fresh arrays for
    each would fault in (and the kernel zero) fresh pages every time; the first save after a
    build, whose allocator holds no free pages yet, spent a fourth of its time there (README,
    Scale, stop 28)."""

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


def copy_into(pairs, staging=None) -> None:
    """``dst[...] = values`` for each ``(dst, values)`` pair of a contiguous host or device
    array ``dst`` and host values. Values reach a device through the pinned buffers of
    :func:`.gpu.upload` (a pageable copy runs at a few GB/s), one after the other, so small
    ones share a buffer and its wait: those of ``staging`` (:func:`upload_staging`) without
    waiting for the last copy to end, or fresh ones, waiting."""
    pairs = list(pairs)
    if pairs and isinstance(pairs[0][0], np.ndarray):
        for dst, values in pairs:
            dst[...] = values
    elif pairs:
        from .gpu import upload

        upload(pairs, DOWNLOAD_CHUNK, staging)


def upload_pages(kernels, staging, runs, table, kept: int, scratch: int, err) -> None:
    """A row group's label pages decoded on the device (:func:`.gpu.upload_pages`; a CPU
    load leaves them to pyarrow: :mod:`grail_duckdb.engine.page_plan`)."""
    from .gpu import upload_pages as on_device

    on_device(kernels, staging, runs, table, kept, scratch, err)


def upload_staging(xp):
    """Reusable upload buffers for many :func:`copy_into` calls onto arrays of ``xp`` from
    several threads (None for NumPy): the caller synchronizes the device before it reads the
    arrays or drops the staging."""
    if xp is np:
        return None
    from .gpu import Staging

    return Staging(DOWNLOAD_CHUNK)


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def resolve(name: str | None = None) -> str:
    """'cpu' or 'gpu' for a requested backend name (None: the environment, then 'auto')."""
    if isinstance(name, Kernels):
        return name.name
    name = (name or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if name not in ("auto", "cpu", "gpu"):
        raise BackendError(f"unknown backend {name!r}; use 'cpu', 'gpu' or 'auto'")
    if name == "auto":
        return "gpu" if gpu_available() else "cpu"
    if name == "gpu" and not gpu_available():
        raise BackendError(
            "backend 'gpu' was requested but no CUDA device is visible to CuPy; install the "
            "gpu extra (pip install 'grail_duckdb[gpu]') on a machine with an NVIDIA GPU, or use "
            "backend='cpu'"
        )
    return name


def kernels_for(backend=None) -> Kernels:
    """The kernels of a backend: a :class:`Kernels` instance is returned as it is; a name gets
    the backend's shared default instance (GPU modules are compiled once per process)."""
    if isinstance(backend, Kernels):
        return backend
    return _default_kernels(resolve(backend))


@functools.lru_cache(maxsize=2)
def _default_kernels(which: str) -> Kernels:
    if which == "gpu":
        from .gpu import GpuKernels  # CuPy: optional, imported only where a GPU is used

        return GpuKernels()
    return CpuKernels()
