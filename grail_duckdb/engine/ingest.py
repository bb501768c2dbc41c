"""Edge input -> two Arrow key columns (src, dst), checked, read chunk by chunk.

Accepted inputs: a pyarrow Table, RecordBatch or ``RecordBatchReader``, a DuckDB relation,
or a Parquet file or a folder of them (a path), whose endpoint columns are named by the
strings ``src`` and ``dst`` (default ``"src"``/``"dst"``); or two columns of keys (pyarrow,
NumPy, lists), source first. ``src``/``dst`` name the edge columns everywhere: SQL's
``grail_index(t, src := ..., dst := ...)``, the command line's ``--src``/``--dst``. A .gra
file read by :mod:`grail_duckdb.tools.readers`, and the generators' Parquet files, carry the
vertex count in the schema metadata (``grail.vertices``) so that vertices without edges exist in the index too
(and the keys are known to be 0..n-1 without a pass over them).

:func:`edge_stream` keeps the input as Arrow chunks on the host, without copies: the build
reads it in slices of :data:`CHUNK` edges (:mod:`.ids` uploads one slice at a time), so the
device never holds the input's own 64-bit columns.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import EdgeInputError

#: schema metadata key (set by the .gra reader): the keys 0..n-1 all are vertices
VERTEX_COUNT_META = b"grail.vertices"


def key_kind(typ: pa.DataType) -> str:
    """'int' or 'str' for a supported key type; anything else is an error."""
    if pa.types.is_integer(typ):
        return "int"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return "str"
    if pa.types.is_dictionary(typ):
        return key_kind(typ.value_type)
    raise EdgeInputError(
        f"vertex keys must be integers or strings (VARCHAR), got {typ}; cast the key columns "
        "first, e.g. CAST(col AS BIGINT) or CAST(col AS VARCHAR)"
    )


def edge_table(src, dst, vertices: int | None = None) -> pa.Table:
    """Two key columns as a Table ``src``/``dst`` (NumPy arrays are not copied); with
    ``vertices``, the keys 0..vertices-1 are all vertices, also those without an edge.

    >>> edge_table([1], [2], vertices=4).schema.metadata
    {b'grail.vertices': b'4'}
    """
    table = pa.table({"src": src, "dst": dst})
    if vertices is None:
        return table
    return table.replace_schema_metadata({VERTEX_COUNT_META: str(max(int(vertices), 0)).encode()})


@dataclass
class EdgeColumns:
    src: pa.Array
    dst: pa.Array
    extra_vertices: pa.Array | None = None

    @property
    def rows(self) -> int:
        return len(self.src)


def as_column(x, name: str = "key") -> pa.Array:
    """Any column-like (pyarrow, NumPy, list) as one pyarrow Array; ``name`` for errors."""
    if isinstance(x, pa.ChunkedArray):
        return x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
    if isinstance(x, pa.Array):
        return x
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "US":
            return pa.array(x.astype(str).tolist(), pa.string())
        return pa.array(x)
    try:
        return pa.array(x)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise EdgeInputError(f"cannot read the {name} keys as a column: {exc}") from exc


def edge_columns(edges, dst="dst", *, src: str = "src") -> EdgeColumns:
    """Any accepted edge input as two whole checked Arrow key columns (see :func:`edge_stream`,
    which the build uses instead: it keeps the chunks).

    ``edge_columns(table, src="citing", dst="cited")``: a string names a column of a table or
    relation; ``edge_columns(src_keys, dst_keys)``: two columns of keys.

    >>> e = edge_columns([1, 2], [2, 3])
    >>> e.rows, e.src.type
    (2, DataType(int64))
    >>> edge_columns(pa.table({"a": [1], "b": [2]}), src="a", dst="b").dst.to_pylist()
    [2]
    """
    s = edge_stream(edges, dst, src=src)
    extra = None if s.vertex_count is None else pa.array(np.arange(s.vertex_count, dtype=np.int64))
    return EdgeColumns(as_column(s.table.column(0)), as_column(s.table.column(1)), extra)


#: edges per slice when the build reads an edge stream (bounds the device's scratch)
CHUNK = 1 << 25


@dataclass
class EdgeStream:
    """Checked edges as a host Arrow table (``src``, ``dst``; chunks kept as they came), read
    in slices by the build. ``vertex_count``: the keys 0..n-1 are all vertices (metadata);
    ``extra_vertices``: other keys that are vertices without an edge."""

    table: pa.Table
    kind: str
    vertex_count: int | None = None
    extra_vertices: pa.Array | None = None

    @property
    def rows(self) -> int:
        return self.table.num_rows

    def chunks(self, size: int | None = None):
        """``(start_row, src, dst)`` slices of at most ``size`` (default :data:`CHUNK`) edges
        (no copies)."""
        start = 0
        for batch in self.table.to_batches(max_chunksize=size or CHUNK):
            if batch.num_rows:
                yield start, batch.column(0), batch.column(1)
                start += batch.num_rows

    def key_range(self) -> tuple[int, int] | None:
        """(min, max) of the integer keys (edges and extra vertices), on every core; None
        when there are none."""
        cols = [c for c in (self.table.column(0), self.table.column(1)) for c in c.chunks]
        if self.extra_vertices is not None:
            cols.append(self.extra_vertices)
        cols = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c
                for c in cols if len(c)]
        if not cols:
            return None
        with ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
            ranges = list(pool.map(lambda c: pc.min_max(c).as_py(), cols))
        return min(r["min"] for r in ranges), max(r["max"] for r in ranges)


def read_parquet_edges(path, src: str = "src", dst: str = "dst") -> pa.Table:
    """Two key columns of a Parquet file or of a folder of them (``*.parquet``, read in
    parallel), as a Table ``src``/``dst`` keeping the first file's ``grail.vertices``."""
    path = Path(path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise EdgeInputError(f"the folder {path} holds no *.parquet file")
    try:
        schema = pq.read_schema(files[0])
        missing = [c for c in (src, dst) if c not in schema.names]
        if missing:
            raise EdgeInputError(f"{str(files[0])!r} has no columns {', '.join(map(repr, missing))}; "
                                 f"its columns are {schema.names}")
        table = pq.read_table(files if len(files) > 1 else files[0], columns=[src, dst],
                              use_threads=True)
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(path)!r} is not a readable Parquet edge file: {exc}") from None
    meta = schema.metadata or {}
    vertices = int(meta[VERTEX_COUNT_META]) if VERTEX_COUNT_META in meta else None
    return edge_table(table.column(0), table.column(1), vertices)


def _as_table(edges, dst, src) -> pa.Table:
    """Any accepted input as a Table with the two key columns first (no copy of Arrow data):
    a string ``dst`` names a column of ``edges``, anything else is the destination keys."""
    if not isinstance(src, str):
        raise EdgeInputError(
            f"src= names the source column (a string), got {type(src).__name__}; pass two "
            "columns of keys positionally: build_index(src_keys, dst_keys)")
    if not isinstance(dst, str):
        return pa.table({"src": _as_chunked(edges, "source"), "dst": _as_chunked(dst, "destination")})
    if isinstance(edges, (str, Path)):
        return read_parquet_edges(edges, src, dst)
    if isinstance(edges, pa.RecordBatchReader):
        edges = edges.read_all()
    elif isinstance(edges, pa.RecordBatch):
        edges = pa.Table.from_batches([edges])
    elif not isinstance(edges, pa.Table):
        fetch = next((getattr(edges, a) for a in ("to_arrow_table", "fetch_arrow_table", "arrow")
                      if hasattr(edges, a)), None)
        if fetch is None:
            raise EdgeInputError(
                f"cannot read edges from {type(edges).__name__}; pass a pyarrow Table or "
                "RecordBatchReader, a DuckDB relation, a Parquet path, or two columns of keys "
                "(src_keys, dst_keys)")
        edges = fetch()
        if isinstance(edges, pa.RecordBatchReader):
            edges = edges.read_all()
    missing = [c for c in (src, dst) if c not in edges.column_names]
    if missing:
        raise EdgeInputError(
            f"edge table has no column {', '.join(repr(c) for c in missing)}; its columns are "
            f"{edges.column_names}; pass src=... and dst=... to name the endpoint columns")
    table = pa.table({"src": edges.column(src), "dst": edges.column(dst)})
    return table.replace_schema_metadata(edges.schema.metadata)


def _as_chunked(x, name: str) -> pa.ChunkedArray:
    if isinstance(x, pa.ChunkedArray):
        return x
    return pa.chunked_array([as_column(x, name)])


def edge_stream(edges, dst="dst", *, src: str = "src", extra_vertices=None) -> EdgeStream:
    """Any accepted edge input as a checked :class:`EdgeStream` (see the module).

    >>> s = edge_stream([1, 2], [2, 3])
    >>> s.rows, s.kind, s.key_range()
    (2, 'int', (1, 3))
    """
    table = _as_table(edges, dst, src)
    src, dst_c = table.column(0), table.column(1)
    if len(src) and (pa.types.is_null(src.type) or pa.types.is_null(dst_c.type)):
        raise EdgeInputError(f"{len(src)} edge rows have a NULL endpoint; remove them first")
    if not len(src) and (pa.types.is_null(src.type) or pa.types.is_null(dst_c.type)):
        table = pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())})
        src, dst_c = table.column(0), table.column(1)
    if src.null_count or dst_c.null_count:
        both = pc.or_(src.is_null(), dst_c.is_null())
        raise EdgeInputError(
            f"{pc.sum(both).as_py()} edge rows have a NULL endpoint; an edge needs both ends: "
            "filter them out (WHERE src IS NOT NULL AND dst IS NOT NULL) before building the index")
    kind = key_kind(src.type)
    if key_kind(dst_c.type) != kind:
        raise EdgeInputError(
            f"source and destination keys have different types ({src.type} vs {dst_c.type}); "
            "cast both to one integer type or both to VARCHAR")
    meta = table.schema.metadata or {}
    vertices = int(meta[VERTEX_COUNT_META]) if VERTEX_COUNT_META in meta else None
    extra = None if extra_vertices is None else as_column(extra_vertices, "vertex")
    return EdgeStream(table, kind, vertices, extra)
