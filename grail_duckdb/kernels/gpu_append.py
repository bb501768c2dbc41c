"""The appends' operation of the kernel interface on the GPU (``kernels/append.cu``; the CPU
twin is :mod:`grail_duckdb.kernels.cpu.append`)."""
from __future__ import annotations

import cupy as cp
import numpy as np

from .protocol import CSR, TopoOrder


class GpuAppend:
    """:meth:`append_fold` and :meth:`gather_labels` of
    :class:`grail_duckdb.kernels.protocol.Kernels` on the GPU. Needs ``_launch(...)`` from its
    subclass."""

    def gather_labels(self, lab, ids, inner, outer, down, wdown, base):
        cp.take(lab.inner, ids, axis=0, out=inner)
        cp.take(lab.outer, ids, axis=0, out=outer)
        cp.take(lab.hub_down, ids, axis=0, out=down)
        if lab.win_down is not None and wdown.shape[1]:
            cp.take(lab.win_down, ids, axis=0, out=wdown)
            first = cp.asarray(lab.win_first, cp.int32)
            base[...] = first[cp.clip(lab.level[ids], 0, int(first.shape[0]) - 1)]

    def append_fold(self, rows: CSR, topo: TopoOrder, inner, outer, down, wdown, base, span):
        if not topo.levels:
            return
        wwords = int(wdown.shape[1])
        self._launch("append_fold_kernel", np.int32(topo.levels), np.int32(inner.shape[1]),
                     np.int32(down.shape[1]), np.int32(wwords), np.int32(span), rows.indptr,
                     rows.indices, cp.asarray(topo.order, cp.int32),
                     cp.asarray(topo.offsets, cp.int32), cp.asarray(base, cp.int32), inner,
                     outer, down, wdown if wwords else np.uint64(0))
