"""The kernels and the choice of backend: the GPU when CuPy sees a device, else the CPU.

* :mod:`.protocol`: the :class:`~.protocol.Kernels` interface, every operation the pipeline and
  the queries need, and the data it passes (:class:`~.protocol.CSR`, :class:`~.protocol.TopoOrder`);
* :mod:`.shared`: constants and small functions shared by both backends, written once;
* :mod:`.host`: host-side helpers both backends use: transfers between host and device
  (:mod:`.host.transfers`), the staging of query keys and build edges
  (:mod:`.host.staging`), the worker count and the lock around parallel regions;
* :mod:`.cpu`: the Numba backend; :mod:`.gpu`: the CuPy + CUDA backend (sources in the
  repository's ``kernels/*.cu``), imported only when a GPU is used.

Choose with ``backend="cpu" | "gpu" | "auto"`` (or a :class:`~.protocol.Kernels` instance) or
the environment variable ``GRAIL_DUCKDB_BACKEND``. Asking for ``gpu`` where there is none is an
error, never a silent fallback.
"""
from __future__ import annotations

import functools
import os

from ..errors import BackendError
from .cpu import CpuKernels, CpuSettings
from .host import (Landing, TransferSettings, copy_into, is_device_array, mark_ready,
                   on_own_stream, to_host, to_host_all, to_host_columns, upload_pages,
                   upload_staging)
from .protocol import CSR, Kernels, TopoOrder

__all__ = ["CSR", "CpuKernels", "CpuSettings", "Kernels", "TopoOrder", "TransferSettings", "gpu_available",
           "kernels_for", "Landing", "copy_into", "is_device_array", "mark_ready",
           "on_own_stream", "resolve", "to_host", "to_host_all", "to_host_columns",
           "upload_pages", "upload_staging"]

ENV_VAR = "GRAIL_DUCKDB_BACKEND"


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
