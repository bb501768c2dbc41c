"""The early label columns' chunks encoded by the index's backend instead of pyarrow.

A save of rmat:23:12 spent 2.5-3.0 of its ~5 busy thread-seconds in pyarrow's encoding and
1.9-2.6 in bringing the rows over and transposing them on the host (README, Scale, stop 35):
the host's memory traffic bounds it, not the disk. Here the backend does that work where the
rows are: the columns of a part (``values``: one row per file column) are cut into pages of
:data:`ROWS_PER_PAGE` rows, each page byte-stream split (:func:`split_pages`, array code for
NumPy and CuPy alike) and compressed as one LZ4 block (``encode_pages_kernel`` in
``kernels/pages.cu`` on a GPU, its twin :func:`~grail_duckdb.kernels.cpu.pages.encode_pages`
on the host), and only the compressed blocks come to the host. :func:`label_part` lays them as
column chunks (a data page header before each block) behind a footer made from pyarrow's own
for the same columns (:func:`template`), so that :func:`.parquet_parts.appended` joins them to
pyarrow's part of the keys and components: readers (pyarrow, DuckDB, a GPU load's page
decoder) see the same encodings as before, BYTE_STREAM_SPLIT pages in LZ4_RAW.

A greedy encoder per 64 KiB page wrote blocks within 1-7% of pyarrow's (54.2 against 50.7 MB
for rmat:21:12's early columns, 105.0 against 102.6 for a 2M-paper citation index; README,
Scale, stop 35).
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from ..kernels import to_host
from ..kernels.cpu.pages import ENC_COLUMNS, lz4_bound
from . import parquet_parts
from .parquet_parts import (_CM_COMPRESSED, _CM_DATA_PAGE, _CM_STATISTICS, _CM_SIZE_STATISTICS,
                            _CM_UNCOMPRESSED, _CM_VALUES, _DATA_PAGE, _FILE_NUM_ROWS,
                            _FILE_ROW_GROUPS, _I32, _I64, _RG_BYTES, _RG_COLUMNS,
                            _RG_COMPRESSED, _RLE, _STRUCT, MAGIC, Part, _field, _set_field,
                            _write_struct)

#: rows per page: 1 MiB of int32, pyarrow's page size, so that a load parses no more page
#: headers than it does in pyarrow's files (64 KiB pages made rmat:23:12's load 1.7 times
#: as long on an H100, README, Scale, stop 36)
ROWS_PER_PAGE = 1 << 18
#: Parquet's BYTE_STREAM_SPLIT encoding
_SPLIT = 9
#: ColumnMetaData's encoding_stats (page counts by encoding), made again here
_CM_ENCODING_STATS = 13


def split_pages(xp, values, rows_per_page: int = ROWS_PER_PAGE):
    """The bytes of ``values`` (``(k, m)`` int32 of ``xp``: k columns of m rows), column after
    column, each column's pages of ``rows_per_page`` rows (the last one shorter) byte-stream
    split page by page: byte 0 of every value of the page, then byte 1, ...

    >>> split_pages(np, np.array([[1, 2, 3]], np.int32), 2).tolist()
    [1, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]
    """
    k, m = values.shape
    b = xp.ascontiguousarray(values).view(xp.uint8).reshape(k, m, 4)
    full = m // rows_per_page * rows_per_page
    head = b[:, :full].reshape(k, full // rows_per_page, rows_per_page, 4)
    head = head.transpose(0, 1, 3, 2).reshape(k, full * 4)
    tail = b[:, full:].transpose(0, 2, 1).reshape(k, (m - full) * 4)
    return xp.ascontiguousarray(xp.concatenate([head, tail], axis=1)).reshape(-1)


def page_rows(m: int, rows_per_page: int = ROWS_PER_PAGE) -> np.ndarray:
    """The rows of each page of a column of ``m`` rows.

    >>> page_rows(5, 2).tolist(), page_rows(0, 2).tolist()
    ([2, 2, 1], [])
    """
    full, rest = divmod(m, rows_per_page)
    return np.array([rows_per_page] * full + ([rest] if rest else []), np.int64)


def encode_columns(kernels, values, rows_per_page: int = ROWS_PER_PAGE):
    """The pages of ``values`` (``(k, m)`` int32 on ``kernels``' backend) encoded there:
    ``(rows of each page, block length of each page (k rows of pages), the blocks one after
    the other on the host)``. The encoder runs twice: once into room for the worst case, for
    the blocks' lengths, then with each block at its final place (it is deterministic), so
    that only the blocks' bytes come over, in one copy, with no step per page."""
    xp = kernels.xp
    k, m = values.shape
    rows = page_rows(m, rows_per_page)
    raw = np.tile(rows * 4, k)
    table = np.empty((raw.shape[0], ENC_COLUMNS), np.int64)
    table[:, 0] = np.concatenate([[0], np.cumsum(raw)[:-1]])
    table[:, 1] = raw
    bounds = np.array([lz4_bound(int(r)) for r in raw], np.int64)
    table[:, 2] = np.concatenate([[0], np.cumsum(bounds)[:-1]])
    src = split_pages(xp, values, rows_per_page)
    sizes = xp.empty(raw.shape[0], xp.int64)
    kernels.encode_pages(src, xp.asarray(table), xp.empty(max(int(bounds.sum()), 1), xp.uint8),
                         sizes)
    lengths = to_host(sizes)
    table[:, 2] = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    blocks = xp.empty(max(int(lengths.sum()), 1), xp.uint8)
    kernels.encode_pages(src, xp.asarray(table), blocks, sizes)
    return rows, lengths.reshape(k, -1), to_host(blocks)[:int(lengths.sum())]


def page_header(rows: int, raw: int, size: int) -> bytes:
    """The header of a data page of ``rows`` int32 values, byte-stream split, ``raw`` bytes
    compressed into an LZ4 block of ``size``."""
    out = bytearray()
    _write_struct(out, [[1, _I32, _DATA_PAGE], [2, _I32, raw], [3, _I32, size],
                        [5, _STRUCT, [[1, _I32, rows], [2, _I32, _SPLIT], [3, _I32, _RLE],
                                      [4, _I32, _RLE]]]])
    return bytes(out)


@functools.lru_cache(maxsize=64)
def template(names: tuple[str, ...]) -> list:
    """pyarrow's footer of a one-row part of the int32 columns ``names`` (NOT NULL,
    byte-stream split, LZ4): the schema, column orders and column metadata that
    :func:`label_part` fills in (copy it before changing it)."""
    schema = pa.schema([pa.field(n, pa.int32(), nullable=False) for n in names])
    table = pa.Table.from_arrays([pa.array([0], pa.int32()) for _ in names], schema=schema)
    part = parquet_parts.encode_part(
        table, use_dictionary=False, compression="lz4", write_statistics=False,
        column_encoding={n: "BYTE_STREAM_SPLIT" for n in names})
    return part.meta


def label_part(names: list[str], rows: np.ndarray, sizes: np.ndarray, blocks: np.ndarray
               ) -> Part:
    """The columns ``names`` of a part as a :class:`~.parquet_parts.Part` of their own: each
    column's pages (``rows`` each, blocks of ``sizes[j]`` bytes in ``blocks``, column after
    column) behind a header each, and a footer of pyarrow's for them (:func:`template`) with
    the counts, sizes and offsets of these chunks."""
    meta = parquet_parts._copy(template(tuple(names)))
    m = int(rows.sum())
    pieces, pos, at = [MAGIC], len(MAGIC), 0
    group = _field(meta, _FILE_ROW_GROUPS)[2][1][0]
    columns = _field(group, _RG_COLUMNS)[2][1]
    total_raw = total = 0
    for j, cc in enumerate(columns):
        start, raw_bytes = pos, 0
        for r, size in zip(rows, sizes[j]):
            head = page_header(int(r), int(r) * 4, int(size))
            pieces += [head, blocks[at:at + int(size)]]
            at += int(size)
            pos += len(head) + int(size)
            raw_bytes += len(head) + int(r) * 4
        cm = _field(cc, 3)[2]
        cm[:] = [f for f in cm if f[0] not in (_CM_STATISTICS, _CM_SIZE_STATISTICS)]
        _set_field(cm, _CM_VALUES, _I64, m)
        _set_field(cm, _CM_UNCOMPRESSED, _I64, raw_bytes)
        _set_field(cm, _CM_COMPRESSED, _I64, pos - start)
        _set_field(cm, _CM_DATA_PAGE, _I64, start)
        stats = _field(cm, _CM_ENCODING_STATS)
        if stats is not None:
            for entry in stats[2][1]:
                _set_field(entry, 3, _I32, len(rows))
        total_raw += raw_bytes
        total += pos - start
    _set_field(meta, _FILE_NUM_ROWS, _I64, m)
    _set_field(group, 3, _I64, m)
    _set_field(group, _RG_BYTES, _I64, total_raw)
    _set_field(group, _RG_COMPRESSED, _I64, total)
    data = np.frombuffer(b"".join(bytes(p) for p in pieces), np.uint8)
    return Part(data, meta, pos)
