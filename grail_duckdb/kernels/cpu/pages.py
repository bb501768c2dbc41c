"""The CPU twins of ``kernels/pages.cu``: Parquet pages decoded (LZ4 blocks, byte-stream
split) and encoded (a greedy LZ4 encoder that parses 64 KiB chunks of a page independently,
as the device's warps do), with results identical to the device's.

The index file's reader and writer (:mod:`grail_duckdb.indexfile`) call them through the
backend's :class:`~grail_duckdb.kernels.protocol.Kernels`; the page table's and the chunk
table's columns are in :mod:`grail_duckdb.kernels.shared`.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from ..shared import (CH_BYTES, CH_END, CH_FIRST, CH_PAGE, CH_REST, EMPTY_SLOT, HASH_BITS,
                      PAGE_FLAGS, PAGE_LEN, PAGE_LZ4, PAGE_RAW, PAGE_ROW, PAGE_ROWS, PAGE_SCRATCH,
                      PAGE_SPLIT, PAGE_SRC, PAGE_WIDTH, PL_ANCHOR, PL_AT, PL_LAST, REC_LITERALS,
                      REC_MATCH, REC_MATCHES, REC_OFFSET, REC_REST, REC_TAIL, WINDOW)


@njit(cache=True, nogil=True, boundscheck=False)
def _length(src, ip, b, n):
    """An LZ4 length whose token nibble is ``n``: 15 goes on in the bytes from ``src[ip]``
    (each added, until one under 255). Returns ``(length, next position)``; the length is
    -1 where the bytes run past ``b``."""
    n = np.int64(n)
    if n == 15:
        while True:
            if ip >= b:
                return np.int64(-1), ip
            more = src[ip]
            ip += 1
            n += more
            if more != 255:
                break
    return n, ip


@njit(cache=True, nogil=True, boundscheck=False)
def lz4_block(src, a, b, dst, o, n):
    """Decode the LZ4 block ``src[a:b]`` (the block format: sequences of a token, literals, a
    2-byte offset and a match length; the last sequence literals only) into
    ``dst[o:o + n]``; returns False for a block that does not decode into exactly ``n``
    bytes or reaches outside its bounds (damage: never trusted). A match copies byte by byte
    (it may overlap the bytes it copies); ``pages.cu`` copies ``dst[q - offset + k % offset]``,
    the same bytes, with every lane of a warp at once.

    >>> out = np.zeros(7, np.uint8)  # a literal 7, a match of 5 at offset 1, a literal 9
    >>> lz4_block(np.array([0x11, 7, 1, 0, 0x10, 9], np.uint8), 0, 6, out, 0, 7), out.tolist()
    (True, [7, 7, 7, 7, 7, 7, 9])
    """
    ip, q, end = a, o, o + n
    while ip < b:
        token = src[ip]
        ip += 1
        lit, ip = _length(src, ip, b, token >> 4)
        if lit < 0 or ip + lit > b or q + lit > end:
            return False
        dst[q:q + lit] = src[ip:ip + lit]
        ip += lit
        q += lit
        if ip == b:  # the last sequence: literals only
            break
        if ip + 2 > b:
            return False
        offset = np.int64(src[ip]) | (np.int64(src[ip + 1]) << 8)
        ip += 2
        if offset == 0 or offset > q - o:
            return False
        length, ip = _length(src, ip, b, token & 15)
        length += 4
        if length < 4 or q + length > end:
            return False
        for k in range(length):  # byte by byte: a match may overlap the bytes it copies
            dst[q + k] = dst[q - offset + k]
        q += length
    return q == end


@njit(cache=True, nogil=True, boundscheck=False)
def page_values(src, table, scratch, out):
    """The values of a column chunk's data pages (``table``: one row per page, the columns
    of :data:`PAGE_COLUMNS` but the destination) as bytes, value after value, into ``out``
    (uint8, rows times width bytes): each page decompressed into ``scratch`` (LZ4) or read
    where it lies, then PLAIN (values one after the other) or byte-stream-split (byte k of
    every value, then byte k + 1). Returns False for a page that does not hold its values.
    The CPU twin of ``pages_kernel`` (``kernels/pages.cu``), which places the values
    itself."""
    for p in range(table.shape[0]):
        at, size, raw = table[p, PAGE_SRC], table[p, PAGE_LEN], table[p, PAGE_RAW]
        first, rows, width = table[p, PAGE_ROW], table[p, PAGE_ROWS], table[p, PAGE_WIDTH]
        flags = table[p, PAGE_FLAGS]
        if raw != rows * width or at < 0 or at + size > src.shape[0] or (
                first + rows) * width > out.shape[0]:
            return False
        if flags & PAGE_LZ4:
            s0 = table[p, PAGE_SCRATCH]
            if s0 < 0 or s0 + raw > scratch.shape[0]:
                return False
            if not lz4_block(src, at, at + size, scratch, s0, raw):
                return False
            body, b0 = scratch, s0
        else:
            if size != raw:
                return False
            body, b0 = src, at
        base = first * width
        if not flags & PAGE_SPLIT:
            out[base:base + raw] = body[b0:b0 + raw]
        else:
            for i in range(rows):
                for k in range(width):
                    out[base + i * width + k] = body[b0 + k * rows + i]
    return True


#: LZ4's rules: a match is 4 bytes or more; a block's last 5 bytes are literals, and its last
#: match starts 12 bytes or more before its end
_MIN_MATCH, _LAST_LITERALS, _MF_LIMIT = 4, 5, 12
@njit(cache=True, nogil=True, boundscheck=False)
def _put_length(out, q, n):
    """The bytes of an LZ4 length past its token's 15 (255 each, then the rest) at
    ``out[q]``; returns the next position."""
    while n >= 255:
        out[q] = 255
        q += 1
        n -= 255
    out[q] = n
    return q + 1


@njit(cache=True, nogil=True, boundscheck=False)
def _sequence(src, lit_at, lit, out, q, offset, match):
    """One LZ4 sequence at ``out[q]``: ``lit`` literals from ``src[lit_at]``, then a match of
    ``match`` bytes (4 or more; 0: the block's last sequence, literals only) at ``offset``
    back; returns the next position."""
    tok = q
    q += 1
    out[tok] = min(lit, 15) << 4
    if lit >= 15:
        q = _put_length(out, q, lit - 15)
    out[q:q + lit] = src[lit_at:lit_at + lit]
    q += lit
    if match:
        out[q] = offset & 255
        out[q + 1] = offset >> 8
        q += 2
        out[tok] |= min(match - 4, 15)
        if match - 4 >= 15:
            q = _put_length(out, q, match - 4 - 15)
    return q


@njit(cache=True, nogil=True, boundscheck=False)
def _hash5(src, at):
    """The hash slot of the 5 bytes at ``src[at]`` (LZ4's hash of 5 bytes, which it uses for
    blocks past 64 KiB: on label pages it finds longer matches than a hash of 4)."""
    v = np.uint64(0)
    for k in range(5):
        v |= np.uint64(src[at + k]) << np.uint64(8 * k)
    return ((v << np.uint64(24)) * np.uint64(889523592379)) >> np.uint64(64 - HASH_BITS)


@njit(cache=True, nogil=True, boundscheck=False)
def _first_match(src, a, c0, i, w, end, table, refs):
    """The first of the ``w`` positions from ``i`` (of the page at ``src[a]``, in the chunk
    from ``c0``) with a match that ends by ``end``: an earlier position with the same 4
    bytes, named by its hash slot; or -1. ``refs[j]`` receives position ``i + j``'s
    candidate. Each position before the first match takes its slot unless an earlier one
    of the window took it, and finds there that one (a run's slot keeps its start, so that
    the run's next copy matches whole); the match's own position and those it covers take
    none. On the device the window's lanes do this at once: a slot as it stood before the
    window, or the window's first lane of the same hash (``__match_any_sync``)."""
    for j in range(w):
        p = i + j
        h = _hash5(src, a + p)
        r = refs[j] = -1 if table[h] == EMPTY_SLOT else c0 + np.int64(table[h])
        if (r >= 0 and r < p and p + _MIN_MATCH <= end and src[a + r] == src[a + p]
                and src[a + r + 1] == src[a + p + 1] and src[a + r + 2] == src[a + p + 2]
                and src[a + r + 3] == src[a + p + 3]):
            return j
        if r < i:
            table[h] = p - c0
    return -1


@njit(cache=True, nogil=True, boundscheck=False)
def parse_chunk(src, chunk, rest, record, table, refs):
    """One chunk of a page parsed greedily as LZ4's fast mode does (without its
    acceleration), looking at :data:`WINDOW` positions at a time (:func:`_first_match`):
    the first of them with a match takes it, extended as far as it goes both ways within
    the chunk, the position two before its end takes its slot (as in LZ4), and the next
    window starts after it; a window without one becomes literals. Its sequences but the
    first are written to ``rest`` (from ``chunk[CH_REST]``); ``record`` receives the rest
    (:data:`RECORD_COLUMNS`). The CPU twin of ``parse_chunks_kernel``
    (``kernels/pages.cu``), a warp per chunk."""
    a, n, c0, c1 = chunk[CH_PAGE], chunk[CH_BYTES], chunk[CH_FIRST], chunk[CH_END]
    q = r0 = chunk[CH_REST]
    table[:] = EMPTY_SLOT
    stop, end = min(c1, n - _MF_LIMIT), min(c1, n - _LAST_LITERALS)
    matches, anchor, i = 0, c0, c0
    while i < stop:
        w = min(WINDOW, stop - i)
        j = _first_match(src, a, c0, i, w, end, table, refs)
        if j < 0:
            i += w
            continue
        p, r, m = i + j, refs[j], _MIN_MATCH
        while p + m < end and src[a + r + m] == src[a + p + m]:
            m += 1
        while p > anchor and r > 0 and src[a + p - 1] == src[a + r - 1]:
            p, r, m = p - 1, r - 1, m + 1
        if matches:
            q = _sequence(src, a + anchor, p - anchor, rest, q, p - r, m)
        else:
            record[REC_LITERALS], record[REC_OFFSET], record[REC_MATCH] = p - c0, p - r, m
        matches += 1
        i = anchor = p + m
        table[_hash5(src, a + i - 2)] = i - 2 - c0
    record[REC_MATCHES], record[REC_REST], record[REC_TAIL] = matches, q - r0, anchor


@njit(cache=True, nogil=True, boundscheck=False)
def parse_chunks(src, chunks, rest, records):
    """:func:`parse_chunk` on every row of ``chunks`` (:data:`CHUNK_COLUMNS`)."""
    table = np.empty(1 << HASH_BITS, np.uint16)
    refs = np.empty(WINDOW, np.int64)
    for c in range(chunks.shape[0]):
        parse_chunk(src, chunks[c], rest, records[c], table, refs)


@njit(cache=True, nogil=True, boundscheck=False)
def emit_chunks(src, chunks, rest, records, places, out):
    """Each chunk's bytes of its page's LZ4 block at ``places[c, PL_AT]`` of ``out``: its
    first sequence, whose literals start where the page's previous match ended
    (``PL_ANCHOR``, before the chunk where earlier chunks end in literals), its other
    sequences as :func:`parse_chunk` wrote them, and, ending its page, the block's last
    literals. The CPU twin of ``emit_chunks_kernel``."""
    for c in range(chunks.shape[0]):
        a, n, c0 = chunks[c, CH_PAGE], chunks[c, CH_BYTES], chunks[c, CH_FIRST]
        rec, q, anchor = records[c], places[c, PL_AT], places[c, PL_ANCHOR]
        if rec[REC_MATCHES]:
            p = c0 + rec[REC_LITERALS]
            q = _sequence(src, a + anchor, p - anchor, out, q, rec[REC_OFFSET], rec[REC_MATCH])
            r0 = chunks[c, CH_REST]
            out[q:q + rec[REC_REST]] = rest[r0:r0 + rec[REC_REST]]
            q += rec[REC_REST]
            anchor = rec[REC_TAIL]
        if places[c, PL_LAST]:
            _sequence(src, a + anchor, n - anchor, out, q, 0, 0)
