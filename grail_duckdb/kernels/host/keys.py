"""Query keys as the host kernels read them: a column of any of the kernels' integer types.

The fused classification (:mod:`grail_duckdb.kernels.cpu.classify`) and the GPU's staging pass
(:mod:`.staging`) read a key column as it lies: int32, int64, uint32 or uint64, contiguous or
strided (:data:`KEY_TYPES`; Numba compiles one specialization per type and layout, on first
use). The 8- and 16-bit types reach the staging pass as they lie too (its copy widens them);
the classification reads them widened to int32 (:func:`widened`), a copy that costs little
beside its work on the host. Each key is read as ``np.int64(k)`` (exact but for uint64 keys
above 2**63 - 1, which wrap) beside :func:`above_int64` (true for exactly those keys: they
are never vertices, whose keys are int64).

A batch of pairs reaches the kernels as ``(ks, kt)``, two tuples of equally long pieces
(:func:`pieces_of`): piece i of both sides covers the same rows, of one type and one layout
(the chunks of an Arrow column, cut where either side's chunks end).
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["KEY_TYPES", "NARROW_TYPES", "KeysBeyondInt64", "above_int64", "or_bits",
           "pieces_length", "pieces_of", "read_only", "widened"]

#: the key types every kernel reads
KEY_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))
#: the key types the staging pass reads as they lie and the classification widened
NARROW_TYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16))
_INT64_MAX = np.uint64(np.iinfo(np.int64).max)


class KeysBeyondInt64(Exception):
    """A batch's uint64 keys include some above 2**63 - 1, which a staged int64 key cannot
    tell apart from a negative one: the engine answers such a call with those keys masked
    (they are never vertices)."""


def above_int64(k) -> bool:
    """Whether the key ``k`` lies above 2**63 - 1 (only a uint64 key can), in a kernel."""
    return k > np.iinfo(np.int64).max


@overload(above_int64, jit_options={"cache": True})
def _above_int64(k):
    if isinstance(k, types.Integer) and not k.signed and k.bitwidth == 64:
        return lambda k: k > _INT64_MAX
    return lambda k: False


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the kernels never write keys; one flag for every input, so
    that an Arrow buffer and a NumPy array of one type share one compiled specialization)."""
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


def pieces_of(ks) -> tuple:
    """``ks`` as a tuple of pieces (an array is one piece)."""
    return ks if isinstance(ks, tuple) else (ks,)


def widened(pieces: tuple) -> tuple:
    """``pieces`` with the 8- and 16-bit ones as int32 (the classification's key types)."""
    if all(p.dtype.itemsize >= 4 for p in pieces):
        return pieces
    return tuple(read_only(p.astype(np.int32)) if p.dtype.itemsize < 4 else p for p in pieces)


def pieces_length(ks) -> int:
    """Rows of a batch's keys (an array or a tuple of pieces)."""
    return int(sum(p.shape[0] for p in pieces_of(ks)))


def or_bits(bits: np.ndarray, at: int, part: np.ndarray, n: int) -> None:
    """OR ``n`` answer bits (Arrow's order, bit j of ``part`` for row ``at + j``; the bits past
    ``n`` in its last byte 0) into the bitmap ``bits`` at row ``at``.

    >>> bits = np.zeros(2, np.uint8)
    >>> or_bits(bits, 3, np.array([0b11111], np.uint8), 5)
    >>> or_bits(bits, 8, np.array([1], np.uint8), 1)
    >>> [format(int(b), "08b") for b in bits]
    ['11111000', '00000001']
    """
    if n == 0:
        return
    r = at & 7
    first = at >> 3
    if r == 0:
        bits[first:first + part.shape[0]] |= part
        return
    wide = part.astype(np.uint16) << r
    end = (at + n + 7) >> 3
    low = wide.astype(np.uint8)
    bits[first:first + low.shape[0]] |= low[:end - first]
    high = (wide >> 8).astype(np.uint8)
    bits[first + 1:end] |= high[:end - first - 1]
