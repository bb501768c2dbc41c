"""Choosing where the index is built and searched: the GPU when CuPy sees a device, else CPU.

Override with ``backend="cpu" | "gpu" | "auto"`` or the environment variable
``GRAIL_DUCKDB_BACKEND``. Asking for ``gpu`` where there is none is an error, never a silent
fallback.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from .errors import BackendError
from .kernels import CpuKernels

ENV_VAR = "GRAIL_DUCKDB_BACKEND"


def to_host(a) -> np.ndarray:
    """A NumPy array of a host or device (CuPy) array; host arrays are not copied."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


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


@functools.lru_cache(maxsize=2)
def kernels_for(name: str | None = None):
    """The kernel object of a backend (cached: GPU modules are compiled once per process)."""
    which = resolve(name)
    if which == "gpu":
        from .kernels.gpu import GpuKernels

        return GpuKernels()
    return CpuKernels()
