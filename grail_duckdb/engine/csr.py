"""Edge list of dense ids -> compressed sparse rows, forward and reverse.

The :class:`CSR` layout itself is defined with the kernel interface
(:class:`grail_duckdb.kernels.protocol.CSR`), since every kernel reads it.
"""
from __future__ import annotations

from ..kernels.protocol import CSR, Kernels

__all__ = ["CSR", "forward_and_reverse"]


def forward_and_reverse(kernels: Kernels, src, dst, n: int) -> tuple[CSR, CSR]:
    """Both directions of an edge list of dense ids; self-loops dropped, duplicates kept."""
    fwd = CSR(*kernels.csr(src, dst, n))
    rev = CSR(*kernels.csr(dst, src, n))
    return fwd, rev
