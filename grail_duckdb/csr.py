"""Compressed sparse rows: the one graph layout every stage and both backends share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CSR:
    """Out-neighbours of vertex v are ``indices[indptr[v]:indptr[v + 1]]``.

    ``indptr`` is int64 (n + 1), ``indices`` int32 (m); both live on the backend that built
    them (NumPy or CuPy arrays).
    """

    indptr: Any
    indices: Any

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0]) - 1

    @property
    def m(self) -> int:
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes)


def forward_and_reverse(kernels, src, dst, n: int) -> tuple[CSR, CSR]:
    """Both directions of an edge list of dense ids; self-loops dropped, duplicates kept."""
    fwd = CSR(*kernels.csr(src, dst, n))
    rev = CSR(*kernels.csr(dst, src, n))
    return fwd, rev
