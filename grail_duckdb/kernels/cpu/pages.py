"""Host loops of the index file's pages (:mod:`grail_duckdb.engine.parquet_parts`, and the
load's own decoding of label pages, :mod:`grail_duckdb.engine.page_plan`).

The DAG's children are one BLOB of little-endian int32 per component. pyarrow's writer encodes
a BLOB column value by value (about 50 ns each: a quarter of a save's encoding on the citation
indices, README "Scale", stop 27); a PLAIN page of BLOBs is only each value's byte length
(int32) followed by its bytes, which this loop writes with the children copied as words.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, boundscheck=False)
def blob_words(ptr, children, out):
    """One PLAIN page body of int32 BLOBs, as int32 words: for each row i, its byte length
    ``4 * (ptr[i + 1] - ptr[i])`` and then ``children[ptr[i] - ptr[0]:ptr[i + 1] - ptr[0]]``
    (``out``: ``len(ptr) - 1 + len(children)`` words). Returns the words written.

    >>> out = np.empty(6, np.int32)
    >>> blob_words(np.array([3, 5, 5, 6]), np.array([7, 8, 9], np.int32), out), out.tolist()
    (6, [8, 7, 8, 0, 4, 9])
    """
    q = 0
    base = ptr[0]
    for i in range(ptr.shape[0] - 1):
        a, b = ptr[i] - base, ptr[i + 1] - base
        out[q] = np.int32(4 * (b - a))
        q += 1
        for e in range(a, b):
            out[q] = children[e]
            q += 1
    return q


#: columns of a page table (:func:`page_values`, ``pages_kernel`` in ``kernels/pages.cu``):
#: where the page's bytes start in the source and how many there are, its bytes once
#: decompressed, where they go in the scratch, its first row in the row group, its rows,
#: its value width in bytes, its flags (``PAGE_LZ4``, ``PAGE_SPLIT``), and (device only) the
#: address of the column's destination
PAGE_COLUMNS = 9
(PAGE_SRC, PAGE_LEN, PAGE_RAW, PAGE_SCRATCH, PAGE_ROW, PAGE_ROWS, PAGE_WIDTH, PAGE_FLAGS,
 PAGE_DST) = range(PAGE_COLUMNS)
#: the page's bytes are one LZ4 block (Parquet's LZ4_RAW); else they are stored as they are
PAGE_LZ4 = 1
#: the values are byte-stream-split (byte k of every value, then byte k + 1); else PLAIN
PAGE_SPLIT = 2


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


#: LZ4's rules at a block's end: its last 5 bytes are literals, and its last match starts 12
#: bytes or more before the end; a match reaches back 65,535 bytes at most
_LAST_LITERALS, _MF_LIMIT, _MAX_OFFSET = 5, 12, 65_535
#: hash slots of the page encoder, each a position looked at whose 5 bytes have that hash
#: (int32; ``_EMPTY`` where none): 32 KiB, a warp's shared memory on the device
HASH_BITS = 13
_EMPTY = -1
#: positions the encoder looks at together (a warp's lanes on the device): the hash slots of
#: all of them are read, then all are written, so a match is found in a slot as it stood
#: before the window
WINDOW = 32


def lz4_bound(n: int) -> int:
    """Bytes that :func:`lz4_encode` may write for ``n`` bytes (LZ4's worst case).

    >>> lz4_bound(65536)
    65809
    """
    return n + n // 255 + 16


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
def _first_match(src, a, i, w, table, refs):
    """The first of the ``w`` positions from ``i`` (of the page at ``src[a]``) with a match:
    an earlier position within reach with the same 4 bytes, named by its hash slot; or -1.
    ``refs[j]`` receives position ``i + j``'s candidate. Each position before the first
    match takes its slot unless an earlier one of the window took it, and finds there that
    one (a run's slot keeps its start, so that the run's next copy matches whole); the
    match's own position and those it covers take none. On the device the window's lanes
    do this at once: a slot as it stood before the window, or the window's first position
    with the same hash (``__match_any_sync``)."""
    for j in range(w):
        p = i + j
        h = _hash5(src, a + p)
        r = refs[j] = table[h]
        if (r >= 0 and r < p and p - r <= _MAX_OFFSET and src[a + r] == src[a + p]
                and src[a + r + 1] == src[a + p + 1] and src[a + r + 2] == src[a + p + 2]
                and src[a + r + 3] == src[a + p + 3]):
            return j
        if r < i:
            table[h] = p
    return -1


@njit(cache=True, nogil=True, boundscheck=False)
def lz4_encode(src, a, n, out, o, table):
    """``src[a:a + n]`` as one LZ4 block at ``out[o:]`` (:func:`lz4_bound` bytes of room);
    returns its length. Greedy, as LZ4's fast mode without its acceleration, but looking at
    :data:`WINDOW` positions at a time (:func:`_first_match`): the first of them with a match
    through its hash slot takes it, extended as far as it goes both ways, the position two
    before its end takes its slot (as in LZ4), and the next window starts after it; a window
    without one becomes literals. On rmat:20:12's label pages its blocks are 3% smaller than
    pyarrow's LZ4 (README, Scale, stop 36). The CPU twin of
    ``encode_pages_kernel`` (``kernels/pages.cu``), whose warps run a window's positions on
    their lanes; :func:`lz4_block` decodes it (as pyarrow does Parquet's LZ4_RAW pages).

    >>> data = np.frombuffer(b"abcd" * 20 + b"-xyz", np.uint8)
    >>> out, table = np.zeros(lz4_bound(84), np.uint8), np.empty(1 << HASH_BITS, np.int32)
    >>> k = lz4_encode(data, 0, 84, out, 0, table)
    >>> back = np.zeros(84, np.uint8)
    >>> k, lz4_block(out, 0, k, back, 0, 84), bytes(back) == bytes(data)
    (14, True, True)
    """
    table[:] = _EMPTY
    refs = np.empty(WINDOW, np.int64)
    q, anchor, i = o, 0, 0
    while i < n - _MF_LIMIT:
        w = min(WINDOW, n - _MF_LIMIT - i)
        j = _first_match(src, a, i, w, table, refs)
        if j < 0:
            i += w
            continue
        p, r, m = i + j, refs[j], 4
        while p + m < n - _LAST_LITERALS and src[a + r + m] == src[a + p + m]:
            m += 1
        while p > anchor and r > 0 and src[a + p - 1] == src[a + r - 1]:
            p, r, m = p - 1, r - 1, m + 1
        q = _sequence(src, a + anchor, p - anchor, out, q, p - r, m)
        i = anchor = p + m
        table[_hash5(src, a + i - 2)] = i - 2
    q = _sequence(src, a + anchor, n - anchor, out, q, 0, 0)
    return q - o


#: columns of an encoder's page table (:func:`encode_pages`): where the page's bytes start
#: in the source, how many there are, where its block goes in the output
ENC_COLUMNS = 3
ENC_SRC, ENC_RAW, ENC_OUT = range(ENC_COLUMNS)


@njit(cache=True, nogil=True, boundscheck=False)
def encode_pages(src, table, out, sizes):
    """Each page of ``table`` (one row per page, :data:`ENC_COLUMNS`) as one LZ4 block
    (:func:`lz4_encode`) at its place in ``out`` (:func:`lz4_bound` bytes of room each);
    ``sizes[p]`` receives page p's block length. The CPU twin of
    ``encode_pages_kernel``."""
    hashes = np.empty(1 << HASH_BITS, np.int32)
    for p in range(table.shape[0]):
        sizes[p] = lz4_encode(src, table[p, ENC_SRC], table[p, ENC_RAW], out, table[p, ENC_OUT],
                              hashes)
