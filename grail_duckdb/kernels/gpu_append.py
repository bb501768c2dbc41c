"""The appends' operation of the kernel interface on the GPU (``kernels/append.cu``; the CPU
twin is :mod:`grail_duckdb.kernels.cpu.append`)."""
from __future__ import annotations

import cupy as cp
import numpy as np

from .protocol import CSR, TopoOrder


class GpuAppend:
    """:meth:`append_fold` of :class:`grail_duckdb.kernels.protocol.Kernels` on the GPU. Needs
    ``_launch(...)`` from its subclass."""

    def append_fold(self, rows: CSR, topo: TopoOrder, inner, outer, down, wdown, base, span):
        if not topo.levels:
            return
        wwords = int(wdown.shape[1])
        self._launch("append_fold_kernel", np.int32(topo.levels), np.int32(inner.shape[1]),
                     np.int32(down.shape[1]), np.int32(wwords), np.int32(span), rows.indptr,
                     rows.indices, cp.asarray(topo.order, cp.int32),
                     cp.asarray(topo.offsets, cp.int32), cp.asarray(base, cp.int32), inner,
                     outer, down, wdown if wwords else np.uint64(0))
