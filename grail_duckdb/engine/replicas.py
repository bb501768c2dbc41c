"""Several GPUs of one host: a replica of the index on each, the pairs of a call split across
them.

The index is read from its Parquet file once (host arrays) and moved to every device, each
with its own kernels (its own compiled module and launch sizes) and its own key lookup, so
that nothing is shared between devices. A call cuts its two key columns into one contiguous
slice per replica, answers the slices in parallel threads (each under its device; the kernels
and the copies release the GIL) and joins the answers in order: the same answers as one index.

The build stays on one GPU. A graph whose index does not fit one GPU's memory would need the
index itself split: the condensed DAG partitioned by vertex ranges across the devices, every
query classified where its source lives (the cuts read only the two endpoints' labels, which
can be replicated: ~100 bytes per component), and the search's frontier exchanged between
devices after every level (NCCL all-to-all of the bit masks) - a distributed multi-source BFS.

>>> import numpy as np, tempfile, os, grail_duckdb as gd
>>> path = os.path.join(tempfile.mkdtemp(), "g.grail.parquet")
>>> _ = gd.build_index([1, 2, 3], [2, 3, 4], backend="cpu").save(path)
>>> r = Replicas.load(path, backend="cpu", count=2)
>>> r.reaches([1, 4, 2, 3], [4, 1, 3, 3]).to_pylist()
[True, False, True, True]
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from ..kernels import CpuKernels, resolve
from .. import indexfile
from .index import GrailIndex, _on_backend
from .ingest import as_column


@dataclass
class Replica:
    """One copy of the index and the device it lives on (None: the CPU)."""

    index: GrailIndex
    device: int | None

    def context(self):
        if self.device is None:
            return contextlib.nullcontext()
        import cupy

        return cupy.cuda.Device(self.device)


class Replicas:
    """The same index on several devices; :meth:`reaches` splits each call across them."""

    def __init__(self, replicas: list[Replica]):
        if not replicas:
            raise ValueError("Replicas needs at least one replica")
        self.replicas = replicas
        self.last_stats = None

    @classmethod
    def load(cls, path, *, devices=None, backend=None, count: int | None = None) -> "Replicas":
        """Load the index file once and place a replica on each GPU (``devices``: their
        numbers, default all), or ``count`` replicas on the CPU with ``backend='cpu'``."""
        stored = vars(indexfile.load(path))
        if resolve(backend) == "cpu":
            devices = [None] * (count or 1)
        elif devices is None:
            import cupy

            devices = list(range(cupy.cuda.runtime.getDeviceCount()))
        return cls([_replica(stored, dev) for dev in devices])

    def __len__(self) -> int:
        return len(self.replicas)

    def reaches(self, src, dst) -> pa.BooleanArray:
        """Answers of whole key columns (see :meth:`GrailIndex.reaches`), the rows split into
        one contiguous slice per replica, answered in parallel."""
        src, dst = as_column(src, "source"), as_column(dst, "destination")
        if len(src) != len(dst):
            raise ValueError(f"src and dst differ in length ({len(src)} vs {len(dst)})")
        k = len(self.replicas)
        bounds = [len(src) * i // k for i in range(k + 1)]

        def answer(i):
            rep = self.replicas[i]
            lo, hi = bounds[i], bounds[i + 1]
            with rep.context():
                return rep.index.reaches_with_stats(src.slice(lo, hi - lo), dst.slice(lo, hi - lo))

        with ThreadPoolExecutor(k) as pool:
            parts = list(pool.map(answer, range(k)))
        self.last_stats = [stats for _, stats in parts]
        return pa.concat_arrays([a for a, _ in parts])


def _replica(stored, device) -> Replica:
    """A :class:`GrailIndex` of the stored fields (:func:`grail_duckdb.indexfile.load`) on one device
    (its own kernels and key lookup, made under that device)."""
    placeholder = Replica(None, device)
    with placeholder.context():
        if device is None:
            kernels = CpuKernels()
        else:
            from ..kernels.gpu import GpuKernels

            kernels = GpuKernels()
        fields = {**stored, "ids": stored["ids"].fresh()}
        index = _on_backend(kernels, **fields)
    return Replica(index, device)
