"""The label columns' chunks encoded by the index's backend instead of pyarrow.

Encoding on the host means bringing every row over, transposing it and compressing it there:
the host's memory traffic, not the disk, bounds such a save. Here the backend does that work
where the rows are, for a batch of parts at once (:func:`encode_parts`): each part's columns (one row
per file column) are cut into pages of :data:`PAGE_BYTES`, each page of the early columns
(int32) byte-stream split (:func:`split_pages`, array code for NumPy and CuPy alike), the hub
bits' pages (uint64) plain, and compressed as one LZ4 block (:func:`encode_pages`: a warp
parses each 64 KiB chunk of a page, ``parse_chunks_kernel`` in ``kernels/pages.cu``, and
writes its bytes in place, ``emit_chunks_kernel``; their twins in
:mod:`grail_duckdb.kernels.cpu.pages`), and only the blocks come to the host, in one copy
into the part's buffer with room left for the page headers. :func:`with_pages` lays them as
column chunks beside pyarrow's part of the same rows (after the keys and components, before
the children's placeholder), with a footer made from pyarrow's own for the same columns
(:func:`template`): readers (pyarrow, DuckDB, a GPU load's page decoder) see
BYTE_STREAM_SPLIT and PLAIN pages in LZ4_RAW.

The early columns' blocks are as large as pyarrow's: the encoder hashes 5 bytes, as LZ4 does
for blocks past 64 KiB, extends matches backwards and writes the slot two bytes before a
match's end. The hub bits, plain rather than pyarrow's dictionaries, make the file about 5%
larger, and a GPU load decodes them on the device too.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..kernels import is_device_array, to_host
from ..kernels.shared import (CH_BYTES, CH_END, CH_FIRST, CH_PAGE, CH_REST, CHUNK, CHUNK_COLUMNS,
                              PL_ANCHOR, PL_AT, PL_LAST, PLACE_COLUMNS, REC_LITERALS, REC_MATCH,
                              REC_MATCHES, REC_REST, REC_TAIL, RECORD_COLUMNS, lz4_bound)
from . import parts as parquet_parts
from . import thrift as T
from .parts import MAGIC, Part, data_page_header
from .thrift import PLAIN_ENCODING, SPLIT_ENCODING

#: bytes per page (before compression): pyarrow's page size, so that a load parses no more
#: page headers than it does in pyarrow's files
PAGE_BYTES = 1 << 20
#: rows per page of int32
ROWS_PER_PAGE = PAGE_BYTES // 4


def split_pages(xp, values, rows_per_page: int = ROWS_PER_PAGE):
    """The bytes of ``values`` (``(k, m)`` of ``xp``: k columns of m rows), column after
    column, each column's pages of ``rows_per_page`` rows (the last one shorter) byte-stream
    split page by page: byte 0 of every value of the page, then byte 1, ...

    >>> split_pages(np, np.array([[1, 2, 3]], np.int32), 2).tolist()
    [1, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]
    """
    k, m = values.shape
    w = values.dtype.itemsize
    b = xp.ascontiguousarray(values).view(xp.uint8).reshape(k, m, w)
    full = m // rows_per_page * rows_per_page
    head = b[:, :full].reshape(k, full // rows_per_page, rows_per_page, w)
    head = head.transpose(0, 1, 3, 2).reshape(k, full * w)
    tail = b[:, full:].transpose(0, 2, 1).reshape(k, (m - full) * w)
    return xp.ascontiguousarray(xp.concatenate([head, tail], axis=1)).reshape(-1)


def page_rows(m: int, rows_per_page: int = ROWS_PER_PAGE) -> np.ndarray:
    """The rows of each page of a column of ``m`` rows.

    >>> page_rows(5, 2).tolist(), page_rows(0, 2).tolist()
    ([2, 2, 1], [])
    """
    full, rest = divmod(m, rows_per_page)
    return np.array([rows_per_page] * full + ([rest] if rest else []), np.int64)


def chunk_table(raw: np.ndarray) -> np.ndarray:
    """The chunks of pages of ``raw`` bytes each, laid one after the other in the source:
    one row per chunk (:data:`~grail_duckdb.kernels.shared.CHUNK_COLUMNS`), each page
    cut into chunks of :data:`~grail_duckdb.kernels.shared.CHUNK` bytes (one at least),
    with room in the scratch for each chunk's sequences.

    >>> chunk_table(np.array([5, 0, 70_000])).tolist()
    [[0, 5, 0, 5, 0], [5, 0, 0, 0, 21], [5, 70000, 0, 65536, 37], [5, 70000, 65536, 70000, 65846]]
    """
    raw = np.asarray(raw, np.int64)
    counts = np.maximum(-(-raw // CHUNK), 1)
    page = np.repeat(np.arange(raw.shape[0]), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    out = np.empty((page.shape[0], CHUNK_COLUMNS), np.int64)
    out[:, CH_PAGE] = (np.cumsum(raw) - raw)[page]
    out[:, CH_BYTES] = raw[page]
    out[:, CH_FIRST] = (np.arange(page.shape[0]) - first) * CHUNK
    out[:, CH_END] = np.minimum(out[:, CH_FIRST] + CHUNK, out[:, CH_BYTES])
    room = lz4_bound(out[:, CH_END] - out[:, CH_FIRST])
    out[:, CH_REST] = np.cumsum(room) - room
    return out


def _length_bytes(n):
    """Bytes an LZ4 length of ``n`` takes past its token's 4 bits."""
    return np.where(n >= 15, (n - 15) // 255 + 1, 0)


def chunk_places(chunks: np.ndarray, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each chunk's bytes go in the blocks, laid page after page, from what the parse
    found in it (``records``): ``(places (one row per chunk,
    :data:`~grail_duckdb.kernels.shared.PLACE_COLUMNS`), each page's block length)``.
    A chunk's first sequence takes the literals that end the chunks before it, back to the
    page's last match; a chunk without a match writes nothing but, ending its page, the
    block's last literals."""
    matches = records[:, REC_MATCHES] > 0
    page = chunks[:, CH_PAGE]
    ends = np.where(matches, page + records[:, REC_TAIL], -1)
    before = np.concatenate([[-1], np.maximum.accumulate(ends)[:-1]]) if ends.size else ends
    anchor = np.maximum(before - page, 0)
    last = np.ones(chunks.shape[0], bool)
    last[:-1] = (chunks[1:, CH_FIRST] == 0)
    lit = chunks[:, CH_FIRST] + records[:, REC_LITERALS] - anchor
    first = 3 + _length_bytes(lit) + lit + _length_bytes(records[:, REC_MATCH] - 4)
    tail = chunks[:, CH_BYTES] - np.where(matches, records[:, REC_TAIL], anchor)
    size = (np.where(matches, first + records[:, REC_REST], 0)
            + np.where(last, 1 + _length_bytes(tail) + tail, 0))
    places = np.empty((chunks.shape[0], PLACE_COLUMNS), np.int64)
    places[:, PL_AT] = np.cumsum(size) - size
    places[:, PL_ANCHOR] = anchor
    places[:, PL_LAST] = last
    starts = np.flatnonzero(chunks[:, CH_FIRST] == 0)
    return places, np.add.reduceat(size, starts) if starts.size else np.zeros(0, np.int64)


def encode_pages(kernels, src, raw: np.ndarray, gap=None):
    """The pages of ``src`` (bytes on ``kernels``' backend, pages of ``raw`` bytes one after
    the other) as LZ4 blocks there: ``(each block's length, the blocks one after the
    other)``. A warp parses each chunk (``parse_chunks_kernel``), the host places the
    chunks' sequences from what it found (:func:`chunk_places`, a few numbers a chunk), and
    a warp writes each chunk's bytes in place (``emit_chunks_kernel``). ``gap``, a function
    of the blocks' lengths, gives the bytes to leave before each block (its page header's)."""
    xp = kernels.xp
    chunks = chunk_table(raw)
    if not chunks.shape[0]:
        return np.zeros(0, np.int64), xp.zeros(0, xp.uint8)
    room = int(lz4_bound(chunks[-1, CH_END] - chunks[-1, CH_FIRST]) + chunks[-1, CH_REST])
    on_device = xp.asarray(chunks)
    rest = xp.empty(room, xp.uint8)
    records = xp.zeros((chunks.shape[0], RECORD_COLUMNS), xp.int64)
    kernels.parse_chunks(src, on_device, rest, records)
    places, sizes = chunk_places(chunks, to_host(records))
    shift = np.cumsum(gap(sizes)) if gap is not None else np.zeros(sizes.shape[0], np.int64)
    places[:, PL_AT] += shift[np.cumsum(chunks[:, CH_FIRST] == 0) - 1]
    total = int(sizes.sum() + shift[-1])
    out = xp.empty(max(total, 1), xp.uint8)
    kernels.emit_chunks(src, on_device, rest, records, xp.asarray(places), out)
    return sizes, out[:total]


class Encoded(NamedTuple):
    """Columns' pages encoded on a backend (:func:`encode_parts`): each page's rows, each
    block's length (a row of pages per column), each page's header, the chunks' bytes on the
    backend with room left for the headers before their blocks, and what the values are
    (their dtype's name, whether byte-stream split)."""

    rows: np.ndarray
    sizes: np.ndarray
    heads: list
    data: object
    dtype: str
    split: bool


def encode_parts(kernels, parts: list, split: bool = True) -> list[Encoded]:
    """The pages of several parts' columns (``parts``: a ``(k, m)`` array of one dtype on
    ``kernels``' backend each; pages of :data:`PAGE_BYTES`) encoded there at once
    (:func:`encode_pages`: one launch of each kernel for them all, rather than a launch per
    part, which left the device waiting on the host between the parts), byte-stream split
    or plain, each part laid as its column chunks but for their page headers: ``k`` chunks
    one after the other, each a header's room and a block per page."""
    xp = kernels.xp
    width = parts[0].dtype.itemsize
    per_page = PAGE_BYTES // width
    rows = [page_rows(v.shape[1], per_page) for v in parts]
    every = np.concatenate([np.tile(r, v.shape[0]) for r, v in zip(rows, parts)])
    heads, lengths = [], np.zeros(every.shape[0], np.int64)
    encoding = SPLIT_ENCODING if split else PLAIN_ENCODING

    def gap(sizes):
        heads.extend(data_page_header(int(r), int(r) * width, int(size), encoding)
                     for r, size in zip(every, sizes))
        lengths[:] = [len(h) for h in heads]
        return lengths

    src = xp.concatenate([split_pages(xp, v, per_page) if split
                          else xp.ascontiguousarray(v).view(xp.uint8).reshape(-1)
                          for v in parts])
    sizes, data = encode_pages(kernels, src, every * width, gap)
    ends = np.cumsum(sizes + lengths)  # where each page's block ends in ``data``
    out, page = [], 0
    for r, v in zip(rows, parts):
        end = page + r.shape[0] * v.shape[0]
        out.append(Encoded(r, sizes[page:end].reshape(v.shape[0], -1), heads[page:end],
                           data[(ends[page - 1] if page else 0):ends[end - 1]],
                           v.dtype.name, split))
        page = end
    return out


@functools.lru_cache(maxsize=64)
def template(names: tuple[str, ...], dtype: str = "int32", split: bool = True) -> list:
    """pyarrow's footer of a one-row part of the columns ``names`` of ``dtype`` (NOT NULL,
    byte-stream split or plain, LZ4): the schema, column orders and column metadata that
    :func:`label_part` fills in (copy it before changing it)."""
    kind = pa.from_numpy_dtype(np.dtype(dtype))
    schema = pa.schema([pa.field(n, kind, nullable=False) for n in names])
    table = pa.Table.from_arrays([pa.array([0], kind) for _ in names], schema=schema)
    part = parquet_parts.encode_part(
        table, use_dictionary=False, compression="lz4", write_statistics=False,
        column_encoding={n: "BYTE_STREAM_SPLIT" if split else "PLAIN" for n in names})
    return part.meta


def label_part(names: list[str], encoded: Encoded) -> Part:
    """The footer of the columns ``names`` as a :class:`~.parquet_parts.Part` of their own
    whose bytes are ``encoded``'s chunks (not copied here: ``data`` is None): pyarrow's
    footer for them (:func:`template`) with the counts, sizes and offsets of the chunks."""
    meta = parquet_parts._copy(template(tuple(names), encoded.dtype, encoded.split))
    rows, sizes, heads = encoded.rows, encoded.sizes, encoded.heads
    width = np.dtype(encoded.dtype).itemsize
    m = int(rows.sum())
    group = T.field_of(meta, T.FILE_ROW_GROUPS)[2][1][0]
    columns = T.field_of(group, T.RG_COLUMNS)[2][1]
    pos, total_raw, total, h = len(MAGIC), 0, 0, 0
    for j, cc in enumerate(columns):
        start, raw_bytes = pos, 0
        for r, size in zip(rows, sizes[j]):
            pos += len(heads[h]) + int(size)
            raw_bytes += len(heads[h]) + int(r) * width
            h += 1
        cm = T.field_of(cc, T.CC_META)[2]
        cm[:] = [f for f in cm if f[0] not in (T.CM_STATISTICS, T.CM_SIZE_STATISTICS)]
        T.set_field(cm, T.CM_VALUES, T.T_I64, m)
        T.set_field(cm, T.CM_UNCOMPRESSED, T.T_I64, raw_bytes)
        T.set_field(cm, T.CM_COMPRESSED, T.T_I64, pos - start)
        T.set_field(cm, T.CM_DATA_PAGE, T.T_I64, start)
        stats = T.field_of(cm, T.CM_ENCODING_STATS)
        if stats is not None:
            for entry in stats[2][1]:
                T.set_field(entry, 3, T.T_I32, len(rows))
        total_raw += raw_bytes
        total += pos - start
    T.set_field(meta, T.FILE_NUM_ROWS, T.T_I64, m)
    T.set_field(group, 3, T.T_I64, m)
    T.set_field(group, T.RG_BYTES, T.T_I64, total_raw)
    T.set_field(group, T.RG_COMPRESSED, T.T_I64, total)
    return Part(None, meta, pos)


def with_pages(part: Part, names: list[str], encoded: Encoded, buffers=None,
               before: bool = False) -> Part:
    """``part`` (pyarrow's part of the same rows) and the columns ``names`` of ``encoded``,
    after its own columns or ``before`` them, in one buffer (of ``buffers`` if given):
    ``part``'s bytes and the chunks copied once from the backend, the page headers written
    into their room."""
    pages = label_part(names, encoded)
    n = part.data_end + pages.size
    data = buffers.take(n) if buffers is not None else np.empty(n, np.uint8)
    own = part.data[:part.data_end]
    if before:  # the magic, the pages, then the part's chunks
        at = len(MAGIC)
        data[:at] = own[:at]
        data[at + pages.size:n] = own[at:]
    else:
        at = part.data_end
        data[:at] = own
    landing = data[at:at + pages.size]
    if is_device_array(encoded.data):
        to_host(encoded.data, landing)  # through pinned buffers
    else:
        landing[...] = encoded.data
    pos = 0
    for head, size in zip(encoded.heads, encoded.sizes.reshape(-1)):
        landing[pos:pos + len(head)] = np.frombuffer(head, np.uint8)
        pos += len(head) + int(size)
    first, second = (pages, part) if before else (part, pages)
    return parquet_parts.appended(first, second, data, buffers)
