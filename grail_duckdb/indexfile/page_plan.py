"""Which of a row group's label columns a load decodes itself, and where their pages lie.

pyarrow's decoding of the row groups is most of a load's CPU time. The label columns stored
PLAIN or byte-stream-split, uncompressed or as LZ4 blocks (:mod:`.format`: the
intervals, the trees, the levels, the window hubs' bits, and every hub bit a GPU index's save
wrote: :mod:`.label_pages`) need no more than an LZ4 block decoder and a byte transpose per
page. On a GPU load their bytes go to the device as they lie
in the file and ``pages_kernel`` (``kernels/pages.cu``) decodes each page and writes its
values straight into the index's arrays. A CPU load leaves every column to pyarrow: its C
decoder takes a seventh of the time of the kernel's Numba twin (:func:`decode`), which the
tests hold the kernel to. Any other column, and any chunk whose pages are not of that kind (a dictionary page,
another codec, nullable or repeated, a header that does not decode), is left to pyarrow. A
page that does not decode into its values refuses the file, as any damage does. The page
headers are read by a Numba walker of Thrift's compact protocol
(:func:`.page_headers.page_table`), without the interpreter's lock, on every core at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from ..kernels import kernels_for
from ..kernels.shared import PAGE_COLUMNS, PAGE_LZ4, PAGE_RAW, PAGE_ROWS, PAGE_SCRATCH
from .page_headers import page_table

#: bytes per value of the physical types decoded here
_WIDTHS = {"INT32": 4, "INT64": 8}
#: pyarrow's names of the codecs decoded here: "LZ4" is Parquet's LZ4_RAW (one LZ4 block per
#: page; the older framed LZ4 reads as another name)
_CODECS = {"UNCOMPRESSED": 0, "LZ4": PAGE_LZ4}


@dataclass
class Chunk:
    """One column chunk whose pages a load decodes itself: its bytes ``[start, stop)`` in
    the file, its values' width and dtype, and its pages (``table``: one row per page, the
    columns of :data:`~grail_duckdb.kernels.shared.PAGE_COLUMNS`; ``PAGE_SRC`` from the
    chunk's start, ``PAGE_SCRATCH`` from 0, no destination yet)."""

    name: str
    start: int
    stop: int
    dtype: np.dtype
    table: np.ndarray

    @property
    def scratch(self) -> int:
        """Bytes of room its LZ4 pages need once decompressed."""
        lz4 = self.table[:, PAGE_SCRATCH] >= 0
        return int(self.table[lz4, PAGE_RAW].sum())


def chunk_pages(buf, column: pq.ColumnChunkMetaData, schema: pq.ColumnSchema, dtype,
                rows: int) -> Chunk | None:
    """The pages of a column chunk of ``rows`` values of ``dtype`` (``buf``: the whole file,
    mapped), if a load can decode them itself; else None (pyarrow decodes it).

    >>> import io, pyarrow as pa
    >>> out = io.BytesIO()
    >>> x = pa.field("x", pa.int32(), nullable=False)  # nullable: pyarrow decodes it
    >>> pq.write_table(pa.table([pa.array([5, 6, 7], pa.int32())], pa.schema([x])), out,
    ...                column_encoding={"x": "BYTE_STREAM_SPLIT"}, use_dictionary=False,
    ...                compression="lz4")
    >>> md = pq.ParquetFile(out).metadata
    >>> chunk = chunk_pages(out.getvalue(), md.row_group(0).column(0), md.schema.column(0),
    ...                     np.int32, 3)
    >>> decode(out.getvalue(), chunk).tolist()
    [5, 6, 7]
    """
    dtype = np.dtype(dtype)
    width, codec = _WIDTHS.get(column.physical_type), _CODECS.get(column.compression)
    if (width is None or width != dtype.itemsize or codec is None or column.has_dictionary_page
            or schema.max_definition_level or schema.max_repetition_level):
        return None
    start = column.data_page_offset
    stop = start + column.total_compressed_size
    if start < 0 or stop > len(buf):
        return None
    src = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, np.uint8)
    try:
        table = page_table(src, start, stop, width, codec == PAGE_LZ4, rows)
    finally:
        del src  # no view of a mapped file outlives the call (the map closes after a load)
    if table.shape[1] != PAGE_COLUMNS:
        return None
    return Chunk(column.path_in_schema, start, stop, dtype, table)


def group_chunks(md: pq.FileMetaData, g: int, buf, dtypes: dict) -> dict[str, Chunk]:
    """The chunks of row group ``g`` of the columns ``dtypes`` (name -> dtype) that a load
    decodes itself (:func:`chunk_pages`), by name."""
    rg = md.row_group(g)
    out = {}
    src = np.frombuffer(buf, np.uint8)  # one view of the file for all the chunks
    try:
        for c in range(rg.num_columns):
            column = rg.column(c)
            dtype = dtypes.get(column.path_in_schema)
            if dtype is not None:
                chunk = chunk_pages(src, column, md.schema.column(c), dtype, rg.num_rows)
                if chunk is not None:
                    out[chunk.name] = chunk
    finally:
        del src  # no view of a mapped file outlives the call
    return out


def decode(buf, chunk: Chunk) -> np.ndarray:
    """A chunk's values on the host (the Numba twin of ``pages_kernel``: the tests' reference
    for the kernel); a page that does not hold its values raises ValueError."""
    rows = int(chunk.table[:, PAGE_ROWS].sum()) if chunk.table.shape[0] else 0
    out = np.empty(rows * chunk.dtype.itemsize, np.uint8)
    src = np.frombuffer(buf, np.uint8, count=chunk.stop - chunk.start, offset=chunk.start)
    try:
        ok = kernels_for("cpu").page_values(src, chunk.table, np.empty(chunk.scratch, np.uint8),
                                            out)
    finally:
        del src  # no view of a mapped file outlives the call (the map closes after a load)
    if not ok:
        raise ValueError(f"a page of column {chunk.name} does not decode into its values")
    return out.view(chunk.dtype)
