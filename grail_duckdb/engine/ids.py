"""Vertex keys -> dense ids 0..n-1 and back.

Keys are whatever the edge table holds: any integer type or strings. Ids follow the sorted
order of the distinct keys, so they (and everything derived from them: the fingerprint, the
index file) do not depend on the order of the edge rows.

The build reads integer keys first (:func:`read_edges`, the ``read`` phase: packed as 32-bit
offsets into the build's array of edges by :mod:`.transfer`), then turns them into ids in
that array (:func:`assign_read`, the ``ids`` phase): nothing for keys known to be 0..n-1, a
presence table for a dense range, a 32-bit sort otherwise. Query keys of a small range get a
direct lookup table (no sort, one pass); sparse integer keys are searched in the sorted keys;
strings go through a hash map.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from ..errors import EdgeInputError, KeyTypeError
from ..kernels.shared import (LOOKUP_DENSE, LOOKUP_IDS, LOOKUP_RANGE, LOOKUP_SORTED, pack_pairs,
                              unpack_pairs)
from . import ingest
from .ingest import EdgeStream, edge_stream, key_kind
from .transfer import PackedEdges, read_packed

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


def beyond_int64(arr: pa.Array) -> np.ndarray | None:
    """Where a uint64 key column holds keys above 2**63 - 1 (bools), or None where it holds
    none (or is no uint64 column). Such a key is never a vertex: vertex keys are int64.

    >>> beyond_int64(pa.array([1, 2**64 - 1, None], pa.uint64())).tolist()
    [False, True, False]
    """
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if not pa.types.is_uint64(arr.type) or len(arr) == 0:
        return None
    big = pc.greater(arr, pa.scalar(np.iinfo(np.int64).max, pa.uint64())).fill_null(False)
    return big.to_numpy(zero_copy_only=False) if pc.any(big).as_py() else None


def _as_str(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr


@dataclass
class VertexIds:
    """The sorted distinct keys (``keys[i]`` is the key of id i) and a lookup from key to id.

    Keys that are a whole range ``offset .. offset + n - 1`` (the generators' and the .gra
    files' 0..n-1) are held as that range: the key column and the lookup table are made on
    first use, so neither the build nor a load spends a pass on them."""

    _keys: pa.Array | None
    kind: str
    _offset: int = 0
    _table: np.ndarray | None = None  # dense int lookup: id of key (offset + i), or -1
    _sorted: np.ndarray | None = None  # sparse int lookup: the sorted keys
    _map: dict | None = field(default=None, repr=False)  # string lookup, built on first use
    _device_tables: dict = field(default_factory=dict, repr=False)  # array module -> table
    _count: int | None = None  # keys offset .. offset + count - 1 (``_keys`` made on first use)

    @classmethod
    def of_range(cls, offset: int, n: int) -> "VertexIds":
        """The keys ``offset .. offset + n - 1``, id = key - offset.

        >>> ids = VertexIds.of_range(10, 3)
        >>> ids.n, ids.keys.to_pylist(), ids.key_range()
        (3, [10, 11, 12], (10, 3))
        """
        return cls(None, "int", _offset=int(offset), _count=int(n))

    @property
    def keys(self) -> pa.Array:
        if self._keys is None:
            self._keys = pa.array(np.arange(self._offset, self._offset + self._count,
                                            dtype=np.int64))
        return self._keys

    @property
    def n(self) -> int:
        return self._count if self._count is not None else len(self._keys)

    def key_range(self) -> tuple[int, int] | None:
        """``(offset, n)`` when the keys are exactly ``offset .. offset + n - 1``, else None."""
        return None if self._count is None else (self._offset, self._count)

    def fresh(self) -> "VertexIds":
        """The same keys with lookups of their own (for an index on another device)."""
        if self._count is not None:
            return VertexIds.of_range(self._offset, self._count)
        return VertexIds.from_sorted_keys(self._keys)

    @classmethod
    def from_sorted_keys(cls, keys: pa.Array) -> "VertexIds":
        """Rebuild the lookup for keys already sorted and distinct (e.g. read from an index)."""
        kind = key_kind(keys.type)
        if kind == "str":
            return cls(_as_str(keys), "str")
        k = _as_int64(keys)
        if k.shape[0] and int(k[-1]) - int(k[0]) == k.shape[0] - 1:
            return cls.of_range(int(k[0]), k.shape[0])  # sorted and distinct: a whole range
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
            mode, offset, size, table = self.lookup(np)
            if mode == LOOKUP_RANGE:
                j = keys - offset  # wrapped (negative) below the range: masked out
                ids = np.where((keys >= offset) & (j < size), j, -1)
            elif mode == LOOKUP_DENSE:
                ids = _lookup_dense(keys, offset, table)
            else:
                ids = self._search_sorted(keys)
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
        big = beyond_int64(arr) if kind == "int" else None
        if big is not None:  # not vertices: looked up as NULL (the caller answers x = y)
            arr = pc.if_else(pa.array(big), pa.scalar(None, arr.type), arr)
        valid = None
        if arr.null_count:
            valid = arr.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
            arr = arr.fill_null("" if kind == "str" else 0)
        if kind == "str":
            return self._codes_of_strings(arr, {} if unknown is None else unknown), valid
        return _as_int64(arr), valid

    def lookup(self, xp=np) -> tuple[int, int, int, object]:
        """``(mode, offset, size, table)`` of the key lookup (shared LOOKUP_* codes): keys that
        are a whole range need no table (the id is ``key - offset``: one dependent load less
        per key, and no table on the device); a dense table of ids for other integer keys of
        small range, the sorted keys otherwise, nothing for strings (looked up on the host).
        ``size``: the range's keys or the table's entries; the table as an array of ``xp``,
        uploaded once."""
        if self.kind == "str":
            return LOOKUP_IDS, 0, 0, xp.empty(0, xp.int32)
        if self._count is not None:
            return LOOKUP_RANGE, self._offset, self._count, xp.empty(0, xp.int32)
        if self._table is not None:
            mode, offset, host = LOOKUP_DENSE, self._offset, self._table
        else:
            mode, offset, host = LOOKUP_SORTED, 0, self._sorted
        if xp is np:
            return mode, offset, host.shape[0], host
        table = self._device_tables.get(xp.__name__)
        if table is None:
            table = self._device_tables[xp.__name__] = xp.asarray(host)
        return mode, offset, host.shape[0], table

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
    """Dense ids for an edge list: ``(VertexIds, src_ids int32, dst_ids int32)`` (the columns
    form of :func:`assign_pairs`, for tools that want them apart).

    ``extra`` holds vertices that may have no edge (e.g. the isolated vertices of a .gra
    file); they get ids too, and answer as isolated vertices.

    >>> ids, s, d = assign_ids(pa.array([30, 10]), pa.array([10, 20]))
    >>> ids.keys.to_pylist(), s.tolist(), d.tolist()
    ([10, 20, 30], [2, 0], [0, 1])
    """
    ids, pairs = assign_pairs(edge_stream(src, dst, extra_vertices=extra), xp)
    s_ids, d_ids = unpack_pairs(xp, pairs)
    return ids, s_ids, d_ids


def assign_pairs(stream: EdgeStream, xp=np):
    """Dense ids of an edge stream: ``(VertexIds, pairs)``, ``pairs`` the edges as packed ids
    (uint64 ``src << 32 | dst``, :func:`~grail_duckdb.kernels.shared.pack_pairs`) in the
    array module ``xp`` (NumPy, or CuPy: the keys are read into the device's array by
    :mod:`.transfer`, which is the only copy of the edges the device holds).

    The two phases of the build, :func:`read_edges` then :func:`assign_read`, in one call.
    """
    return assign_read(read_edges(stream, xp), xp)


@dataclass
class ReadEdges:
    """What the read phase left for the ids phase: integer keys packed as 32-bit offsets
    (``packed``), or, for strings and for integer keys spread over more than 2**32, the stream
    itself (those paths read it again)."""

    stream: EdgeStream
    packed: PackedEdges | None = None


def _narrow_types(types) -> bool:
    """Both key columns hold integers of at most 32 bits that fit int32 (packed as bits)."""
    def fits(t):
        t = t.value_type if pa.types.is_dictionary(t) else t
        return pa.types.is_integer(t) and (t.bit_width < 32 or pa.types.is_int32(t))
    return all(fits(t) for t in types)


def read_edges(stream: EdgeStream, xp=np) -> ReadEdges:
    """The read phase: the keys of the edges into the packed array (see :mod:`.transfer`).
    Keys of 32 bits need no pass before; wider keys take their range first (statistics of
    Parquet files, else one pass on every core)."""
    if stream.kind == "str":
        return ReadEdges(stream)
    if _narrow_types(stream.key_types):
        return ReadEdges(stream, read_packed(stream, xp))
    rng = stream.key_range()
    if rng is not None and rng[1] > np.iinfo(np.int64).max:
        raise EdgeInputError("uint64 vertex keys above 2**63-1 are not supported")
    if rng is not None and rng[1] - rng[0] >= 2**32:
        return ReadEdges(stream)  # the general path reads them itself
    return ReadEdges(stream, read_packed(stream, xp, lo=0 if rng is None else rng[0], check=True))


def assign_read(read: ReadEdges, xp=np):
    """The ids phase: dense ids of what :func:`read_edges` read, ``(VertexIds, pairs)``.

    Integer keys take the cheapest path their range allows (issue 12):

    * keys known to be 0..n-1 (``grail.vertices`` metadata, and the read found none outside):
      the ids are the keys; nothing to do;
    * a range of at most ``DENSE_FACTOR`` x the endpoints: offsets ``key - min`` (in place,
      when the read packed bits) and a presence table; every offset present means ids =
      offsets, otherwise a prefix sum of the table renumbers the packed offsets in place;
    * a range below 2**32: a 32-bit sort of the distinct offsets and a binary search, in place;
    * otherwise the general path: a 64-bit sort of every key, then a second pass.

    Strings are mapped on the host (Arrow's hash table) and the packed ids uploaded.
    """
    stream = read.stream
    if stream.kind == "str":
        return _str_pairs(stream, xp)
    extra = None
    if stream.extra_vertices is not None and len(stream.extra_vertices):
        extra = _as_int64(stream.extra_vertices)
    if read.packed is None:
        return _general_pairs(stream, xp, extra)
    packed, vc = read.packed, stream.vertex_count
    bounds = [(packed.key_min, packed.key_max)] if packed.key_min is not None else []
    bounds += [(0, vc - 1)] if vc else []
    bounds += [(int(extra.min()), int(extra.max()))] if extra is not None else []
    pairs, m = packed.pairs, stream.rows
    if not bounds:
        return VertexIds._for_ints(np.empty(0, np.int64), 0), pairs
    lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
    size = hi - lo + 1
    if size > 2**32:  # the vertex count or extra vertices widen the range: the general path
        return _general_pairs(stream, xp, extra)
    if lo != packed.offset and m:  # offsets from lo, in place, modulo 2**32
        half = pairs.view(xp.uint32)
        half -= xp.uint32((lo - packed.offset) % 2**32)
    endpoints = 2 * m + (vc or 0) + (0 if extra is None else extra.shape[0])
    extra_off = None if extra is None else xp.asarray(extra - lo)
    if size < 2**31 and size <= DENSE_FACTOR * endpoints + 1024:
        return _dense_pairs(stream, xp, pairs, lo, size, extra_off)
    half = pairs.view(xp.uint32)
    parts = [half] + ([] if extra_off is None else [extra_off.astype(xp.uint32)])
    distinct = xp.unique(xp.concatenate(parts) if len(parts) > 1 else half)
    _check_count(int(distinct.shape[0]))
    _remap(xp, pairs, lambda x: xp.searchsorted(distinct, x.astype(xp.uint32)))
    keys = _host(xp)(distinct).astype(np.int64) + lo
    return VertexIds._for_ints(keys, endpoints), pairs


def _host(xp):
    return (lambda a: a) if xp is np else (lambda a: a.get())


def _remap(xp, pairs, fn):
    """``pairs`` rewritten in place, slice by slice: each endpoint id ``x`` becomes ``fn(x)``."""
    step = ingest.CHUNK
    for lo in range(0, pairs.shape[0], step):
        part = pairs[lo:lo + step]
        s = (part >> xp.uint64(32)).astype(xp.int64)
        d = (part & xp.uint64(0xFFFFFFFF)).astype(xp.int64)
        pack_pairs(xp, fn(s), fn(d), out=part)


def _check_count(n: int) -> None:
    if n >= 2**31:
        raise EdgeInputError(f"{n:,} vertices: an index holds at most 2**31 - 1 vertices")


def _general_pairs(stream: EdgeStream, xp, extra):
    """Keys spread over more than 2**32: a 64-bit sort of every key (on the device), then a
    second read packing their ranks. Reads the input itself, twice."""
    def keys():
        for start, s, d in stream.chunks():
            yield start, xp.asarray(_as_int64(s)), xp.asarray(_as_int64(d))

    parts = [x for _, s, d in keys() for x in (s, d)]
    if extra is not None:
        parts.append(xp.asarray(extra))
    distinct = xp.unique(xp.concatenate(parts)) if parts else xp.empty(0, xp.int64)
    del parts
    _check_count(int(distinct.shape[0]))
    pairs = xp.empty(stream.rows, xp.uint64)
    for start, s, d in keys():
        pack_pairs(xp, xp.searchsorted(distinct, s), xp.searchsorted(distinct, d),
                   out=pairs[start:start + s.shape[0]])
    endpoints = 2 * stream.rows + (0 if extra is None else extra.shape[0])
    return VertexIds._for_ints(_host(xp)(distinct), endpoints), pairs


def _dense_pairs(stream: EdgeStream, xp, pairs, lo: int, size: int, extra):
    """The dense path of :func:`assign_read` over offsets packed in ``pairs``: a presence
    table marked in one pass; renumbered in place only when some offset is absent."""
    host = _host(xp)
    vc = stream.vertex_count
    if bool(vc) and lo == 0 and size == vc and extra is None:  # every key 0..n-1 a vertex
        return VertexIds.of_range(0, size), pairs
    present = xp.zeros(size, xp.uint8)
    half = pairs.view(xp.uint32)
    for i in range(0, half.shape[0], ingest.CHUNK):  # bounded index temporaries
        present[half[i:i + ingest.CHUNK].astype(xp.int64)] = 1
    if vc:
        present[-lo:vc - lo] = 1
    if extra is not None:
        present[extra] = 1
    if bool(present.all()):
        return VertexIds.of_range(lo, size), pairs
    table = xp.cumsum(present, dtype=xp.int32)
    table -= 1
    _check_count(int(table[-1]) + 1)
    _remap(xp, pairs, lambda x: table[x])
    table[present == 0] = -1
    keys = host(xp.flatnonzero(present)).astype(np.int64) + lo
    return VertexIds(pa.array(keys, pa.int64()), "int", _offset=lo, _table=host(table)), pairs


def _str_pairs(stream: EdgeStream, xp):
    """String keys: the sorted distinct keys by Arrow's hash table, ids by ``index_in``."""
    cols = [stream.table.column(0), stream.table.column(1)]
    chunks = [_as_str(c) for col in cols for c in col.chunks]
    if stream.extra_vertices is not None:
        chunks.append(_as_str(stream.extra_vertices))
    keys = pc.unique(pa.chunked_array(chunks, pa.large_string()))
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    keys = keys.take(pc.sort_indices(keys))
    _check_count(len(keys))
    pairs = xp.empty(stream.rows, xp.uint64)
    for start, s, d in stream.chunks():
        sid = pc.index_in(_as_str(s), value_set=keys).to_numpy(zero_copy_only=False)
        did = pc.index_in(_as_str(d), value_set=keys).to_numpy(zero_copy_only=False)
        pairs[start:start + len(s)] = xp.asarray(pack_pairs(np, sid, did))
    return VertexIds(keys, "str"), pairs
