"""Edge input -> two Arrow key columns (src, dst), checked.

Accepted inputs: a pyarrow Table or RecordBatch or a DuckDB relation, whose endpoint columns
are named by ``src`` and ``dst`` (strings; default ``"src"``/``"dst"``), or two columns of keys
(pyarrow, NumPy, lists), source first. ``src``/``dst`` are the names of the edge columns
everywhere: ``grail_index(t, src := ..., dst := ...)`` in SQL, ``--src``/``--dst`` on the
command line. A .gra file read by
:mod:`grail_duckdb.tools.readers` carries its vertex count in the table's schema metadata
(``grail.vertices``) so that vertices without edges exist in the index too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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


def _from_table(table: pa.Table, src: str, dst: str) -> EdgeColumns:
    missing = [c for c in (src, dst) if c not in table.column_names]
    if missing:
        raise EdgeInputError(
            f"edge table has no column {', '.join(repr(c) for c in missing)}; its columns are "
            f"{table.column_names}; pass src=... and dst=... to name the endpoint columns"
        )
    extra = None
    meta = table.schema.metadata or {}
    if VERTEX_COUNT_META in meta:
        extra = pa.array(np.arange(int(meta[VERTEX_COUNT_META]), dtype=np.int64))
    return EdgeColumns(as_column(table.column(src), "source"),
                       as_column(table.column(dst), "destination"), extra)


def edge_columns(edges, dst="dst", *, src: str = "src") -> EdgeColumns:
    """Normalise any accepted edge input into checked Arrow key columns.

    ``edge_columns(table, src="citing", dst="cited")``: a string names a column of a table or
    relation; ``edge_columns(src_keys, dst_keys)``: two columns of keys.

    >>> e = edge_columns([1, 2], [2, 3])
    >>> e.rows, e.src.type
    (2, DataType(int64))
    >>> edge_columns(pa.table({"a": [1], "b": [2]}), src="a", dst="b").dst.to_pylist()
    [2]
    """
    if not isinstance(src, str):
        raise EdgeInputError(
            f"src= names the source column (a string), got {type(src).__name__}; pass two "
            "columns of keys positionally: build_index(src_keys, dst_keys)")
    if not isinstance(dst, str):
        cols = EdgeColumns(as_column(edges, "source"), as_column(dst, "destination"))
    elif isinstance(edges, pa.RecordBatch):
        cols = _from_table(pa.Table.from_batches([edges]), src, dst)
    elif isinstance(edges, pa.Table):
        cols = _from_table(edges, src, dst)
    elif any(hasattr(edges, a) for a in ("to_arrow_table", "fetch_arrow_table", "arrow")):
        fetch = next(getattr(edges, a) for a in ("to_arrow_table", "fetch_arrow_table", "arrow")
                     if hasattr(edges, a))
        table = fetch()
        if isinstance(table, pa.RecordBatchReader):
            table = table.read_all()
        cols = _from_table(table, src, dst)
    else:
        raise EdgeInputError(
            f"cannot read edges from {type(edges).__name__}; pass a pyarrow Table, a DuckDB "
            "relation, or two columns of keys (src_keys, dst_keys)"
        )
    return _checked(cols)


def _checked(cols: EdgeColumns) -> EdgeColumns:
    if len(cols.src) != len(cols.dst):
        raise EdgeInputError(
            f"source and destination columns differ in length ({len(cols.src)} vs {len(cols.dst)})"
        )
    for arr in (cols.src, cols.dst):
        if pa.types.is_null(arr.type) and len(arr):
            raise EdgeInputError(f"{len(arr)} edge rows have a NULL endpoint; remove them first")
    if len(cols.src) == 0 and pa.types.is_null(cols.src.type):
        cols = EdgeColumns(pa.array([], pa.int64()), pa.array([], pa.int64()), cols.extra_vertices)
    bad = int(cols.src.null_count) + int(cols.dst.null_count)
    if bad:
        both = np.logical_or(
            cols.src.is_null().to_numpy(zero_copy_only=False),
            cols.dst.is_null().to_numpy(zero_copy_only=False),
        )
        raise EdgeInputError(
            f"{int(both.sum())} edge rows have a NULL endpoint; an edge needs both ends: filter "
            "them out (WHERE src IS NOT NULL AND dst IS NOT NULL) before building the index"
        )
    key_kind(cols.src.type)
    key_kind(cols.dst.type)
    return cols
