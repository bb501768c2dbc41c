"""How many vertices each vertex reaches, and how many reach it: the influence of every paper.

``reaches(v)`` is the number of vertices w != v with a directed path v -> w, ``reached_by(v)``
the number of u != v with a path u -> v. A vertex of a strongly connected component of k
vertices reaches the k - 1 others of it (and is reached by them), and everything its
component reaches; itself it never counts, also when a cycle passes through it. So
``reaches(v)`` is ``descendants_count(v) - 1`` and ``reached_by(v)`` is
``ancestors_count(v) - 1`` for every vertex v.

Two ways to count, swept over the condensed DAG, children before parents (its reverse for
``reached_by``), on the index's backend:

* **exact**: the components get a bit each, 64 * ``words`` at a time (a batch); each
  component's bits are its own and its children's, and its count adds the vertices of the
  batch's components whose bits it holds. A component earlier in the order than a batch's
  first reaches none of it, so a batch sweeps only from there on. The work is about
  ``components / 64`` words times the DAG's edges and components, each way
  (:func:`exact_work`): quadratic in the graph, which is why there is
* **approximate**: a HyperLogLog sketch of ``2**precision`` one-byte registers per component
  (each vertex hashed once), joined over the same sweep by register-wise maxima; the estimate
  (with the small-range correction, linear counting) has a relative standard error of
  ``1.04 / sqrt(2**precision)`` (:func:`relative_error`: 6.5% at the default precision 8), and
  is exact in expectation only; the result's ``rel_error`` column states it. Where the
  registers of every component do not fit the backend's room (:func:`sketch_plan`: a
  device's free memory), they are swept in slices, a sweep each (a register depends on its
  own vertices alone, and the estimate on sums over the registers, which add up), up to
  ``CountSettings.max_slices``; past that the sketches take a lower precision, each step
  halving them, and ``rel_error`` states the error of the precision that ran. The registers'
  sums are exact integers on both backends and the estimates are made from them on the host,
  so both backends give the same numbers.

``mode='auto'`` counts exactly while :func:`exact_work` stays under the backend's budget
(:class:`CountSettings`), else approximately; the result's ``mode`` column says which ran.

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3, 3], [2, 3, 2, 4], backend="cpu")
>>> t = idx.reach_counts()
>>> t.column("key").to_pylist(), t.column("reaches").to_pylist(), t.column("reached_by").to_pylist()
([1, 2, 3, 4], [3, 2, 2, 0], [0, 2, 2, 3])
>>> t.column("mode").to_pylist()[0]
'exact'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..kernels import to_host

__all__ = ["CountSettings", "DEFAULT_PRECISION", "exact_work", "reach_counts", "relative_error"]

#: registers per sketch, as a power of two: 256 one-byte registers per component, a relative
#: standard error of 6.5%
DEFAULT_PRECISION = 8
#: the precisions a sketch may take (16 to 65,536 registers)
PRECISIONS = range(4, 17)
MODES = ("auto", "exact", "approximate")


@dataclass(frozen=True)
class CountSettings:
    """Knobs of :func:`reach_counts`, per backend: ``exact_cpu`` / ``exact_gpu``, the word
    operations of the exact sweep below which 'auto' counts exactly (two CPU cores sweep
    about 1.2e9 words a second: cit-HepTh's 9.5e7 in 0.08 s; an H200 about 1e11:
    gen:citation:3774768's 2.4e12 in 27.5 s); ``bits_cpu`` / ``bits_gpu``, the bytes of bit
    rows the exact sweep holds at once (all threads together, or on the device);
    ``sketch_share``, the share of a device's free memory the sketches may take."""

    exact_cpu: float = 1e10
    exact_gpu: float = 3e12
    bits_cpu: int = 1 << 30
    bits_gpu: int = 16 << 30
    #: the share of the device's free memory the sketches' registers may take
    sketch_share: float = 0.9
    #: the sweeps of register slices a sketch may take before its precision steps down (each
    #: slice is a sweep of its own over the whole DAG)
    max_slices: int = 2

    def exact_budget(self, backend: str) -> float:
        return self.exact_gpu if backend == "gpu" else self.exact_cpu

    def bits_budget(self, backend: str) -> int:
        return self.bits_gpu if backend == "gpu" else self.bits_cpu


def relative_error(precision: int) -> float:
    """The relative standard error of a HyperLogLog estimate of ``2**precision`` registers.

    >>> round(relative_error(8), 4)
    0.065
    """
    return 1.04 / math.sqrt(1 << precision)


def exact_work(index) -> float:
    """Word operations of the exact sweep of ``index``, both ways (see the module)."""
    nc = index.n_components
    return 2.0 * math.ceil(nc / 64) * (index.dag.m + nc)


def reach_counts(index, mode: str = "auto", precision: int = DEFAULT_PRECISION,
                 words: int | None = None, settings: CountSettings | None = None) -> pa.Table:
    """Per vertex: ``key``, ``reaches``, ``reached_by`` (int64, itself excluded), ``mode``
    ('exact' or 'approximate': which ran) and ``rel_error`` (0 when exact, else the sketch's
    relative standard error), in key order. ``words``: 64-bit words per component of an exact
    batch (default: as many as the bits' memory budget allows, spread over the threads)."""
    settings = settings or CountSettings()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if int(precision) not in PRECISIONS:
        raise ValueError(f"precision must be from {PRECISIONS[0]} to {PRECISIONS[-1]} "
                         f"(2**precision registers per sketch), got {precision!r}")
    k = index.kernels
    exact = mode == "exact" or (mode == "auto"
                                and exact_work(index) <= settings.exact_budget(k.name))
    qi = index.query_index(need_reverse=True)
    down, up = _orders(k, qi.labels.level)
    nc = index.n_components
    comp = None if nc == index.n_vertices else qi.comp
    if exact:
        sizes = k.xp.ones(nc, k.xp.int64) if comp is None else k.xp.bincount(comp, minlength=nc)
        w = words or _words(k, nc, settings.bits_budget(k.name))
        ahead = to_host(k.count_reached(qi.dag, *down, sizes, w))
        behind = to_host(k.count_reached(qi.rev, *up, sizes, w))
        err = 0.0
    else:
        precision, slices = sketch_plan(k, nc, int(precision), settings)
        ahead = _estimates(_sketch_sums(k, qi.dag, down, comp, nc, precision, slices),
                           precision)
        behind = _estimates(_sketch_sums(k, qi.rev, up, comp, nc, precision, slices),
                            precision)
        err = relative_error(precision)
    hc = None if comp is None else to_host(comp)
    n = index.n_vertices
    return pa.table({
        "key": index.ids.keys,
        "reaches": pa.array(_per_vertex(ahead, hc)),
        "reached_by": pa.array(_per_vertex(behind, hc)),
        "mode": _constant("exact" if exact else "approximate", n),
        "rel_error": pa.array(np.full(n, err), pa.float64()),
    })


def sketch_plan(k, n_components: int, precision: int,
                settings: CountSettings) -> tuple[int, int]:
    """``(precision, slices)`` of the sketches: ``precision`` in one sweep where its
    registers (``2**precision`` bytes and 12 bytes of sums per component) fit the backend's
    room, else in the fewest slices (a power of two, at most ``settings.max_slices``) whose
    registers do, else the largest lower precision that fits in as many. The room: on a GPU,
    ``settings.sketch_share`` of the device's free memory (2.5 billion citations: 250
    million components, 64 GB of registers at precision 8 beside an index of 86 GB on a 141
    GB device: two slices); the host's memory is not bounded here. Raises MemoryError where
    even the lowest precision does not fit."""
    if k.name != "gpu":
        return precision, 1
    import cupy

    free = cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()
    room = int(free * settings.sketch_share)

    def fits(p, s):
        return n_components * ((1 << p) // s + 12) <= room

    p = precision
    while True:
        s = 1
        while not fits(p, s) and 2 * s <= min(settings.max_slices, (1 << p) // 4):
            s *= 2
        if fits(p, s):
            return p, s
        if p == PRECISIONS[0]:
            raise MemoryError(
                f"the reach counts' sketches of {n_components:,} components need "
                f"{n_components * ((1 << p) // s + 12):,} bytes of device memory even at "
                f"precision {p} in {s} slices; {room:,} are free: free device memory, or count "
                "on the CPU backend")
        p -= 1


def _sketch_sums(k, g, order, comp, nc: int, precision: int, slices: int) -> tuple:
    """The sketches' sums ``(s1, zeros)`` (host) over ``g`` in ``order`` (``(order,
    offsets)``), their registers swept in ``slices`` equal slices, the slices' sums added."""
    if slices == 1:
        return tuple(to_host(a) for a in k.sketch_reached(g, *order, comp, nc, precision))
    count = (1 << precision) // slices
    s1, zeros = np.zeros(nc, np.uint64), np.zeros(nc, np.int32)
    for i in range(slices):
        a, z = k.sketch_reached(g, *order, comp, nc, precision, (i * count, count))
        s1 += to_host(a)
        zeros += to_host(z)
    return s1, zeros


def _per_vertex(counts: np.ndarray, comp) -> np.ndarray:
    """Each vertex's count, itself excluded: its component's count less one (``comp``: the
    component of each vertex, or None where each vertex is one). ``counts`` is the caller's
    to give up: where it is already one int64 per vertex it is shifted in place."""
    out = (counts if comp is None else counts[comp]).astype(np.int64, copy=False)
    out -= 1
    np.maximum(out, 0, out=out)
    return out


def _constant(text: str, n: int) -> pa.DictionaryArray:
    """``n`` rows of ``text``, dictionary-encoded (DuckDB reads it as VARCHAR): one byte a
    row, where a list of ``n`` Python strings takes seconds at 10^8 vertices.

    >>> _constant("exact", 3).to_pylist()
    ['exact', 'exact', 'exact']
    """
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array([text]))


def _orders(k, level) -> tuple[tuple, tuple]:
    """``(order, offsets)`` of the components children first (deepest level first) and
    parents first, offsets delimiting the levels (no DAG edge inside a level)."""
    xp = k.xp
    if level.shape[0] == 0:
        empty = (xp.zeros(0, xp.int32), np.zeros(1, np.int64))
        return empty, empty
    up = xp.argsort(level, kind="stable").astype(xp.int32)
    per_level = to_host(xp.bincount(level)).astype(np.int64)
    offsets = np.zeros(per_level.shape[0] + 1, np.int64)
    np.cumsum(per_level, out=offsets[1:])
    down_offsets = offsets[-1] - offsets[::-1]
    return (up[::-1].copy(), down_offsets), (up, offsets)


def _words(k, nc: int, budget: int) -> int:
    """Words per component of an exact batch: the components spread over the threads (the
    CPU's batches go to its threads) within ``budget`` bytes of bit rows."""
    workers = k.threads if k.name == "cpu" else 1
    want = max(1, -(-nc // (64 * workers)))
    room = max(1, budget // max(1, 8 * nc * workers))
    return int(min(want, room))


def _estimates(sums, precision: int) -> np.ndarray:
    """HyperLogLog estimates (float64) of the sketches' exact sums ``(s1, zeros)``."""
    s1, zeros = (to_host(a) for a in sums)
    m = 1 << precision
    alpha = {16: 0.673, 32: 0.697, 64: 0.709}.get(m, 0.7213 / (1 + 1.079 / m))
    z = s1.astype(np.float64) * 2.0 ** -(64 - precision) + zeros
    est = alpha * m * m / np.maximum(z, 1e-300)
    small = (est <= 2.5 * m) & (zeros > 0)
    est[small] = m * np.log(m / zeros[small])
    return np.rint(est).astype(np.int64)
