"""Vertex keys -> dense ids 0..n-1 and back.

Keys are whatever the edge table holds: any integer type or strings. Ids follow the sorted
order of the distinct keys, so they (and everything derived from them: the fingerprint, the
index file) do not depend on the order of the edge rows.

Integer keys whose range is at most a few times the number of edges get a direct lookup table
(no sort, one pass); sparse integer keys are sorted and searched; strings go through a hash map.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from ..errors import EdgeInputError, KeyTypeError
from ..kernels.shared import LOOKUP_DENSE, LOOKUP_IDS, LOOKUP_SORTED
from .ingest import key_kind

#: dense lookup tables are used while (max - min + 1) <= DENSE_FACTOR * (number of endpoints)
DENSE_FACTOR = 4


@njit(cache=True, nogil=True)
def _lookup_dense(keys, offset, table):
    """table[key - offset], or -1 outside the table: one pass, no temporaries."""
    out = np.empty(keys.shape[0], np.int32)
    size = table.shape[0]
    for i in range(keys.shape[0]):
        j = keys[i] - offset
        out[i] = table[j] if 0 <= j < size else -1
    return out


def _as_int64(arr: pa.Array) -> np.ndarray:
    """Integer keys as int64 NumPy (uint64 keys above 2**63 - 1 are refused, not wrapped)."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_uint64(arr.type) and len(arr) and pc.max(arr).as_py() > np.iinfo(np.int64).max:
        raise EdgeInputError("uint64 vertex keys above 2**63-1 are not supported")
    return arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _as_str(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr


@dataclass
class VertexIds:
    """The sorted distinct keys (``keys[i]`` is the key of id i) and a lookup from key to id."""

    keys: pa.Array
    kind: str
    _offset: int = 0
    _table: np.ndarray | None = None  # dense int lookup: id of key (offset + i), or -1
    _sorted: np.ndarray | None = None  # sparse int lookup: the sorted keys
    _map: dict | None = field(default=None, repr=False)  # string lookup, built on first use
    _device_tables: dict = field(default_factory=dict, repr=False)  # array module -> table

    @property
    def n(self) -> int:
        return len(self.keys)

    @classmethod
    def from_sorted_keys(cls, keys: pa.Array) -> "VertexIds":
        """Rebuild the lookup for keys already sorted and distinct (e.g. read from an index)."""
        kind = key_kind(keys.type)
        if kind == "str":
            return cls(_as_str(keys), "str")
        k = _as_int64(keys)
        return cls._for_ints(k, int(k.shape[0]))

    @classmethod
    def _for_ints(cls, sorted_keys: np.ndarray, endpoints: int) -> "VertexIds":
        keys = pa.array(sorted_keys, pa.int64())
        if sorted_keys.shape[0] == 0:
            return cls(keys, "int", _sorted=sorted_keys)
        lo, hi = int(sorted_keys[0]), int(sorted_keys[-1])
        if hi - lo + 1 <= DENSE_FACTOR * max(endpoints, sorted_keys.shape[0]) + 1024:
            table = np.full(hi - lo + 1, -1, np.int32)
            table[sorted_keys - lo] = np.arange(sorted_keys.shape[0], dtype=np.int32)
            return cls(keys, "int", _offset=lo, _table=table)
        return cls(keys, "int", _sorted=sorted_keys)

    def encode(self, arr: pa.Array, xp=np):
        """Ids of the keys in ``arr`` as int32; -1 for NULL and for keys not in the graph
        (an array of ``xp``, NumPy by default)."""
        keys, valid = self.query_keys(arr)
        if self.kind == "str":
            ids = np.maximum(keys, -1)
        else:
            mode, offset, table = self.lookup(np)
            ids = (_lookup_dense(keys, offset, table) if mode == LOOKUP_DENSE
                   else self._search_sorted(keys))
        ids = ids.astype(np.int32, copy=False)
        if valid is not None:
            ids = np.where(valid.view(np.bool_), ids, -1).astype(np.int32)
        return xp.asarray(ids)

    def query_keys(self, arr: pa.Array, unknown: dict | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """The query kernels' view of a key column: ``(keys int64, valid)``.

        Integer keys are handed over as they are (no copy for int64 without NULLs) and looked
        up by the kernels (:meth:`lookup`); string keys are looked up here, into ids, with
        ``-2 - k`` for the k-th distinct key that is not a vertex, numbered in ``unknown``
        (pass one dict for both columns of a call, so equal unknown keys get equal codes).
        ``valid`` is None, or one byte per row, 0 where the key is NULL."""
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        if pa.types.is_null(arr.type):
            return np.full(len(arr), -1, np.int64), np.zeros(len(arr), np.uint8)
        kind = key_kind(arr.type)
        if kind != self.kind:
            want = "integer" if self.kind == "int" else "string (VARCHAR)"
            raise KeyTypeError(
                f"this index has {want} vertex keys but the query keys are {arr.type}; "
                f"cast the query columns to the edge table's key type"
            )
        valid = None
        if arr.null_count:
            valid = arr.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
            arr = arr.fill_null("" if kind == "str" else 0)
        if kind == "str":
            return self._codes_of_strings(arr, {} if unknown is None else unknown), valid
        return _as_int64(arr), valid

    def lookup(self, xp=np) -> tuple[int, int, object]:
        """``(mode, offset, table)`` of the key lookup (shared LOOKUP_* codes): a dense table of
        ids for integer keys of small range, the sorted keys otherwise, nothing for strings
        (looked up on the host); the table as an array of ``xp``, uploaded once."""
        if self.kind == "str":
            return LOOKUP_IDS, 0, xp.empty(0, xp.int32)
        if self._table is not None:
            mode, offset, host = LOOKUP_DENSE, self._offset, self._table
        else:
            mode, offset, host = LOOKUP_SORTED, 0, self._sorted
        if xp is np:
            return mode, offset, host
        table = self._device_tables.get(xp.__name__)
        if table is None:
            table = self._device_tables[xp.__name__] = xp.asarray(host)
        return mode, offset, table

    def _search_sorted(self, k: np.ndarray) -> np.ndarray:
        s = self._sorted
        pos = np.searchsorted(s, k)
        pos_c = np.minimum(pos, max(s.shape[0] - 1, 0))
        hit = (pos < s.shape[0]) & (s[pos_c] == k) if s.shape[0] else np.zeros(k.shape[0], bool)
        return np.where(hit, pos, -1).astype(np.int32)

    def _codes_of_strings(self, arr: pa.Array, unknown: dict) -> np.ndarray:
        """Ids of string keys, ``-2 - k`` for the k-th distinct unknown key (see
        :meth:`query_keys`)."""
        if self._map is None:
            self._map = {k: i for i, k in enumerate(self.keys.to_pylist())}
        get = self._map.get
        out = np.empty(len(arr), np.int64)
        for i, x in enumerate(arr.to_pylist()):
            code = get(x)
            if code is None:
                code = unknown.setdefault(x, -2 - len(unknown))
            out[i] = code
        return out

    def decode(self, ids: np.ndarray) -> pa.Array:
        """Keys of dense ids."""
        return self.keys.take(pa.array(ids))


def assign_ids(src: pa.Array, dst: pa.Array, extra: pa.Array | None = None, xp=np):
    """Dense ids for an edge list: ``(VertexIds, src_ids int32, dst_ids int32)``.

    ``extra`` holds vertices that may have no edge (e.g. the isolated vertices of a .gra
    file); they get ids too, and answer as isolated vertices. With ``xp`` a device array
    module (CuPy), integer keys are mapped on the device (one upload of the key columns; the
    id arrays stay there, the lookup table comes back for the queries); same ids either way.
    """
    kind = key_kind(src.type)
    if key_kind(dst.type) != kind:
        raise EdgeInputError(
            f"source and destination keys have different types ({src.type} vs {dst.type}); "
            "cast both to one integer type or both to VARCHAR"
        )
    if kind == "str":
        parts = [_as_str(src), _as_str(dst)] + ([_as_str(extra)] if extra is not None else [])
        allk = pa.chunked_array(parts).combine_chunks()
        keys = pc.unique(allk)
        keys = keys.take(pc.sort_indices(keys))
        src_ids = pc.index_in(_as_str(src), value_set=keys).to_numpy(zero_copy_only=False)
        dst_ids = pc.index_in(_as_str(dst), value_set=keys).to_numpy(zero_copy_only=False)
        return VertexIds(keys, "str"), src_ids.astype(np.int32), dst_ids.astype(np.int32)
    e = _as_int64(extra) if extra is not None else np.empty(0, np.int64)
    return _int_ids(xp, _as_int64(src), _as_int64(dst), e)


def _int_ids(xp, s: np.ndarray, d: np.ndarray, e: np.ndarray):
    """:func:`assign_ids` for integer keys, with the array module ``xp``: NumPy, or CuPy (one
    upload of the key columns; the id arrays stay on the device, the sorted keys and the lookup
    table come back for the queries). The same ids either way."""
    host = (lambda a: a) if xp is np else (lambda a: a.get())
    ds, dd = xp.asarray(s), xp.asarray(d)
    cols = [x for x in (ds, dd, xp.asarray(e)) if x.shape[0]]
    endpoints = sum(int(x.shape[0]) for x in cols)
    if not cols:
        return VertexIds._for_ints(np.empty(0, np.int64), 0), ds.astype(xp.int32), dd.astype(xp.int32)
    lo = min(int(x.min()) for x in cols)
    hi = max(int(x.max()) for x in cols)
    if hi - lo + 1 <= DENSE_FACTOR * endpoints + 1024:
        present = xp.zeros(hi - lo + 1, dtype=bool)
        for x in cols:
            present[x - lo] = True
        table = xp.cumsum(present, dtype=xp.int32) - 1
        table[~present] = -1
        sorted_keys = host(xp.flatnonzero(present).astype(xp.int64) + lo)
        ids = VertexIds(pa.array(sorted_keys, pa.int64()), "int", _offset=lo, _table=host(table))
        return ids, table[ds - lo], table[dd - lo]
    sorted_keys = xp.unique(xp.concatenate(cols))
    ids = VertexIds._for_ints(host(sorted_keys), endpoints)
    return (ids, xp.searchsorted(sorted_keys, ds).astype(xp.int32),
            xp.searchsorted(sorted_keys, dd).astype(xp.int32))
