"""Packed edges -> forward and reverse rows (CSR), on the backend.

Both directions come from one array of packed edges (``src << 32 | dst``, uint64), which the
backend consumes (:meth:`~grail_duckdb.kernels.protocol.Kernels.csr_both_ways`): the GPU sorts
it in place, swaps its halves and sorts it again (one 64-bit copy of the edge list plus the
sort's scratch); the CPU counts it into rows and reverses those rows, using the packed edges as
the reversal's scratch. Either way the two CSRs take 4 bytes per edge each.

>>> import numpy as np
>>> from grail_duckdb.kernels import CpuKernels
>>> from grail_duckdb.kernels.shared import pack_pairs
>>> fwd, rev = forward_and_reverse(CpuKernels(), pack_pairs(np, [0, 0, 1, 2, 0], [2, 1, 2, 2, 2]), 3)
>>> fwd.indptr.tolist(), fwd.indices.tolist(), rev.indices.tolist()
([0, 2, 3, 3], [1, 2, 2], [0, 0, 1])
"""
from __future__ import annotations

from ..kernels.protocol import CSR, Kernels
from ..kernels.shared import swap_pairs

__all__ = ["CSR", "forward_and_reverse", "swap_pairs"]


def forward_and_reverse(kernels: Kernels, pairs, n: int) -> tuple[CSR, CSR]:
    """Both directions of packed edges; ``pairs`` is consumed (reordered and overwritten)."""
    return kernels.csr_both_ways(pairs, n)
