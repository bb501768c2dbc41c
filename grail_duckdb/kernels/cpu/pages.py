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


@njit(cache=True, nogil=True, boundscheck=False)
def children_rows(bitmap, bit0, offsets, comp, ptr, e0):
    """A row group's DAG rows from its children's column, in one pass without the
    interpreter's lock (a load's row group, on every core): the rows whose children are
    not NULL (bit ``bit0 + i`` of the validity ``bitmap``; every row where it is empty)
    are the representatives of consecutive components ``c0, c0 + 1, ...``; each one's
    children's count (its BLOB's bytes, ``offsets``, over 4) ends its component's row
    pointer, ``ptr[c + 1] = e0 + the children so far``. Returns ``(c0, c1, ok)``: the
    components ``[c0, c1)`` the rows hold, and False where a representative's component
    does not follow the one before, a BLOB is not whole int32, or a pointer falls outside
    ``ptr`` (a damaged file).

    >>> ptr = np.zeros(4, np.int64)
    >>> bits = np.array([0b101], np.uint8)  # rows 0 and 2 hold their components' children
    >>> children_rows(bits, 0, np.array([0, 8, 8, 12]), np.array([1, 1, 2]), ptr, 5), ptr
    ((1, 3, True), array([0, 0, 7, 8]))
    """
    c0, k, total = -1, 0, 0
    for i in range(comp.shape[0]):
        if bitmap.shape[0] and not (bitmap[(bit0 + i) >> 3] >> ((bit0 + i) & 7)) & 1:
            continue
        if c0 < 0:
            c0 = np.int64(comp[i])
        length = offsets[i + 1] - offsets[i]
        if comp[i] != c0 + k or length % 4 or c0 < 0 or c0 + k + 1 >= ptr.shape[0]:
            return c0, c0 + k, False
        total += length // 4
        ptr[c0 + k + 1] = e0 + total
        k += 1
    c0 = max(c0, 0)
    return c0, c0 + k, True


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


# --- page headers (Thrift's compact protocol) ---------------------------------------------
#: the compact protocol's types (:mod:`grail_duckdb.engine.parquet_parts`, which writes and
#: reads footers, takes them from here)
(T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET, T_MAP,
 T_STRUCT) = range(1, 13)
#: nested structs and lists a header may hold, at most, before it is taken as damaged
_MAX_DEPTH = 16
#: Parquet's encodings a page may be in here: PLAIN and BYTE_STREAM_SPLIT
PLAIN_ENCODING, SPLIT_ENCODING = 0, 9


@njit(cache=True, nogil=True, boundscheck=True)
def _uvarint(buf, pos):
    """An unsigned varint at ``pos``: ``(value, position after it)``, position -1 where it
    does not decode."""
    value, shift = 0, 0
    while pos < buf.shape[0] and shift < 64:
        b = np.int64(buf[pos])
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return 0, -1


@njit(cache=True, nogil=True, boundscheck=True)
def _field(buf, pos, last):
    """The header of a struct's field at ``pos``, the field before it ``last``: ``(its id,
    its type, the position after it)``; type 0 at the struct's end, position -1 where it
    does not decode."""
    if pos < 0 or pos >= buf.shape[0]:
        return 0, 0, -1
    head = np.int64(buf[pos])
    pos += 1
    if head == 0 or head >> 4:
        return last + (head >> 4), head & 0x0F, pos
    raw, pos = _uvarint(buf, pos)  # the field id in a varint of its own
    return (raw >> 1) ^ -(raw & 1), head & 0x0F, pos


@njit(cache=True, nogil=True, boundscheck=True)
def _integer(buf, pos, typ):
    """An integer field's value at ``pos`` (a zigzag varint): ``(value, position after it)``,
    position -1 where ``typ`` is not an integer's type or it does not decode."""
    if typ != T_I16 and typ != T_I32 and typ != T_I64:
        return 0, -1
    raw, pos = _uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


@njit(cache=True, nogil=True, boundscheck=True)
def _skip(buf, pos, typ):
    """The position after a value of compact type ``typ`` at ``pos`` (a struct field's
    booleans are in their type: none to skip), or -1 where it does not decode: the structs,
    lists and maps it holds are walked with a stack of their own, at most
    :data:`_MAX_DEPTH` deep."""
    kind = np.zeros(_MAX_DEPTH, np.int64)  # 0: a struct, 1: a list or set, 2: a map
    left = np.zeros(_MAX_DEPTH, np.int64)  # values still to skip (a map's keys and values)
    first = np.zeros(_MAX_DEPTH, np.int64)  # the elements' type (a map's keys')
    second = np.zeros(_MAX_DEPTH, np.int64)  # a map's values' type
    depth, boxed, end = 0, False, buf.shape[0]
    while True:
        if pos < 0 or pos > end:
            return -1
        opened = -1
        if typ == T_TRUE or typ == T_FALSE:
            pos += 1 if boxed else 0  # a boolean in a list or map takes a byte
        elif typ == T_BYTE:
            pos += 1
        elif typ == T_I16 or typ == T_I32 or typ == T_I64:
            pos = _uvarint(buf, pos)[1]
        elif typ == T_DOUBLE:
            pos += 8
        elif typ == T_BINARY:
            n, pos = _uvarint(buf, pos)
            pos = pos + n if pos >= 0 and n >= 0 else -1
        elif (typ == T_LIST or typ == T_SET) and pos < end:
            head = np.int64(buf[pos])
            size, pos = head >> 4, pos + 1
            if size == 15:
                size, pos = _uvarint(buf, pos)
            opened, a, b = 1, head & 0x0F, 0
        elif typ == T_MAP:
            size, pos = _uvarint(buf, pos)
            a = b = 0
            if size and 0 <= pos < end:
                a, b = np.int64(buf[pos]) >> 4, np.int64(buf[pos]) & 0x0F
                pos += 1
            opened, size = 2, 2 * size
        elif typ == T_STRUCT:
            opened, size, a, b = 0, 0, 0, 0
        else:
            return -1
        if pos < 0 or pos > end:
            return -1
        if opened >= 0:
            if depth == _MAX_DEPTH or size < 0:
                return -1
            kind[depth], left[depth], first[depth], second[depth] = opened, size, a, b
            depth += 1
        while True:  # the next value to skip: the innermost open value's next one
            if depth == 0:
                return pos
            d = depth - 1
            if kind[d] == 0:
                _, typ, pos = _field(buf, pos, 0)
                if pos < 0:
                    return -1
                if typ == 0:
                    depth -= 1
                    continue
                boxed = False
                break
            if left[d] == 0:
                depth -= 1
                continue
            left[d] -= 1
            typ = first[d] if kind[d] == 1 or left[d] % 2 == 1 else second[d]
            boxed = True
            break


@njit(cache=True, nogil=True, boundscheck=True)
def _header(buf, pos, out):
    """The page header at ``pos``: its type, uncompressed and compressed sizes (fields 1-3)
    and its data page header's values and encoding (field 5's fields 1 and 2) into ``out``;
    returns where the page's bytes start, or -1 for a header without all of them or that
    does not decode."""
    have, last = 0, 0
    while True:
        last, typ, pos = _field(buf, pos, last)
        if pos < 0:
            return -1
        if typ == 0:
            return pos if have == 0b11111 else -1
        if 1 <= last <= 3 and typ != T_STRUCT:
            out[last - 1], pos = _integer(buf, pos, typ)
            have |= 1 << (last - 1)
        elif last == 5 and typ == T_STRUCT:
            inner = 0
            while pos >= 0:
                inner, t, pos = _field(buf, pos, inner)
                if t == 0:
                    break
                if inner == 1 or inner == 2:
                    out[2 + inner], pos = _integer(buf, pos, t)
                    have |= 1 << (2 + inner)
                else:
                    pos = _skip(buf, pos, t)
        else:
            pos = _skip(buf, pos, typ)


@njit(cache=True, nogil=True, boundscheck=True)
def page_table(buf, start, stop, width, lz4, rows):
    """The pages of the column chunk ``buf[start:stop]`` (``buf``: the whole file) as a
    table of :data:`PAGE_COLUMNS` (sources from ``start``, scratch from 0, no destination),
    if every page is a version-1 data page of ``width``-byte values, PLAIN or
    byte-stream-split, as stored (``lz4`` False) or one LZ4 block each, and the pages hold
    ``rows`` values; else a table of shape ``(0, 0)``: the chunk is left to pyarrow. Page
    headers are read here rather than in Python: a
    GPU load of rmat:23:12 read 2,300 of them under the interpreter's lock, a third of
    its busy time on one thread (README, Scale, stop 37)."""
    out = np.zeros((16, PAGE_COLUMNS), np.int64)
    head = np.zeros(5, np.int64)
    pos, row, scratch, n = start, 0, 0, 0
    while pos < stop:
        body = _header(buf, pos, head)
        kind, raw, size, values, encoding = head[0], head[1], head[2], head[3], head[4]
        if encoding == SPLIT_ENCODING:
            flags = PAGE_SPLIT
        elif encoding == PLAIN_ENCODING:
            flags = 0
        else:
            flags = -1
        if (body < 0 or kind != 0 or flags < 0 or size < 0 or values < 0
                or raw != values * width or body + size > stop or (not lz4 and size != raw)):
            return np.zeros((0, 0), np.int64)
        if n == out.shape[0]:
            grown = np.zeros((2 * n, PAGE_COLUMNS), np.int64)
            grown[:n] = out
            out = grown
        out[n, PAGE_SRC] = body - start
        out[n, PAGE_LEN] = size
        out[n, PAGE_RAW] = raw
        out[n, PAGE_SCRATCH] = scratch if lz4 else -1
        out[n, PAGE_ROW] = row
        out[n, PAGE_ROWS] = values
        out[n, PAGE_WIDTH] = width
        out[n, PAGE_FLAGS] = flags | (PAGE_LZ4 if lz4 else 0)
        n += 1
        scratch += raw if lz4 else 0
        row += values
        pos = body + size
    if row != rows:
        return np.zeros((0, 0), np.int64)
    return out[:n].copy()


#: LZ4's rules: a match is 4 bytes or more; a block's last 5 bytes are literals, and its last
#: match starts 12 bytes or more before its end
_MIN_MATCH, _LAST_LITERALS, _MF_LIMIT = 4, 5, 12
#: bytes of a page that one warp (one call of :func:`parse_chunk`) parses: its positions and
#: the matches it finds stay within them, so that a 1 MiB page is parsed by 16 warps at once
CHUNK = 1 << 16
#: hash slots of the encoder, each a position of the chunk (from its start; ``_EMPTY`` where
#: none) whose 5 bytes have that hash: 8 KiB of uint16, a warp's shared memory on the device
HASH_BITS = 12
_EMPTY = 0xFFFF
#: positions the encoder looks at together (a warp's lanes on the device)
WINDOW = 32


def lz4_bound(n: int) -> int:
    """Bytes that an LZ4 block of ``n`` bytes may take (LZ4's worst case).

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
        r = refs[j] = -1 if table[h] == _EMPTY else c0 + np.int64(table[h])
        if (r >= 0 and r < p and p + _MIN_MATCH <= end and src[a + r] == src[a + p]
                and src[a + r + 1] == src[a + p + 1] and src[a + r + 2] == src[a + p + 2]
                and src[a + r + 3] == src[a + p + 3]):
            return j
        if r < i:
            table[h] = p - c0
    return -1


#: columns of the chunk table (:func:`parse_chunks`, :func:`emit_chunks`): where the chunk's
#: page starts in the source, the page's bytes, the chunk's first and end byte in the page,
#: where its other sequences go in the scratch (:func:`lz4_bound` of its bytes each)
CHUNK_COLUMNS = 5
CH_PAGE, CH_BYTES, CH_FIRST, CH_END, CH_REST = range(CHUNK_COLUMNS)
#: what :func:`parse_chunk` finds in a chunk: its matches, its first sequence (literals
#: from the chunk's start, match offset, match length), the bytes of its other sequences,
#: where its last match ends in the page
RECORD_COLUMNS = 6
REC_MATCHES, REC_LITERALS, REC_OFFSET, REC_MATCH, REC_REST, REC_TAIL = range(RECORD_COLUMNS)
#: columns of a chunk's place (:func:`emit_chunks`): where its bytes go in the output, where
#: in the page the literals of its first sequence start, whether it ends its page
PLACE_COLUMNS = 3
PL_AT, PL_ANCHOR, PL_LAST = range(PLACE_COLUMNS)


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
    table[:] = _EMPTY
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
