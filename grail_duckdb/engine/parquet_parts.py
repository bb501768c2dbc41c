"""One Parquet file written in parts on every core.

pyarrow's Parquet writer encodes and compresses on one thread (about 1 GB/s of plain integers,
a few hundred MB/s with compression), and DuckDB's parallel writer converted and encoded the
index at 0.28 GB/s on 16 cores (issue 12). Here each part (a run of rows, one row group) is
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

from ..kernels.cpu.pages import PLAIN_ENCODING as _PLAIN
from ..kernels.cpu.pages import T_BINARY as _BINARY
from ..kernels.cpu.pages import T_BYTE as _BYTE
from ..kernels.cpu.pages import T_DOUBLE as _DOUBLE
from ..kernels.cpu.pages import T_FALSE as _FALSE
from ..kernels.cpu.pages import T_I16 as _I16
from ..kernels.cpu.pages import T_I32 as _I32
from ..kernels.cpu.pages import T_I64 as _I64
from ..kernels.cpu.pages import T_LIST as _LIST
from ..kernels.cpu.pages import T_MAP as _MAP
from ..kernels.cpu.pages import T_SET as _SET
from ..kernels.cpu.pages import T_STRUCT as _STRUCT
from ..kernels.cpu.pages import T_TRUE as _TRUE
from ..kernels.cpu.pages import blob_words

MAGIC = b"PAR1"


# field ids (parquet.thrift) of the offsets that move with a part
_FILE_ROW_GROUPS, _FILE_NUM_ROWS, _FILE_KV = 4, 3, 5
# ... and of what two parts of the same rows join (:func:`joined`)
_FILE_SCHEMA, _FILE_COLUMN_ORDERS, _SE_NUM_CHILDREN = 2, 7, 5
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
_CM_OFFSETS = (9, 10, 11, 14)  # data page, index page, dictionary page, bloom filter
# ... and of the sizes that a column chunk written here (Blobs) sets
_RG_BYTES, _RG_COMPRESSED = 2, 6
_CM_UNCOMPRESSED, _CM_COMPRESSED, _CM_DATA_PAGE, _CM_DICTIONARY_PAGE = 6, 7, 9, 11
_CM_STATISTICS, _CM_SIZE_STATISTICS = 12, 16
_CM_PATH, _CM_VALUES = 3, 5  # path_in_schema, num_values
# page types and encodings (parquet.thrift; PLAIN above)
_DATA_PAGE, _RLE = 0, 3


class FooterError(ValueError):
    """A part's footer could not be decoded."""


# --- the compact protocol: decode into [fid, type, value] lists, encode them back ----------
def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise FooterError("varint too long")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _read_value(buf: bytes, pos: int, typ: int):
    if typ in (_TRUE, _FALSE):  # a bool inside a list or map: one byte
        return buf[pos], pos + 1
    if typ == _BYTE:
        return buf[pos], pos + 1
    if typ in (_I16, _I32, _I64):
        v, pos = _uvarint(buf, pos)
        return _zigzag(v), pos
    if typ == _DOUBLE:
        return bytes(buf[pos:pos + 8]), pos + 8
    if typ == _BINARY:
        n, pos = _uvarint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if typ in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _uvarint(buf, pos)
        items = []
        for _ in range(size):
            v, pos = _read_value(buf, pos, elem)
            items.append(v)
        return (elem, items), pos
    if typ == _MAP:
        size, pos = _uvarint(buf, pos)
        kt = vt = 0
        if size:
            kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
            pos += 1
        items = []
        for _ in range(size):
            k, pos = _read_value(buf, pos, kt)
            v, pos = _read_value(buf, pos, vt)
            items.append((k, v))
        return (kt, vt, items), pos
    if typ == _STRUCT:
        return _read_struct(buf, pos)
    raise FooterError(f"unknown Thrift type {typ}")


def _read_struct(buf: bytes, pos: int) -> tuple[list, int]:
    fields, last = [], 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return fields, pos
        delta, typ = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            raw, pos = _uvarint(buf, pos)
            fid = _zigzag(raw)
        if typ in (_TRUE, _FALSE):
            value = None  # the type carries the value
        else:
            value, pos = _read_value(buf, pos, typ)
        fields.append([fid, typ, value])
        last = fid


def _write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_zigzag(out: bytearray, n: int) -> None:
    _write_uvarint(out, (n << 1) ^ (n >> 63) if n < 0 else n << 1)


def _write_value(out: bytearray, typ: int, value) -> None:
    if typ in (_TRUE, _FALSE, _BYTE):
        out.append(value & 0xFF)
    elif typ in (_I16, _I32, _I64):
        _write_zigzag(out, value)
    elif typ == _DOUBLE:
        out += value
    elif typ == _BINARY:
        _write_uvarint(out, len(value))
        out += value
    elif typ in (_LIST, _SET):
        elem, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | elem)
        else:
            out.append(0xF0 | elem)
            _write_uvarint(out, len(items))
        for v in items:
            _write_value(out, elem, v)
    elif typ == _MAP:
        kt, vt, items = value
        _write_uvarint(out, len(items))
        if items:
            out.append((kt << 4) | vt)
        for k, v in items:
            _write_value(out, kt, k)
            _write_value(out, vt, v)
    elif typ == _STRUCT:
        if isinstance(value, bytes):  # encoded already (:func:`moved_groups`)
            out += value
        else:
            _write_struct(out, value)
    else:
        raise FooterError(f"unknown Thrift type {typ}")


def _write_struct(out: bytearray, fields: list) -> None:
    last = 0
    for fid, typ, value in fields:
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | typ)
        else:
            out.append(typ)
            _write_zigzag(out, fid)
        if typ not in (_TRUE, _FALSE):
            _write_value(out, typ, value)
        last = fid
    out.append(0)


def _field(fields: list, fid: int):
    return next((f for f in fields if f[0] == fid), None)


def _set_field(fields: list, fid: int, typ: int, value) -> None:
    f = _field(fields, fid)
    if f is None:
        fields.append([fid, typ, value])
        fields.sort(key=lambda f: f[0])
    else:
        f[1], f[2] = typ, value


def _shift(fields: list, fid: int, delta: int) -> None:
    f = _field(fields, fid)
    if f is not None:
        f[2] += delta


# --- parts --------------------------------------------------------------------------------
@dataclass
class Blobs:
    """A column of BLOBs of int32 words that this module writes itself, as one PLAIN data page
    (pyarrow's writer takes about 50 ns per BLOB, this a few per word: :mod:`..kernels.cpu.pages`):
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
        return _field(self.meta, _FILE_NUM_ROWS)[2]


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
    meta, _ = _read_struct(bytes(data[start:start + length]), 0)
    return Part(data, meta, start, buf)


def _write(table: pa.Table, sink, options: dict) -> None:
    pq.write_table(table, sink, row_group_size=max(table.num_rows, 1), store_schema=False,
                   **options)


def _def_levels(valid: np.ndarray | None, rows: int) -> bytes:
    """The definition levels of a nullable flat column (bit width 1) in the RLE / bit-packing
    hybrid: one RLE run of 1s when every row holds a value, else one bit-packed run."""
    out = bytearray()
    if valid is None:
        _write_uvarint(out, rows << 1)
        out.append(1)
    else:
        _write_uvarint(out, ((rows + 7) >> 3) << 1 | 1)
        out += np.packbits(valid.astype(np.bool_, copy=False), bitorder="little").tobytes()
    return bytes(out)


def _blob_head(name: str, rows: int, valid: np.ndarray | None, count: int, words: int) -> bytes:
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


def data_page_header(rows: int, raw: int, size: int, encoding: int = _PLAIN) -> bytes:
    """The header of a version-1 data page of ``rows`` values in ``encoding`` (PLAIN or
    BYTE_STREAM_SPLIT), ``raw`` bytes stored in ``size`` (compressed or not), its levels
    RLE."""
    out = bytearray()
    _write_struct(out, [[1, _I32, _DATA_PAGE], [2, _I32, raw], [3, _I32, size],
                        [5, _STRUCT, [[1, _I32, rows], [2, _I32, encoding], [3, _I32, _RLE],
                                      [4, _I32, _RLE]]]])
    return bytes(out)


def blob_page_bytes(name: str, rows: int, valid: np.ndarray | None, count: int,
                    words: int) -> int:
    """Bytes of the PLAIN page that :func:`write_blob_page` writes for ``count`` BLOBs of
    ``words`` words in all over ``rows`` rows (``valid``: the rows that hold one; None:
    every row), known before the BLOBs are at hand."""
    return len(_blob_head(name, rows, valid, count, words)) + 4 * (count + words)


def blob_page_size(blobs: Blobs, rows: int) -> int:
    """Bytes of the PLAIN page that :func:`write_blob_page` writes for ``blobs`` (known from
    the pointers alone: the children need not be at hand yet)."""
    return blob_page_bytes(blobs.name, rows, blobs.valid, blobs.ptr.shape[0] - 1,
                           int(blobs.ptr[-1] - blobs.ptr[0]))


def write_blob_page(blobs: Blobs, rows: int, out: np.ndarray) -> None:
    """``blobs`` as one PLAIN data page of a nullable BLOB column of ``rows`` rows, into
    ``out`` (uint8, :func:`blob_page_size` bytes): the header, the definition levels, then
    each BLOB's byte length and words (:func:`~grail_duckdb.kernels.cpu.pages.blob_words`;
    the words need not be aligned: Numba stores them as they are, at the same speed)."""
    if int(blobs.ptr[-1] - blobs.ptr[0]) != blobs.children.shape[0]:
        raise ValueError(f"{blobs.name}: the BLOBs' pointers do not cover their children")
    count = blobs.ptr.shape[0] - 1
    head = _blob_head(blobs.name, rows, blobs.valid, count, blobs.children.shape[0])
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
    group = _field(part.meta, _FILE_ROW_GROUPS)[2][1][0]
    columns = _field(group, _RG_COLUMNS)[2][1]
    chunk_meta = _field(columns[-1], _CC_META)[2]
    if (_field(chunk_meta, _CM_PATH)[2][1][-1] != name.encode()
            or _field(chunk_meta, _CM_VALUES)[2] != table.num_rows):
        raise ValueError(f"{name}: the part is not that of the table")
    start, old = _field(chunk_meta, _CM_DATA_PAGE)[2], _field(chunk_meta, _CM_COMPRESSED)[2]
    if _field(chunk_meta, _CM_DICTIONARY_PAGE) is not None or start + old != part.data_end:
        raise FooterError("the BLOBs' placeholder is not the part's last plain chunk")
    for fid in (_CM_UNCOMPRESSED, _CM_COMPRESSED):
        _set_field(chunk_meta, fid, _I64, size)
    chunk_meta[:] = [f for f in chunk_meta if f[0] not in (_CM_STATISTICS, _CM_SIZE_STATISTICS)]
    for fid in (_RG_BYTES, _RG_COMPRESSED):
        _shift(group, fid, size - old)
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
    for rg in _field(second.meta, _FILE_ROW_GROUPS)[2][1]:
        for cc in _field(rg, _RG_COLUMNS)[2][1]:
            _move_chunk(cc, first.size)
    _join_meta(first, second)
    for part in (first, second):
        if buffers is not None and part.buffer is not None:
            buffers.give(part.buffer)
    return Part(data, first.meta, first.data_end + second.size,
                data if buffers is not None else None)


def _move_chunk(cc: list, move: int) -> None:
    """A column chunk's offsets (its own, its pages', its indexes') moved by ``move``."""
    for fid in (_CC_FILE_OFFSET, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX):
        _shift(cc, fid, move)
    cm = _field(cc, _CC_META)
    if cm is not None:
        for fid in _CM_OFFSETS:
            _shift(cm[2], fid, move)


def _join_meta(first: Part, second: Part) -> int:
    """``second``'s schema, column orders and row group's chunks and sizes joined to
    ``first``'s footer (taken over, not copied); returns how many columns ``first`` had."""
    if first.rows != second.rows:
        raise ValueError(f"parts of {first.rows} and {second.rows} rows cannot be joined")
    meta, other = first.meta, second.meta
    schema, more = _field(meta, _FILE_SCHEMA)[2][1], _field(other, _FILE_SCHEMA)[2][1]
    _set_field(schema[0], _SE_NUM_CHILDREN, _I32, len(schema) + len(more) - 2)
    schema += more[1:]
    orders, more_orders = _field(meta, _FILE_COLUMN_ORDERS), _field(other, _FILE_COLUMN_ORDERS)
    if (orders is None) != (more_orders is None):
        raise FooterError("one part has column orders, the other not")
    if orders is not None:
        orders[2][1].extend(more_orders[2][1])
    (group,) = _field(meta, _FILE_ROW_GROUPS)[2][1]
    (more_group,) = _field(other, _FILE_ROW_GROUPS)[2][1]
    columns = _field(group, _RG_COLUMNS)[2][1]
    ahead = len(columns)
    columns += _field(more_group, _RG_COLUMNS)[2][1]
    for fid in (_RG_BYTES, _RG_COMPRESSED):
        extra = _field(more_group, fid)
        if extra is not None and _field(group, fid) is not None:
            _shift(group, fid, extra[2])
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
    end (1.2 s for 656 parts at 2.5B edges: README, Scale, stop 28). ``in_place``: the
    part's own footer is changed rather than a copy (a writer that moves each part once)."""
    delta = start - len(MAGIC)
    out = []
    for rg in _field(part.meta, _FILE_ROW_GROUPS)[2][1]:
        rg = rg if in_place else _copy(rg)
        _shift(rg, _RG_FILE_OFFSET, part.moves.get(0, delta))  # where its first chunk lies
        for c, cc in enumerate(_field(rg, _RG_COLUMNS)[2][1]):
            _move_chunk(cc, part.moves.get(c, delta))
        _set_field(rg, _RG_ORDINAL, _I16, ordinal + len(out))
        encoded = bytearray()
        _write_struct(encoded, rg)
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
    meta = [f for f in _copy(parts[0].meta) if f[0] != _FILE_KV]
    _set_field(meta, _FILE_NUM_ROWS, _I64, sum(p.rows for p in parts))
    _set_field(meta, _FILE_ROW_GROUPS, _LIST, (_STRUCT, groups))
    return meta


def footer(parts: list[Part], metadata: dict[str, str] | None = None,
           groups: list[bytes] | None = None, start: int = len(MAGIC)) -> bytes:
    """The output's footer (``FileMetaData``, its length, ``PAR1``), to be written right after
    the last part: the first part's schema and writer, every part's row group with its offsets
    moved (``groups``, ``start``: see :func:`file_meta`), the total row count, and
    ``metadata`` as the key-value metadata, in its order."""
    meta = file_meta(parts, groups, start)
    kv = [[[1, _BINARY, k.encode()], [2, _BINARY, v.encode()]]
          for k, v in (metadata or {}).items()]
    _set_field(meta, _FILE_KV, _LIST, (_STRUCT, kv))
    out = bytearray()
    _write_struct(out, meta)
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
    meta, _ = _read_struct(bytes(buf[start:stop]), 0)
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
        if typ == _STRUCT:
            value = _copy(value)
        elif typ in (_LIST, _SET) and value[0] == _STRUCT:
            value = (value[0], [_copy(v) for v in value[1]])
        out.append([fid, typ, value])
    return out
