"""One Parquet file written in parts on every core.

pyarrow's Parquet writer encodes and compresses on one thread. Here each part (a run of rows, one row group) is
written by pyarrow as a small Parquet file of its own, in memory, on its own thread; the parts'
column chunks are then laid one after the other in the output, and one footer describes them
all: the parts' row-group metadata with every file offset shifted by where the part landed.

A Parquet file is ``PAR1``, the column chunks (pages), the footer (a Thrift ``FileMetaData``
in the compact protocol), the footer's length and ``PAR1``; nothing in a column chunk refers
to its own position, so moving a part's chunks only changes the offsets in its footer. The
footer is decoded into a generic tree (field id, type, value) and encoded back, so fields this
module does not know about are kept as they are. A chunk may also lie apart from its part's
bytes, anywhere before them (:func:`external_chunk`: the index's children, written in a
region of their own at the front of the file while the labels are still being computed),
and a row group's first columns may come from another part of the same rows, written
before it (:func:`joined`: the labels known before the hub passes, in a second region).

>>> import pyarrow as pa, pyarrow.parquet as pq, io
>>> parts = [encode_part(pa.table({"x": [1, 2]})), encode_part(pa.table({"x": [3]}))]
>>> buf = io.BytesIO()
>>> for pos, data in place(parts): _ = buf.seek(pos), buf.write(data)
>>> _ = buf.write(footer(parts, {"k": "v"}))
>>> pq.read_table(buf).column("x").to_pylist(), pq.read_schema(buf).metadata
([1, 2, 3], {b'k': b'v'})
"""
from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..jit import njit
from . import thrift as T
from .thrift import FooterError

MAGIC = b"PAR1"


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


# --- parts --------------------------------------------------------------------------------
@dataclass
class Blobs:
    """A column of BLOBs of int32 words that this module writes itself, as one PLAIN data page
    (pyarrow's writer takes about 50 ns per BLOB, this a few per word: :func:`blob_words`):
    row i of the rows that hold one (``valid``; None: every row) is
    ``children[ptr[i] - ptr[0]:ptr[i + 1] - ptr[0]]`` (:func:`write_blob_page`). In the
    part's table it is the last column, nullable binary, all NULL: pyarrow writes its schema
    and metadata, and :func:`external_chunk` points that chunk at the page, written apart."""

    name: str
    ptr: np.ndarray
    children: np.ndarray
    valid: np.ndarray | None = None


@dataclass
class Part:
    """One part as written by pyarrow: its bytes (None once written out), its footer decoded,
    where its data ends, and the pooled buffer the bytes lie in (if any)."""

    data: np.ndarray | None
    meta: list
    data_end: int
    buffer: np.ndarray | None = None  # what ``data`` lies in, taken from a Buffers
    #: column -> absolute position in the output of a chunk that lies outside the part's
    #: bytes (:func:`external_chunk`), minus its position in the part
    moves: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Bytes of column chunks (what goes into the output)."""
        return self.data_end - len(MAGIC)

    @property
    def rows(self) -> int:
        return T.field_of(self.meta, T.FILE_NUM_ROWS)[2]


class Buffers:
    """Byte buffers handed out for parts and given back once a part is written, so that a
    save of many parts reuses host memory that is already mapped instead of faulting in
    fresh pages for every part (and pyarrow writes straight into them: no growing stream,
    no second copy)."""

    def __init__(self):
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A buffer of at least ``nbytes`` (the largest free one if it is large enough)."""
        with self._lock:
            if self._free and self._free[-1].nbytes >= nbytes:
                return self._free.pop()
        return np.empty(nbytes + nbytes // 8, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        with self._lock:
            self._free.append(buf)
            self._free.sort(key=lambda b: b.nbytes)


def _bound(table: pa.Table) -> int:
    """Bytes that pyarrow's encoding of ``table`` cannot exceed: its raw bytes with room for
    encodings that grow (bit widths one over the value's, LZ4 on bytes that do not compress),
    a dictionary page per column and page headers; a part that exceeds it all the same is
    encoded again into a stream of pyarrow's own."""
    return int(table.nbytes * 1.05) + (table.num_columns + 1) * (1 << 20) + (64 << 10)


def encode_part(table: pa.Table, buffers: Buffers | None = None, **options) -> Part:
    """``table`` as one row group of Parquet in memory (pyarrow's writer, ``options`` passed
    on), with its footer decoded. With ``buffers`` the part's bytes are written into one of
    them (give it back once the part is written out). Releases the GIL while encoding."""
    data = buf = None
    if buffers is not None:
        buf = buffers.take(_bound(table))
        sink = pa.FixedSizeBufferWriter(pa.py_buffer(buf))
        try:
            _write(table, sink, options)
            data = buf[:sink.tell()]
        except (pa.ArrowInvalid, OSError):
            buffers.give(buf)
            buf = None
    if data is None:
        sink = pa.BufferOutputStream()
        _write(table, sink, options)
        data = np.frombuffer(sink.getvalue(), np.uint8)
    if data.shape[0] < 12 or bytes(data[-4:]) != MAGIC:
        raise FooterError("a part does not end in PAR1")
    (length,) = struct.unpack("<I", bytes(data[-8:-4]))
    start = data.shape[0] - 8 - length
    meta, _ = T.read_struct(bytes(data[start:start + length]), 0)
    return Part(data, meta, start, buf)


def _write(table: pa.Table, sink, options: dict) -> None:
    pq.write_table(table, sink, row_group_size=max(table.num_rows, 1), store_schema=False,
                   **options)


def _def_levels(valid: np.ndarray | None, rows: int) -> bytes:
    """The definition levels of a nullable flat column (bit width 1) in the RLE / bit-packing
    hybrid: one RLE run of 1s when every row holds a value, else one bit-packed run."""
    out = bytearray()
    if valid is None:
        T.write_uvarint(out, rows << 1)
        out.append(1)
    else:
        T.write_uvarint(out, ((rows + 7) >> 3) << 1 | 1)
        out += np.packbits(valid.astype(np.bool_, copy=False), bitorder="little").tobytes()
    return bytes(out)


def blob_head(name: str, rows: int, valid: np.ndarray | None, count: int, words: int) -> bytes:
    """The page header, the levels' length and the levels of a page of ``count`` BLOBs of
    ``words`` words in all over ``rows`` rows (the words follow), its rows checked against
    the BLOBs."""
    if (valid is None and count != rows) or (
            valid is not None and (valid.shape[0] != rows
                                   or int(np.count_nonzero(valid)) != count)):
        raise ValueError(f"{name}: {count} BLOBs for {rows} rows")
    levels = _def_levels(valid, rows)
    body = 4 + len(levels) + 4 * (count + words)
    if body >= 1 << 31:
        raise ValueError(f"{name}: a part's BLOBs exceed one Parquet page (2 GB)")
    return data_page_header(rows, body, body) + struct.pack("<I", len(levels)) + levels


def data_page_header(rows: int, raw: int, size: int, encoding: int = T.PLAIN_ENCODING) -> bytes:
    """The header of a version-1 data page of ``rows`` values in ``encoding`` (PLAIN or
    BYTE_STREAM_SPLIT), ``raw`` bytes stored in ``size`` (compressed or not), its levels
    RLE."""
    out = bytearray()
    T.write_struct(out, [[1, T.T_I32, T.DATA_PAGE], [2, T.T_I32, raw], [3, T.T_I32, size],
                        [5, T.T_STRUCT, [[1, T.T_I32, rows], [2, T.T_I32, encoding], [3, T.T_I32, T.RLE],
                                      [4, T.T_I32, T.RLE]]]])
    return bytes(out)


def blob_page_bytes(name: str, rows: int, valid: np.ndarray | None, count: int,
                    words: int) -> int:
    """Bytes of the PLAIN page that :func:`write_blob_page` writes for ``count`` BLOBs of
    ``words`` words in all over ``rows`` rows (``valid``: the rows that hold one; None:
    every row), known before the BLOBs are at hand."""
    return len(blob_head(name, rows, valid, count, words)) + 4 * (count + words)


def blob_page_size(blobs: Blobs, rows: int) -> int:
    """Bytes of the PLAIN page that :func:`write_blob_page` writes for ``blobs`` (known from
    the pointers alone: the children need not be at hand yet)."""
    return blob_page_bytes(blobs.name, rows, blobs.valid, blobs.ptr.shape[0] - 1,
                           int(blobs.ptr[-1] - blobs.ptr[0]))


def write_blob_page(blobs: Blobs, rows: int, out: np.ndarray) -> None:
    """``blobs`` as one PLAIN data page of a nullable BLOB column of ``rows`` rows, into
    ``out`` (uint8, :func:`blob_page_size` bytes): the header, the definition levels, then
    each BLOB's byte length and words (:func:`blob_words`;
    the words need not be aligned: Numba stores them as they are, at the same speed)."""
    if int(blobs.ptr[-1] - blobs.ptr[0]) != blobs.children.shape[0]:
        raise ValueError(f"{blobs.name}: the BLOBs' pointers do not cover their children")
    count = blobs.ptr.shape[0] - 1
    head = blob_head(blobs.name, rows, blobs.valid, count, blobs.children.shape[0])
    if out.shape[0] != len(head) + 4 * (count + blobs.children.shape[0]):
        raise ValueError(f"{blobs.name}: the page's buffer is not its size")
    out[:len(head)] = np.frombuffer(head, np.uint8)
    blob_words(blobs.ptr, blobs.children, out[len(head):].view(np.int32))


def external_chunk(part: Part, table: pa.Table, at: int, size: int) -> None:
    """Point the last column chunk of the part of ``table`` (pyarrow's chunk of an all-NULL
    placeholder) at a page of ``size`` bytes that lies at ``at`` in the output
    (:func:`write_blob_page`, written there by the caller), and drop the placeholder's bytes:
    the column's and the row group's sizes are set accordingly, its statistics (of the NULLs)
    dropped, and :func:`moved_groups` places the chunk at ``at``."""
    name = table.column_names[-1]
    if table.column(-1).null_count != table.num_rows:
        raise ValueError(f"{name}: the last column, all NULL, stands for the BLOBs")
    group = T.field_of(part.meta, T.FILE_ROW_GROUPS)[2][1][0]
    columns = T.field_of(group, T.RG_COLUMNS)[2][1]
    chunk_meta = T.field_of(columns[-1], T.CC_META)[2]
    if (T.field_of(chunk_meta, T.CM_PATH)[2][1][-1] != name.encode()
            or T.field_of(chunk_meta, T.CM_VALUES)[2] != table.num_rows):
        raise ValueError(f"{name}: the part is not that of the table")
    start, old = T.field_of(chunk_meta, T.CM_DATA_PAGE)[2], T.field_of(chunk_meta, T.CM_COMPRESSED)[2]
    if T.field_of(chunk_meta, T.CM_DICTIONARY_PAGE) is not None or start + old != part.data_end:
        raise FooterError("the BLOBs' placeholder is not the part's last plain chunk")
    for fid in (T.CM_UNCOMPRESSED, T.CM_COMPRESSED):
        T.set_field(chunk_meta, fid, T.T_I64, size)
    chunk_meta[:] = [f for f in chunk_meta if f[0] not in (T.CM_STATISTICS, T.CM_SIZE_STATISTICS)]
    for fid in (T.RG_BYTES, T.RG_COMPRESSED):
        T.shift(group, fid, size - old)
    part.moves[len(columns) - 1] = at - start
    part.data_end = start


def joined(first: Part, second: Part, at: int) -> Part:
    """One part of the rows of two (one row group each): the columns of ``first``, whose
    chunks lie at ``at`` in the output (written apart, before ``second``'s), then those of
    ``second``, whose bytes stay the part's own. The schema, the column orders and the row
    group's chunks and sizes are joined; ``first``'s writer is kept. Both footers are taken
    over, not copied (at 438M edges a save joins 256 pairs, under the interpreter's lock).

    >>> import io
    >>> a, b = encode_part(pa.table({"x": [1, 2]})), encode_part(pa.table({"y": [3, 4]}))
    >>> both = joined(a, b, 4)
    >>> buf = io.BytesIO(MAGIC + bytes(a.data)[4:a.data_end])
    >>> _ = buf.seek(0, io.SEEK_END)
    >>> _ = buf.write(bytes(b.data)[4:b.data_end] + footer([both], start=4 + a.size))
    >>> pq.read_table(buf).to_pydict()
    {'x': [1, 2], 'y': [3, 4]}
    """
    ahead = _join_meta(first, second)
    moves = {c: at - len(MAGIC) for c in range(ahead)}
    moves.update({ahead + c: move for c, move in second.moves.items()})
    return Part(second.data, first.meta, second.data_end, second.buffer, moves)


def appended(first: Part, second: Part, data: np.ndarray, buffers: Buffers | None = None
             ) -> Part:
    """One part of the rows of two (one row group each, their chunks their own) whose bytes
    the caller laid in ``data``: ``first``'s, then ``second``'s chunks (``second.data`` is not
    read). The footers are joined as :func:`joined` joins them, both parts' buffers go back to
    ``buffers`` (their bytes are in ``data`` now), and ``data``, a buffer of ``buffers`` where
    they are given, goes back once the part is written.

    >>> import io
    >>> a, b = encode_part(pa.table({"x": [1, 2]})), encode_part(pa.table({"y": [3, 4]}))
    >>> data = np.concatenate([a.data[:a.data_end], b.data[len(MAGIC):b.data_end]])
    >>> both = appended(a, b, data)
    >>> buf = io.BytesIO(bytes(both.data[:both.data_end]) + footer([both]))
    >>> pq.read_table(buf).to_pydict()
    {'x': [1, 2], 'y': [3, 4]}
    """
    if first.moves or second.moves:
        raise ValueError("parts with chunks laid apart cannot be appended")
    for rg in T.field_of(second.meta, T.FILE_ROW_GROUPS)[2][1]:
        for cc in T.field_of(rg, T.RG_COLUMNS)[2][1]:
            _move_chunk(cc, first.size)
    _join_meta(first, second)
    for part in (first, second):
        if buffers is not None and part.buffer is not None:
            buffers.give(part.buffer)
    return Part(data, first.meta, first.data_end + second.size,
                data if buffers is not None else None)


def _move_chunk(cc: list, move: int) -> None:
    """A column chunk's offsets (its own, its pages', its indexes') moved by ``move``."""
    for fid in (T.CC_FILE_OFFSET, T.CC_OFFSET_INDEX, T.CC_COLUMN_INDEX):
        T.shift(cc, fid, move)
    cm = T.field_of(cc, T.CC_META)
    if cm is not None:
        for fid in T.CM_OFFSETS:
            T.shift(cm[2], fid, move)


def _join_meta(first: Part, second: Part) -> int:
    """``second``'s schema, column orders and row group's chunks and sizes joined to
    ``first``'s footer (taken over, not copied); returns how many columns ``first`` had."""
    if first.rows != second.rows:
        raise ValueError(f"parts of {first.rows} and {second.rows} rows cannot be joined")
    meta, other = first.meta, second.meta
    schema, more = T.field_of(meta, T.FILE_SCHEMA)[2][1], T.field_of(other, T.FILE_SCHEMA)[2][1]
    T.set_field(schema[0], T.SE_NUM_CHILDREN, T.T_I32, len(schema) + len(more) - 2)
    schema += more[1:]
    orders, more_orders = T.field_of(meta, T.FILE_COLUMN_ORDERS), T.field_of(other, T.FILE_COLUMN_ORDERS)
    if (orders is None) != (more_orders is None):
        raise FooterError("one part has column orders, the other not")
    if orders is not None:
        orders[2][1].extend(more_orders[2][1])
    (group,) = T.field_of(meta, T.FILE_ROW_GROUPS)[2][1]
    (more_group,) = T.field_of(other, T.FILE_ROW_GROUPS)[2][1]
    columns = T.field_of(group, T.RG_COLUMNS)[2][1]
    ahead = len(columns)
    columns += T.field_of(more_group, T.RG_COLUMNS)[2][1]
    for fid in (T.RG_BYTES, T.RG_COMPRESSED):
        extra = T.field_of(more_group, fid)
        if extra is not None and T.field_of(group, fid) is not None:
            T.shift(group, fid, extra[2])
    return ahead


def place(parts: list[Part], start: int = len(MAGIC)):
    """``(position, bytes)`` of each part's column chunks in the output, the first at
    ``start`` (after ``PAR1``, or after a region of chunks written apart), and ``(0, PAR1)``
    first; the caller writes them, in any order or in parallel."""
    yield 0, MAGIC
    for p, pos in zip(parts, offsets(parts, start)):
        yield pos, memoryview(p.data)[len(MAGIC):p.data_end]


def offsets(parts: list[Part], start: int = len(MAGIC)) -> list[int]:
    """Where each part's column chunks start in the output, the first at ``start``."""
    out, pos = [], start
    for p in parts:
        out.append(pos)
        pos += p.size
    return out


def moved_groups(part: Part, start: int, ordinal: int, *, in_place: bool = False) -> list[bytes]:
    """The part's row groups, encoded, with their offsets moved for a part whose column
    chunks start at ``start`` in the output and ordinals from ``ordinal`` on: a writer
    encodes them as its parts come (:func:`footer` takes them), instead of all of them at the
    end. ``in_place``: the
    part's own footer is changed rather than a copy (a writer that moves each part once)."""
    delta = start - len(MAGIC)
    out = []
    for rg in T.field_of(part.meta, T.FILE_ROW_GROUPS)[2][1]:
        rg = rg if in_place else _copy(rg)
        T.shift(rg, T.RG_FILE_OFFSET, part.moves.get(0, delta))  # where its first chunk lies
        for c, cc in enumerate(T.field_of(rg, T.RG_COLUMNS)[2][1]):
            _move_chunk(cc, part.moves.get(c, delta))
        T.set_field(rg, T.RG_ORDINAL, T.T_I16, ordinal + len(out))
        encoded = bytearray()
        T.write_struct(encoded, rg)
        out.append(bytes(encoded))
    return out


def file_meta(parts: list[Part], groups: list[bytes] | None = None,
              start: int = len(MAGIC)) -> list:
    """The output's ``FileMetaData`` without key-value metadata: the first part's schema and
    writer, every part's row group with its offsets moved (``groups``: those of
    :func:`moved_groups`, part after part, when the caller has them; else the parts laid from
    ``start`` on, as :func:`place` lays them), the total row count."""
    if not parts:
        raise ValueError("a file needs at least one part")
    if groups is None:
        groups = []
        for p, at in zip(parts, offsets(parts, start)):
            groups += moved_groups(p, at, len(groups))
    meta = [f for f in _copy(parts[0].meta) if f[0] != T.FILE_KV]
    T.set_field(meta, T.FILE_NUM_ROWS, T.T_I64, sum(p.rows for p in parts))
    T.set_field(meta, T.FILE_ROW_GROUPS, T.T_LIST, (T.T_STRUCT, groups))
    return meta


def footer(parts: list[Part], metadata: dict[str, str] | None = None,
           groups: list[bytes] | None = None, start: int = len(MAGIC)) -> bytes:
    """The output's footer (``FileMetaData``, its length, ``PAR1``), to be written right after
    the last part: the first part's schema and writer, every part's row group with its offsets
    moved (``groups``, ``start``: see :func:`file_meta`), the total row count, and
    ``metadata`` as the key-value metadata, in its order."""
    meta = file_meta(parts, groups, start)
    kv = [[[1, T.T_BINARY, k.encode()], [2, T.T_BINARY, v.encode()]]
          for k, v in (metadata or {}).items()]
    T.set_field(meta, T.FILE_KV, T.T_LIST, (T.T_STRUCT, kv))
    out = bytearray()
    T.write_struct(out, meta)
    return bytes(out) + struct.pack("<I", len(out)) + MAGIC


def footer_bounds(buf) -> tuple[int, int]:
    """Where the footer's ``FileMetaData`` lies in a whole Parquet file in ``buf`` (bytes,
    mmap): ``[start, stop)``; ``start`` is also the end of the column chunks."""
    size = len(buf)
    if size < 12 or bytes(buf[size - 4:]) != MAGIC or bytes(buf[:4]) != MAGIC:
        raise FooterError("not a Parquet file")
    (length,) = struct.unpack("<I", bytes(buf[size - 8:size - 4]))
    start = size - 8 - length
    if start < 4:
        raise FooterError("footer length out of range")
    return start, size - 8


def read_footer(buf) -> tuple[list, int]:
    """The decoded ``FileMetaData`` of a whole Parquet file in ``buf`` (bytes, mmap) and
    where the footer starts (the end of the column chunks)."""
    start, stop = footer_bounds(buf)
    meta, _ = T.read_struct(bytes(buf[start:stop]), 0)
    return meta, start


Span = tuple[int, int]


def group_spans(md: pq.FileMetaData, end: int, early: int = 0) -> list[tuple[Span, Span, Span]]:
    """The bytes of each row group of a file laid out as the index's save lays it: a region
    of the last column's chunks written apart (:func:`external_chunk`), then a region of the
    first ``early`` columns' chunks (:func:`joined`), then each group's other chunks. Per
    group: ``(its last column's chunk where it lies apart, its first ``early`` columns'
    chunks, its other chunks)``, each ``(start, stop)`` (``start == stop``: none). A file
    of one group of no rows holds all its bytes as the last span. ``md``: the file's
    metadata as pyarrow decoded it, ``end``: where its footer starts. Refused (FooterError):
    a group's chunks of one span that do not follow each other, spans that do not tile the
    file from ``PAR1`` to the footer, an empty group among others."""
    start = len(MAGIC)
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        if not rg.num_rows:
            if md.num_row_groups != 1:
                raise FooterError("an empty row group among others")
            out.append(((start, start), (start, start), (start, end)))
            continue
        chunks = [_chunk_span(rg.column(c)) for c in range(rg.num_columns)]
        if not early < len(chunks):
            raise FooterError("a row group without its own columns")
        apart = len(chunks) > early + 1 and chunks[-1][0] != chunks[-2][1]
        last = chunks[-1] if apart else (start, start)
        out.append((last, _run(chunks[:early]), _run(chunks[early:len(chunks) - apart])))
    spans = sorted(s for group in out for s in group if s[1] > s[0])
    pos = start
    for a, b in spans:
        if a != pos:
            raise FooterError("the row groups' chunks out of order: they do not tile the file")
        pos = b
    if pos != end and spans:
        raise FooterError("the row groups' chunks do not reach the footer")
    return out


def _chunk_span(column) -> Span:
    """Where a column chunk lies (pyarrow's metadata): its first page to its end."""
    at = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    return at, at + column.total_compressed_size


def _run(chunks: list[Span]) -> Span:
    """The span of chunks that follow each other (empty: none)."""
    if not chunks:
        return (0, 0)
    for (_, stop), (nxt, _) in zip(chunks, chunks[1:]):
        if nxt != stop:
            raise FooterError("a row group's chunks out of order")
    return chunks[0][0], chunks[-1][1]


def _copy(fields: list) -> list:
    """A deep copy of a decoded struct (lists of fields; values shared where immutable)."""
    out = []
    for fid, typ, value in fields:
        if typ == T.T_STRUCT:
            value = _copy(value)
        elif typ in (T.T_LIST, T.T_SET) and value[0] == T.T_STRUCT:
            value = (value[0], [_copy(v) for v in value[1]])
        out.append([fid, typ, value])
    return out
