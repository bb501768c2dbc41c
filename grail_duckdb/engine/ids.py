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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EdgeInputError
from ..growth import roomy
from ..kernels.shared import pack_pairs, unpack_pairs
from ..model import DENSE_FACTOR, VertexIds
from ..model import as_int64 as _as_int64
from ..model import as_large_string as _as_str
from . import ingest
from .ingest import EdgeStream, edge_stream
from .transfer import PackedEdges, read_packed

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

    Integer keys take the cheapest path their range allows:

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
    table = roomy(xp, (size,), xp.int32)  # the lookup: room for appended keys past its end
    xp.cumsum(present, dtype=xp.int32, out=table)
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
