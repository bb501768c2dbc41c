"""The per-chunk path: answers for one DuckDB chunk (at most 2,048 pairs) with as little
Python around the engine's compiled calls as possible.

DuckDB calls a Python function once per chunk, from several threads at once; the engine's
kernels release the GIL, so what a chunk costs beyond DuckDB's own floor (an identity arrow
function) is the engine's work plus the Python around it. For integer keys of an index with a
dense key table (the common case), :func:`answer` reads the two key columns as NumPy views of
the Arrow buffers (no copy, no pyarrow compute), looks the keys up and classifies them in the
engine's compiled functions, searches only the pairs no cut settles, and builds the answer
array from the bits; anything else goes through ``GrailIndex.reaches``.

A GPU index answers chunks from its host copy (a chunk is far below what a device call
amortises).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import queries
from ..engine.ids import _lookup_dense
from ..kernels import shared as K

__all__ = ["answer", "constant_strings"]

_ANSWER_OF = np.zeros(8, np.bool_)
_ANSWER_OF[list(K.SETTLED_TRUE)] = True
_INT64 = pa.int64()


def answer(index, src, dst) -> pa.Array:
    """``index.reaches`` for one chunk of Arrow keys (BooleanArray, NULL where a key is)."""
    src, dst = _one(src), _one(dst)
    if src.null_count == len(src) or dst.null_count == len(dst):
        return pa.nulls(len(src), pa.bool_())
    if index.backend != "cpu":
        index = index.host_copy()
    table = getattr(index.ids, "_table", None)
    if (table is None or index.ids.kind != "int" or src.type != _INT64 or dst.type != _INT64
            or src.offset or dst.offset):
        return index.reaches(src, dst)
    a = np.frombuffer(src.buffers()[1], np.int64, len(src))
    b = np.frombuffer(dst.buffers()[1], np.int64, len(dst))
    offset = index.ids._offset
    sid = _lookup_dense(a, offset, table)
    did = _lookup_dense(b, offset, table)
    valid = None
    if src.null_count or dst.null_count:
        valid = _valid(src) & _valid(dst)
        sid[~valid] = -1
        did[~valid] = -1
    identity = index.n_components == index.n_vertices
    status = index.kernels.query_cuts(sid, did, None if identity else index.comp,
                                      index.labels, True)
    out = _ANSWER_OF[status]
    todo = np.flatnonzero(status == K.UNDECIDED)
    if todo.shape[0]:
        out[todo] = queries._search(index, sid[todo], did[todo], queries.SEARCH_WORDS, True)
    unknown = np.flatnonzero(status == K.UNKNOWN)
    if unknown.shape[0]:  # keys that are not vertices still reach themselves
        out[unknown] = a[unknown] == b[unknown]
    if valid is not None:
        return pa.array(out, pa.bool_(), mask=~valid)
    return pa.array(out, pa.bool_())


def _one(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), np.bool_)
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little")[:len(arr)].astype(np.bool_)


def constant_strings(arr: pa.Array, first) -> bool:
    """Whether every value of ``arr`` is ``first``; a byte comparison of the string buffers
    (a few microseconds per chunk, against ~35 for a compute kernel)."""
    if arr.null_count:
        return arr.null_count == len(arr) and first is None
    if pa.types.is_string(arr.type) and first is not None:
        raw = first.encode()
        off = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + len(arr) + 1]
        if int(off[-1] - off[0]) != len(raw) * len(arr):
            return False
        if not bool((np.diff(off) == len(raw)).all()):
            return False
        data = arr.buffers()[2]
        if data is None:
            return True
        start, stop = int(off[0]), int(off[-1])
        return data.slice(start, stop - start).equals(pa.py_buffer(raw * len(arr)))
    return bool(pc.all(pc.equal(arr, first)).as_py())
