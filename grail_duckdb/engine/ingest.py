"""Edge input -> two Arrow key columns (src, dst), checked, read chunk by chunk.

Accepted inputs: a pyarrow Table, RecordBatch or ``RecordBatchReader``, a DuckDB relation,
or a Parquet file or a folder of them (a path), whose endpoint columns are named by the
strings ``src`` and ``dst`` (default ``"src"``/``"dst"``); or two columns of keys (pyarrow,
NumPy, lists), source first. ``src``/``dst`` name the edge columns everywhere: SQL's
``grail_index(t, src := ..., dst := ...)``, the command line's ``--src``/``--dst``. A .gra
file read by :mod:`grail_duckdb.tools.readers`, and the generators' Parquet files, carry the
vertex count in the schema metadata (``grail.vertices``) so that vertices without edges exist in the index too
(and the keys are known to be 0..n-1 without a pass over them).

:func:`edge_stream` keeps the input where it is: Arrow chunks on the host without copies, or
Parquet files not read yet (their row groups are decoded by the build's worker threads, piece
by piece, while earlier pieces are uploaded: :mod:`.transfer`), so neither the host nor the
device ever holds the input's own 64-bit columns.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import EdgeInputError
from ..kernels.host import workers
from ..model import key_kind

#: schema metadata key (set by the .gra reader): the keys 0..n-1 all are vertices
VERTEX_COUNT_META = b"grail.vertices"


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
    except OverflowError:  # integers above int64's range: uint64 keys, if they fit
        try:
            return pa.array(x, pa.uint64())
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise EdgeInputError(f"cannot read the {name} keys as a column: integer keys "
                                 f"must fit in 64 bits ({exc})") from None
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
#: edges per piece: the unit of work of the parallel read (a Parquet row group is one piece)
PIECE = 1 << 20


@dataclass
class ParquetEdges:
    """The two key columns of a Parquet file or of a folder of them, not read yet: each row
    group is decoded when the build asks for it (on a worker thread), so decoding overlaps the
    upload of what was decoded before."""

    files: list
    src_col: str
    dst_col: str
    groups: list  # (file index, row group, rows)
    types: tuple  # Arrow types of the two columns

    @classmethod
    def open(cls, files: list, src_col: str, dst_col: str) -> "ParquetEdges":
        groups, types = [], None
        for i, f in enumerate(files):
            md = pq.ParquetFile(f).metadata
            schema = md.schema.to_arrow_schema()
            missing = [c for c in (src_col, dst_col) if c not in schema.names]
            if missing:
                raise EdgeInputError(f"{str(f)!r} has no column {', '.join(map(repr, missing))}; "
                                     f"its columns are {schema.names}")
            t = (schema.field(src_col).type, schema.field(dst_col).type)
            if types is not None and t != types:
                raise EdgeInputError(f"{str(f)!r} has key types {t[0]}, {t[1]} but "
                                     f"{str(files[0])!r} has {types[0]}, {types[1]}")
            types = t
            groups += [(i, g, md.row_group(g).num_rows) for g in range(md.num_row_groups)]
        return cls(files, src_col, dst_col, groups, types)

    def read(self, k: int) -> tuple[pa.Array, pa.Array]:
        """Row group ``k``'s two key columns (NULL endpoints refused)."""
        i, g, _ = self.groups[k]
        t = pq.ParquetFile(self.files[i]).read_row_group(g, columns=[self.src_col, self.dst_col],
                                                          use_threads=False)
        src, dst = (c.combine_chunks() for c in t.columns)
        if src.null_count or dst.null_count:
            raise EdgeInputError(
                f"row group {g} of {str(self.files[i])!r} has edge rows with a NULL endpoint; an "
                "edge needs both ends: filter them out before building the index")
        return src, dst

    def statistics_range(self) -> tuple[int, int] | None:
        """(min, max) of the keys from the files' column statistics; None when a row group
        has none (then the keys must be read)."""
        lo = hi = None
        for f in self.files:
            md = pq.ParquetFile(f).metadata
            names = md.schema.to_arrow_schema().names
            for g in range(md.num_row_groups):
                for name in (self.src_col, self.dst_col):
                    st = md.row_group(g).column(names.index(name)).statistics
                    if md.row_group(g).num_rows == 0:
                        continue
                    if st is None or not st.has_min_max:
                        return None
                    lo = st.min if lo is None else min(lo, st.min)
                    hi = st.max if hi is None else max(hi, st.max)
        return None if lo is None else (int(lo), int(hi))

    def table(self) -> pa.Table:
        """Every row group read (on every core), as a Table ``src``/``dst``."""
        files = self.files if len(self.files) > 1 else self.files[0]
        t = pq.read_table(files, columns=[self.src_col, self.dst_col], use_threads=True)
        return pa.table({"src": t.column(0), "dst": t.column(1)})


@dataclass
class EdgeStream:
    """Checked edges, read piece by piece by the build: a host Arrow table (``src``, ``dst``;
    chunks kept as they came) or Parquet files not read yet (:class:`ParquetEdges`).
    ``vertex_count``: the keys 0..n-1 are all vertices (metadata); ``extra_vertices``: other
    keys that are vertices without an edge."""

    source: pa.Table | ParquetEdges
    kind: str
    vertex_count: int | None = None
    extra_vertices: pa.Array | None = None

    @property
    def rows(self) -> int:
        if isinstance(self.source, ParquetEdges):
            return sum(r for _, _, r in self.source.groups)
        return self.source.num_rows

    @property
    def key_types(self) -> tuple:
        if isinstance(self.source, ParquetEdges):
            return self.source.types
        return self.source.column(0).type, self.source.column(1).type

    @property
    def table(self) -> pa.Table:
        """The whole edge list as a host table (Parquet files are read for it)."""
        if isinstance(self.source, ParquetEdges):
            self.source = self.source.table()
        return self.source

    def pieces(self, size: int | None = None) -> list:
        """``(start_row, rows, read)`` of pieces of at most ``size`` (default :data:`PIECE`)
        edges; ``read()`` gives the piece's ``(src, dst)`` Arrow arrays (a Parquet row group
        is one piece, decoded by ``read``; table chunks are sliced without copies)."""
        out, start = [], 0
        if isinstance(self.source, ParquetEdges):
            for k, (_, _, rows) in enumerate(self.source.groups):
                if rows:
                    out.append((start, rows, lambda k=k: self.source.read(k)))
                    start += rows
            return out
        step = size or PIECE
        for batch in self.source.to_batches():
            for lo in range(0, batch.num_rows, step):
                part = batch.slice(lo, step)
                out.append((start, part.num_rows, lambda p=part: (p.column(0), p.column(1))))
                start += part.num_rows
        return out

    def chunks(self, size: int | None = None):
        """``(start_row, src, dst)`` slices of at most ``size`` (default :data:`CHUNK`) edges,
        in order (one piece at a time for Parquet files)."""
        if isinstance(self.source, ParquetEdges):
            for start, _, read in self.pieces():
                yield (start, *read())
            return
        start = 0
        for batch in self.source.to_batches(max_chunksize=size or CHUNK):
            if batch.num_rows:
                yield start, batch.column(0), batch.column(1)
                start += batch.num_rows

    def key_range(self) -> tuple[int, int] | None:
        """(min, max) of the integer keys (edges and extra vertices), on every core, or from
        Parquet statistics; None when there are none."""
        stats = None
        if isinstance(self.source, ParquetEdges):
            stats = self.source.statistics_range()
            if stats is None:
                self.table  # no statistics: read the files once, keep them
        if stats is not None:
            cols = []
        else:
            cols = [c for c in (self.source.column(0), self.source.column(1)) for c in c.chunks]
        if self.extra_vertices is not None:
            cols.append(self.extra_vertices)
        cols = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c
                for c in cols if len(c)]
        with ThreadPoolExecutor(workers()) as pool:
            ranges = list(pool.map(lambda c: pc.min_max(c).as_py(), cols))
        ranges = [(r["min"], r["max"]) for r in ranges] + ([stats] if stats else [])
        if not ranges:
            return None
        return min(r[0] for r in ranges), max(r[1] for r in ranges)


def parquet_files(path) -> list:
    """A Parquet file, or the ``*.parquet`` files of a folder but its index files
    (``*.grail.parquet``: an index built beside its edges is no edge file)."""
    path = Path(path)
    files = (sorted(f for f in path.glob("*.parquet") if not f.name.endswith(".grail.parquet"))
             if path.is_dir() else [path])
    if not files:
        raise EdgeInputError(f"the folder {path} holds no *.parquet edge file")
    return files


def _parquet_schema(files: list, src_col: str, dst_col: str) -> pa.Schema:
    """The first file's schema, checked to hold both key columns."""
    try:
        schema = pq.read_schema(files[0])
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(files[0])!r} is not a readable Parquet edge file: {exc}") from None
    missing = [c for c in (src_col, dst_col) if c not in schema.names]
    if missing:
        raise EdgeInputError(f"{str(files[0])!r} has no columns {', '.join(map(repr, missing))}; "
                             f"its columns are {schema.names}")
    return schema


def read_parquet_edges(path, src: str = "src", dst: str = "dst") -> pa.Table:
    """Two key columns of a Parquet file or of a folder of them (``*.parquet``, read in
    parallel), as a Table ``src``/``dst`` keeping the first file's ``grail.vertices``."""
    files = parquet_files(path)
    schema = _parquet_schema(files, src, dst)
    try:
        table = ParquetEdges(files, src, dst, [], ()).table()
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(path)!r} is not a readable Parquet edge file: {exc}") from None
    return edge_table(table.column(0), table.column(1), _vertex_count(schema.metadata))


def _vertex_count(meta) -> int | None:
    meta = meta or {}
    return int(meta[VERTEX_COUNT_META]) if VERTEX_COUNT_META in meta else None


def _parquet_stream(path, src_col: str, dst_col: str) -> "EdgeStream":
    """A Parquet file or folder as a stream of row groups, nothing decoded yet."""
    files = parquet_files(path)
    schema = _parquet_schema(files, src_col, dst_col)
    try:
        edges = ParquetEdges.open(files, src_col, dst_col)
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(path)!r} is not a readable Parquet edge file: {exc}") from None
    kind = _key_kinds(*edges.types)
    return EdgeStream(edges, kind, _vertex_count(schema.metadata))


def _key_kinds(src_type, dst_type) -> str:
    """The key kind of both columns, refused when they differ."""
    kind = key_kind(src_type)
    if key_kind(dst_type) != kind:
        raise EdgeInputError(
            f"source and destination keys have different types ({src_type} vs {dst_type}); "
            "cast both to one integer type or both to VARCHAR")
    return kind


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
    extra = None if extra_vertices is None else as_column(extra_vertices, "vertex")
    if isinstance(dst, str) and isinstance(edges, (str, Path)):
        stream = _parquet_stream(edges, src, dst)
        stream.extra_vertices = extra
        return stream
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
    kind = _key_kinds(src.type, dst_c.type)
    return EdgeStream(table, kind, _vertex_count(table.schema.metadata), extra)
