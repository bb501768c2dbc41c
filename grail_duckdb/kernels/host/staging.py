"""Host-side staging for the GPU. Of a query batch: the two key columns copied into one pinned
buffer (sources, then targets), so that one DMA uploads both.

Narrow form: when every key k of the batch lies in ``[offset, offset + 2**31 - 1)`` (a dense
lookup table's range: every known key does), the buffer holds ``k - offset`` as int32, half
the bytes to upload; the kernel then looks ``k - offset`` up directly, and equal staged values
still mean equal keys. Otherwise the keys go as int64 (wide form). The keys are read where they
lie: any key type and layout of :mod:`.keys`, the pieces of a chunked column one after the
other; this pass is their one copy.

A single thread copies about 10 GB/s; the copy of a large batch costs more than everything the
device does with it, so batches of ``PARALLEL_MIN`` keys or more are staged by every core.

Of the build's edges (:func:`pack_key_offsets`): each piece of the input packed straight into
the build's array of edges (a pinned buffer uploaded by :mod:`grail_duckdb.engine.transfer`,
or the host array itself on the CPU backend), one piece per worker thread.
"""
from __future__ import annotations

import contextlib

import numpy as np
from numba import carray, prange, types
from numba.extending import intrinsic

from ...jit import njit

from .keys import KeysBeyondInt64, above_int64, pieces_length, pieces_of

#: columns shorter than this are staged on the calling thread
PARALLEL_MIN = 1 << 16
#: a piece of a batch of PARALLEL_MIN keys or more is staged by every core from this many on
PIECE_MIN = 1 << 12
#: keys per parallel task (small: a 100K-pair batch then spreads over every core)
STAGE_BLOCK = 1 << 11
#: staged narrow keys are below this (int32, and not -1 - ...: every value is a key offset)
_NARROW_END = (1 << 31) - 1
_NO_VALID = np.zeros(0, np.uint8)


@njit(cache=True, nogil=True, boundscheck=False)
def _narrow_block(src, lo, hi, offset, out, base, valid, vbase):
    """out[base + j] = src[j] - offset for j in [lo, hi); the number of keys that do not fit
    (a key of a NULL row, ``valid[vbase + j]`` 0, always fits: its row is not read)."""
    bad = 0
    check = valid.shape[0] != 0
    for j in range(lo, hi):
        raw = src[j]
        k = np.int64(raw)
        x = k - offset
        fits = (k >= offset) & (x >= 0) & (x < _NARROW_END) & (not above_int64(raw))
        bad += not (fits or (check and valid[vbase + j] == 0))
        out[base + j] = np.int32(x)
    return bad


@njit(cache=True, nogil=True, boundscheck=False)
def _wide_block(src, lo, hi, out, base, valid, vbase):
    """out[base + j] = src[j] as int64 for j in [lo, hi); the number of keys above 2**63 - 1
    (of rows that are not NULL), which wrap."""
    big = 0
    check = valid.shape[0] != 0
    for j in range(lo, hi):
        raw = src[j]
        big += above_int64(raw) and not (check and valid[vbase + j] == 0)
        out[base + j] = np.int64(raw)
    return big


@njit(cache=True, nogil=True, boundscheck=False)
def _stage_serial(a, b, narrow, offset, out, at, total, valid):
    """Pieces a, b (rows ``at`` .. of a batch of ``total`` pairs) staged narrow or wide on the
    calling thread: the count of keys that do not fit (narrow) or lie above 2**63 - 1 (wide)."""
    n = a.shape[0]
    if narrow:
        return (_narrow_block(a, 0, n, offset, out, at, valid, at)
                + _narrow_block(b, 0, n, offset, out, total + at, valid, at))
    return _wide_block(a, 0, n, out, at, valid, at) + _wide_block(b, 0, n, out, total + at, valid,
                                                                  at)


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def _stage_parallel(a, b, narrow, offset, out, at, total, valid, block):
    """:func:`_stage_serial` on every core, in blocks of ``block`` keys."""
    n = a.shape[0]
    blocks = (n + block - 1) // block
    bad = 0
    for i in prange(2 * blocks):
        lo = (i % blocks) * block
        hi = min(lo + block, n)
        src = a if i < blocks else b
        base = at if i < blocks else total + at
        if narrow:
            bad += _narrow_block(src, lo, hi, offset, out, base, valid, at)
        else:
            bad += _wide_block(src, lo, hi, out, base, valid, at)
    return bad


@intrinsic
def _pointer_to(typingctx, address, like):
    """``address`` (an int64) as a pointer to elements of the array ``like``'s type."""
    ptr = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr))

    return ptr(address, like), codegen


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def _stage_pieces(where, like, narrow, offset, out, total, valid, table):
    """Contiguous pieces of one type, both sides, staged on every core in one parallel loop
    (one loop per piece costs each piece the pool's start: about 25 us on 16 cores, twice
    the staging of a DuckDB chunk): ``where[c]`` = (address of side a's piece c, of side
    b's, its length, its first row), ``table`` one row (piece, lo, hi) per block of keys."""
    blocks = table.shape[0]
    bad = 0
    for i in prange(2 * blocks):
        c, lo, hi = table[i % blocks, 0], table[i % blocks, 1], table[i % blocks, 2]
        side = i // blocks
        src = carray(_pointer_to(where[c, side], like), (where[c, 2],))
        at = where[c, 3]
        base = at + side * total
        if narrow:
            bad += _narrow_block(src, lo, hi, offset, out, base, valid, at)
        else:
            bad += _wide_block(src, lo, hi, out, base, valid, at)
    return bad


def _one_loop(a: tuple, b: tuple):
    """``(where, table)`` of :func:`_stage_pieces` for pieces that it can read (all
    contiguous, all of one type), else None."""
    kind = a[0].dtype
    if not all(p.dtype == kind and p.flags.c_contiguous for p in a + b):
        return None
    lengths = np.array([p.shape[0] for p in a], np.int64)
    where = np.empty((len(a), 4), np.int64)
    where[:, 0] = [p.ctypes.data for p in a]
    where[:, 1] = [p.ctypes.data for p in b]
    where[:, 2] = lengths
    where[:, 3] = np.cumsum(lengths) - lengths
    per = -(-lengths // STAGE_BLOCK)
    piece = np.repeat(np.arange(len(a), dtype=np.int64), per)
    lo = (np.arange(piece.shape[0], dtype=np.int64) - np.repeat(np.cumsum(per) - per, per))
    lo *= STAGE_BLOCK
    table = np.stack([piece, lo, np.minimum(lo + STAGE_BLOCK, lengths[piece])], axis=1)
    return where, table


def stage_pairs(a, b, out: np.ndarray, offset: int | None, lock=None, valid=None) -> bool:
    """Stage the key columns a, b of a batch of n pairs into the byte buffer ``out``: narrow
    (int32 ``k - offset``, 8n bytes) when ``offset`` is given and every key fits, else wide
    (int64 keys, 16n bytes). Returns True for the wide form. ``a``, ``b``: arrays or tuples of
    pieces (:mod:`.keys`: any key type and layout, read where they lie); ``valid``: None or
    one byte per pair, 0 for a NULL pair (whose keys are not checked). ``lock`` is held
    around the parallel regions (Numba's default thread pool may not be entered by two
    threads at once).

    Raises
    ------
    KeysBeyondInt64
        A uint64 key of a pair that is not NULL lies above 2**63 - 1.
    """
    a, b = pieces_of(a), pieces_of(b)
    n = pieces_length(a)
    v = _NO_VALID if valid is None else valid.view(np.uint8)
    if offset is not None and _stage(a, b, True, offset, out[:8 * n].view(np.int32), n, v,
                                     lock) == 0:
        return False
    if _stage(a, b, False, 0, out[:16 * n].view(np.int64), n, v, lock):
        raise KeysBeyondInt64("uint64 keys above 2**63 - 1 in a batch")
    return True


def _stage(a, b, narrow, offset, out, total, valid, lock) -> int:
    """Every piece of a, b staged into ``out`` (:func:`_stage_serial`, or
    :func:`_stage_parallel` for a large piece, or for a piece of ``PIECE_MIN`` keys or more
    of a large batch); the pieces of a large batch, when all contiguous and of one type (the
    chunks of a chunked column), in one parallel loop (:func:`_stage_pieces`); the summed
    counts."""
    if len(a) > 1 and total >= PARALLEL_MIN:
        plan = _one_loop(a, b)
        if plan is not None:
            with lock if lock is not None else contextlib.nullcontext():
                return _stage_pieces(plan[0], a[0][:0], narrow, offset, out, total, valid,
                                     plan[1])
    bad, at = 0, 0
    for x, y in zip(a, b):
        n = x.shape[0]
        if n < PARALLEL_MIN and (total < PARALLEL_MIN or n < PIECE_MIN):
            bad += _stage_serial(x, y, narrow, offset, out, at, total, valid)
        else:
            with lock if lock is not None else contextlib.nullcontext():
                bad += _stage_parallel(x, y, narrow, offset, out, at, total, valid, STAGE_BLOCK)
        at += n
    return bad


#: the largest 32-bit key offset
_OFFSET_MAX = (1 << 32) - 1


@njit(cache=True, nogil=True, boundscheck=False)
def pack_key_offsets(src, dst, lo, check, out, base):
    """The build's read of one piece of edges: ``out[base + i] = (src[i] - lo) << 32
    | (dst[i] - lo)`` as uint64, both halves 32 bits. With ``check``, offsets outside
    ``[0, 2**32)`` are counted (the caller's range was wrong); without, they wrap, which packs
    int32 keys as their bits (``lo`` = 0) for the device to offset later. Returns
    ``(min key, max key, offsets out of range)``; one pass over the keys, no temporaries."""
    mn = np.int64(np.iinfo(np.int64).max)
    mx = np.int64(np.iinfo(np.int64).min)
    bad = 0
    for i in range(src.shape[0]):
        s = np.int64(src[i])
        d = np.int64(dst[i])
        mn = min(mn, s, d)
        mx = max(mx, s, d)
        x = s - lo
        y = d - lo
        if check:
            bad += (x < 0) | (x > _OFFSET_MAX) | (y < 0) | (y > _OFFSET_MAX)
        out[base + i] = (np.uint64(x & _OFFSET_MAX) << np.uint64(32)) | np.uint64(y & _OFFSET_MAX)
    return mn, mx, bad
