"""Query key columns as the kernels read them: any column-like in, views of its keys out.

A key column may be NumPy (any integer type, contiguous or a strided view), a pandas Series,
Arrow (an array or a chunked array, NULLs included), a DuckDB relation of one column, or a
Python list. :func:`key_column` reads integer keys where they lie, without a copy: a NumPy
array as it is, an Arrow column as the values buffer of each chunk (``pieces``), its NULLs as
one byte per row. The kernels read int32, int64, uint32 and uint64 keys, contiguous or strided
(:mod:`grail_duckdb.kernels.host.keys`); 8- and 16-bit keys are widened to int32 here (a copy
at most twice their own size). String keys are looked up on the host (:func:`kernel_keys`).

:func:`pair_pieces` lines two columns up for a batch of rows: pieces of equal length on both
sides, each pair of one type and layout, so that the kernels compile one specialization per
type and layout rather than per combination (the rare mixed pairs are converted).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import EdgeInputError
from ..kernels.host.keys import KEY_TYPES, NARROW_TYPES, read_only
from ..model import key_kind
from .ingest import as_column

__all__ = ["KeyColumn", "as_arrow", "int64_view", "kernel_keys", "key_column", "pair_pieces"]


@dataclass(slots=True)
class KeyColumn:
    """One column of query keys. ``kind``: 'int', 'str' or 'null' (every key NULL, of no
    type); ``pieces``: the keys in row order, read-only NumPy arrays of a kernel key type for
    'int', Arrow string arrays for 'str'; ``valid``: None, or one byte per row, 0 where the key
    is NULL (the key under a NULL is any value: the kernels read it and ignore the row)."""

    kind: str
    n: int
    pieces: tuple
    valid: np.ndarray | None
    type: object = None  # the Arrow type of the keys (the index checks their kind)

    def __len__(self) -> int:
        return self.n


def key_column(x, name: str = "key") -> KeyColumn:
    """Any column-like as a :class:`KeyColumn` (``name`` for errors).

    >>> c = key_column(np.arange(10, dtype=np.int16)[::3])
    >>> c.kind, c.n, c.pieces[0].dtype, c.pieces[0].tolist()
    ('int', 4, dtype('int16'), [0, 3, 6, 9])
    >>> c = key_column(pa.chunked_array([[1, None], [3]]))
    >>> [p.tolist()[0] for p in c.pieces], c.valid.tolist()
    ([1, 3], [1, 0, 1])
    """
    if isinstance(x, KeyColumn):
        return x
    if not isinstance(x, (pa.Array, pa.ChunkedArray)):
        x = _unwrapped(x, name)
        if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "iu":
            return KeyColumn("int", int(x.shape[0]), (_kernel_view(x),) if x.shape[0] else (),
                             None, pa.from_numpy_dtype(x.dtype.newbyteorder("=")))
        if not isinstance(x, pa.ChunkedArray):
            x = as_column(x, name)
    chunks = x.chunks if isinstance(x, pa.ChunkedArray) else [x]
    typ = x.type
    dtype = _INTEGER_TYPES.get(typ.id)
    if dtype is not None:  # integer keys: each chunk's values where they lie
        return KeyColumn("int", len(x), tuple(_chunk_keys(c, dtype) for c in chunks if len(c)),
                         _validity(chunks) if x.null_count else None, typ)
    n = len(x)
    if pa.types.is_null(typ):
        return KeyColumn("null", n, (), np.zeros(n, np.uint8), typ)
    if pa.types.is_dictionary(typ):
        return key_column(pa.chunked_array([c.dictionary_decode() for c in chunks],
                                           typ.value_type), name)
    if key_kind(typ) == "int":  # an integer type of no NumPy twin: as int64
        return key_column(x.cast(pa.int64()), name)
    chunks = [c for c in chunks if len(c)]
    return KeyColumn("str", n, tuple(chunks), _validity(chunks) if x.null_count else None, typ)


def int64_view(x) -> np.ndarray | None:
    """The keys of an Arrow int64 column of one chunk and no NULL as the kernels read them (a
    read-only view of its values buffer); None for anything else, which :func:`key_column`
    reads. The per-chunk path's shortcut: DuckDB hands the BIGINT function such columns.

    >>> int64_view(pa.chunked_array([[3, 1]])).tolist(), int64_view(pa.array([3, None]))
    ([3, 1], None)
    """
    if isinstance(x, pa.ChunkedArray):
        if x.num_chunks != 1:
            return None
        x = x.chunk(0)
    if not isinstance(x, pa.Int64Array) or x.null_count or not len(x):
        return None
    return x.to_numpy(zero_copy_only=True)  # read-only: a view of the buffer


#: Arrow integer type id -> the NumPy type of its values
_INTEGER_TYPES = {t.id: np.dtype(t.to_pandas_dtype()) for t in (
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
    pa.uint64())}


_KERNEL_TYPES = frozenset(KEY_TYPES + NARROW_TYPES)


def _validity(chunks) -> np.ndarray:
    """One byte per row of Arrow chunks, 0 where the value is NULL."""
    return np.concatenate([c.is_valid().to_numpy(zero_copy_only=False)
                           for c in chunks if len(c)]).view(np.uint8)


def _unwrapped(x, name: str):
    """A pandas Series or Index as its NumPy keys (or Arrow, for pandas' nullable and
    categorical types); a DuckDB relation as its one column, fetched as Arrow."""
    module = type(x).__module__ or ""
    if module.startswith("pandas"):
        if isinstance(getattr(x, "dtype", None), np.dtype) and x.dtype.kind in "iu":
            return x.to_numpy()
        return pa.array(x, from_pandas=True)
    if not isinstance(x, (pa.Array, pa.ChunkedArray, np.ndarray)) and hasattr(x, "to_arrow_table"):
        table = x.to_arrow_table()
        if table.num_columns != 1:
            raise EdgeInputError(f"the {name} keys: a relation of one column is a key column, "
                                 f"this one has {table.num_columns} ({table.column_names}); "
                                 "select the key column first")
        return table.column(0)
    return x


def _chunk_keys(chunk: pa.Array, dtype: np.dtype) -> np.ndarray:
    """An integer Arrow chunk's keys as the kernels read them, where they lie (Arrow's own
    view of a chunk without NULLs is read-only and in native order already)."""
    if not chunk.null_count:
        return chunk.to_numpy(zero_copy_only=True)
    return _kernel_view(_values(chunk, dtype))


def _values(chunk: pa.Array, dtype: np.dtype) -> np.ndarray:
    """The values buffer of an integer Arrow array, as NumPy (no copy)."""
    return np.frombuffer(chunk.buffers()[1], dtype)[chunk.offset:chunk.offset + len(chunk)]


def _kernel_view(a: np.ndarray) -> np.ndarray:
    """``a`` as the kernels read it: a key type of the kernels in native byte order,
    read-only (8- and 16-bit keys as they lie: see :mod:`grail_duckdb.kernels.host.keys`)."""
    if a.dtype in _KERNEL_TYPES and not a.flags.writeable:
        return a
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return read_only(a)


def pair_pieces(s: KeyColumn, t: KeyColumn, lo: int, hi: int) -> tuple[tuple, tuple]:
    """Rows ``[lo, hi)`` of two integer key columns as two tuples of pieces: piece i of both
    covers the same rows, both of one type and layout (a pair that differs is converted: to
    their common type, contiguous)."""
    if len(s.pieces) == 1 and len(t.pieces) == 1:  # the common case: one array a side
        x, y = _same_kind(s.pieces[0][lo:hi], t.pieces[0][lo:hi])
        return (x,), (y,)
    if lo == 0 and hi == s.n and _same_cuts(s.pieces, t.pieces):  # chunks of one table
        pairs = [_same_kind(x, y) for x, y in zip(s.pieces, t.pieces)]
        return tuple(x for x, _ in pairs), tuple(y for _, y in pairs)
    a, b = _cut(s.pieces, lo, hi), _cut(t.pieces, lo, hi)
    out_a, out_b = [], []
    i = j = 0
    while i < len(a) and j < len(b):
        m = min(a[i].shape[0], b[j].shape[0])
        x, y = _same_kind(a[i][:m], b[j][:m])
        out_a.append(x)
        out_b.append(y)
        a[i], b[j] = a[i][m:], b[j][m:]
        i += a[i].shape[0] == 0
        j += b[j].shape[0] == 0
    return tuple(out_a), tuple(out_b)


def _same_cuts(a: tuple, b: tuple) -> bool:
    """Whether the pieces of two columns end at the same rows."""
    return len(a) == len(b) and all(x.shape[0] == y.shape[0] for x, y in zip(a, b))


def _cut(pieces: tuple, lo: int, hi: int) -> list:
    """The parts of ``pieces`` (consecutive rows from 0) that cover rows ``[lo, hi)``."""
    out, start = [], 0
    for p in pieces:
        end = start + p.shape[0]
        if end > lo and start < hi:
            out.append(p[max(lo - start, 0):min(hi, end) - start])
        start = end
    return out


def _same_kind(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two pieces of one type and layout: as they are when they already are; else both in
    their common type (a uint64 piece beside a signed one must hold no key above 2**63 - 1:
    the caller masks those first), contiguous."""
    if x.dtype == y.dtype and x.flags.c_contiguous == y.flags.c_contiguous:
        return x, y
    common = np.promote_types(x.dtype, y.dtype)
    if common.kind == "f":  # uint64 beside a signed type: both as int64 (no key above int64)
        common = np.dtype(np.int64)
    return (read_only(np.ascontiguousarray(x, common)),
            read_only(np.ascontiguousarray(y, common)))


def kernel_keys(ids, col: KeyColumn, unknown: dict) -> KeyColumn:
    """What the kernels read of a key column against an index's keys ``ids``
    (:class:`~grail_duckdb.model.VertexIds`): integer keys as they are; string keys as their
    ids, ``-2 - k`` for the k-th distinct unknown key (numbered in ``unknown``: pass one dict
    for both columns of a call); a column of NULLs only as -1 keys.

    Raises
    ------
    KeyTypeError
        The keys are of another kind (integer or string) than the index's.
    """
    if col.kind == "null":
        return KeyColumn("int", col.n, _one_piece(np.full(col.n, -1, np.int64)), col.valid,
                         col.type)
    ids.check_kind(col.type)
    if col.kind == "str":
        return KeyColumn("int", col.n, _one_piece(ids.codes_of_strings(col.pieces, unknown)),
                         col.valid, col.type)
    return col


def _one_piece(a: np.ndarray) -> tuple:
    return (read_only(a),) if a.shape[0] else ()


def as_arrow(col: KeyColumn) -> pa.Array:
    """An integer or string key column as one Arrow array (a copy: for the rare calls that
    mask keys, see :func:`grail_duckdb.engine.queries.reaches`)."""
    if col.kind == "str":
        return pa.concat_arrays(list(col.pieces)) if col.pieces else pa.array([], col.type)
    if col.kind == "null" or not col.pieces:
        return pa.nulls(col.n, pa.int64())
    keys = np.concatenate(col.pieces)
    return pa.array(keys, mask=None if col.valid is None else col.valid == 0)
