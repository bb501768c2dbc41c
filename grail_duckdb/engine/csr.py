"""Packed edges of dense ids -> compressed sparse rows, forward and reverse.

The :class:`CSR` layout itself is defined with the kernel interface
(:class:`grail_duckdb.kernels.protocol.CSR`), since every kernel reads it. Rows come out with
their targets sorted, self-loops and duplicate edges dropped (neither changes reachability), so
the rows depend on the set of edges alone.

Memory: the edges arrive as one uint64 per edge (``src << 32 | dst``). The forward
rows are made from them (the GPU sorts them in place), the halves are swapped in place, and the
reverse rows are made from the same array: one 64-bit copy of the edge list, plus the sort's
scratch, and the two CSRs (4 bytes per edge each).

>>> import numpy as np
>>> from grail_duckdb.kernels import CpuKernels
>>> from grail_duckdb.kernels.shared import pack_pairs
>>> fwd, rev = forward_and_reverse(CpuKernels(), pack_pairs(np, [0, 0, 1, 2, 0], [2, 1, 2, 2, 2]), 3)
>>> fwd.indptr.tolist(), fwd.indices.tolist(), rev.indices.tolist()
([0, 2, 3, 3], [1, 2, 2], [0, 0, 1])
"""
from __future__ import annotations

from ..kernels.protocol import CSR, Kernels

__all__ = ["CSR", "forward_and_reverse", "swap_pairs"]

#: packed edges swapped per step (bounds the temporaries)
_STEP = 1 << 26


def swap_pairs(xp, pairs) -> None:
    """``src << 32 | dst`` -> ``dst << 32 | src``, in place, slice by slice."""
    for lo in range(0, pairs.shape[0], _STEP):
        part = pairs[lo:lo + _STEP]
        xp.bitwise_or(part << xp.uint64(32), part >> xp.uint64(32), out=part)


def forward_and_reverse(kernels: Kernels, pairs, n: int) -> tuple[CSR, CSR]:
    """Both directions of packed edges; ``pairs`` is consumed (reordered and swapped)."""
    fwd = CSR(*kernels.csr_of_pairs(pairs, n))
    swap_pairs(kernels.xp, pairs)
    rev = CSR(*kernels.csr_of_pairs(pairs, n))
    return fwd, rev
