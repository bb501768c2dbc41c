"""The build's read phase: integer edge keys from the input into the build's one array of
packed edges, on the device when there is one.

Every edge becomes one uint64, ``(src - lo) << 32 | (dst - lo)``: 32-bit key offsets, the
form the ids phase (:mod:`.ids`) turns into dense ids in place. Keys of 32 bits or fewer are
packed as their bits (``lo`` = 0, wrapping) with no pass over them beforehand; the device
subtracts the smallest key afterwards, from the minimum and maximum that the read measured on
the way. Wider keys need their range first (Parquet statistics, or one pass on every core).

The input is cut into pieces (a Parquet row group, or a slice of a table chunk of at most
``ingest.PIECE`` edges), and pieces into slices of ``SLICE`` edges. Worker threads, one per
core, decode a piece (Parquet) and pack it (:func:`~grail_duckdb.kernels.host.staging.pack_key_offsets`,
Numba, no GIL) straight into a pinned host buffer at the piece's place; a full slice is
copied to the device asynchronously on a stream of its own while the workers fill the next
buffer, so decoding, packing and the copies overlap. On the CPU backend the pieces are packed
into the array itself. The device holds 8 bytes per edge and nothing else.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import EdgeInputError
from ..kernels.host import pack_key_offsets, workers
from .ingest import EdgeStream

#: edges per pinned buffer (8 bytes each); ``BUFFERS`` of them rotate
SLICE = 1 << 23
BUFFERS = 4


@dataclass
class PackedEdges:
    """The read's result: ``pairs`` (uint64, one per edge, in the array module it was read
    for) hold ``key - offset`` in both 32-bit halves (modulo 2**32: int32 keys read as their
    bits have offset 0 and may be negative); ``key_min`` / ``key_max``: the smallest and
    largest edge key (None without edges)."""

    pairs: object
    offset: int
    key_min: int | None
    key_max: int | None


def _numpy(arr: pa.Array) -> np.ndarray:
    """Integer keys as NumPy in their stored width (no copy without NULLs)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.to_numpy(zero_copy_only=False)


def _pack(piece, lo: int, check: bool, out: np.ndarray, base: int):
    """Read one piece and pack it into ``out`` at ``start - base``: ``(min, max, bad)``."""
    start, rows, read = piece
    src, dst = read()
    if len(src) != rows or len(dst) != rows:
        raise EdgeInputError(f"a piece of the edges holds {len(src)} rows, not {rows}")
    if not rows:
        return None
    return pack_key_offsets(_numpy(src), _numpy(dst), lo, check, out, start - base)


def _slices(pieces: list) -> list[tuple[int, int, list]]:
    """Consecutive pieces grouped into slices of at most ``SLICE`` edges (a larger piece is
    a slice of its own): ``(first row, end row, pieces)``."""
    out, group, first, rows = [], [], 0, 0
    for piece in pieces:
        if group and rows + piece[1] > SLICE:
            out.append((first, first + rows, group))
            group, first, rows = [], first + rows, 0
        group.append(piece)
        rows += piece[1]
    if group:
        out.append((first, first + rows, group))
    return out


def read_packed(stream: EdgeStream, xp=np, lo: int = 0, check: bool = False) -> PackedEdges:
    """Read and pack the stream's integer keys as ``key - lo`` (``check``: refuse offsets
    outside 32 bits; without, int32 keys are packed as their bits with ``lo`` = 0)."""
    pairs = xp.empty(stream.rows, xp.uint64)
    pieces = stream.pieces()
    with ThreadPoolExecutor(workers()) as pool:
        if xp is np:
            got = list(pool.map(lambda p: _pack(p, lo, check, pairs, 0), pieces))
        else:
            got = _upload(pool, pieces, pairs, lo, check, xp)
    got = [g for g in got if g is not None]
    if check and sum(int(g[2]) for g in got):
        raise EdgeInputError("edge keys lie outside the range read before them (the Parquet "
                             "statistics are wrong); rewrite the files without statistics")
    if not got:
        return PackedEdges(pairs, lo, None, None)
    return PackedEdges(pairs, lo, int(min(g[0] for g in got)), int(max(g[1] for g in got)))


def _upload(pool, pieces, pairs, lo: int, check: bool, cp) -> list:
    """The device side of :func:`read_packed`: slices packed into rotating pinned buffers by
    the workers and copied on a stream of their own, ``BUFFERS - 1`` slices in the workers'
    hands while the previous one is copied."""
    import cupyx

    from ..kernels.gpu_transfers import mark

    slices = _slices(pieces)
    if not slices:
        return []
    cap = max(e - s for s, e, _ in slices)
    buffers = [cupyx.empty_pinned(cap, np.uint64) for _ in range(min(BUFFERS, len(slices)))]
    events: list = [None] * len(buffers)
    copy_stream = cp.cuda.Stream(non_blocking=True)
    copy_stream.wait_event(mark())  # ``pairs`` is ready
    pending: deque = deque()
    got: list = []

    def flush():
        first, end, b, futures = pending.popleft()
        got.extend(f.result() for f in futures)
        pairs[first:end].set(buffers[b][:end - first], stream=copy_stream)
        events[b] = copy_stream.record()

    for k, (first, end, group) in enumerate(slices):
        b = k % len(buffers)
        if events[b] is not None:
            events[b].synchronize()  # its previous slice has reached the device
        futures = [pool.submit(_pack, p, lo, check, buffers[b], first) for p in group]
        pending.append((first, end, b, futures))
        if len(pending) >= max(1, len(buffers) - 1):
            flush()
    while pending:
        flush()
    copy_stream.synchronize()
    return got
