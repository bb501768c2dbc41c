"""The per-chunk path: answers for one DuckDB chunk (at most 2,048 pairs).

DuckDB calls a Python function once per chunk, from several threads at once. A chunk is
answered by :func:`grail_duckdb.engine.queries.answer_chunk`: the keys read where DuckDB's
Arrow arrays hold them, one fused compiled pass (key lookup, cuts, bounded search; the GIL
released), the exact search of the pairs left over when there are any, and nothing else per
call. A GPU index classifies chunks on the host, from a copy of its labels (a chunk is far
below what a device call amortises); only the pairs the cuts leave reach the device.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.queries import answer_chunk

__all__ = ["answer", "constant_strings"]


def answer(index, src, dst) -> pa.Array:
    """The answers for one chunk of Arrow keys (BooleanArray, NULL where a key is; a side
    that is NULL throughout answers NULL whatever its type)."""
    if src.null_count == len(src) or dst.null_count == len(dst):
        return pa.nulls(len(src), pa.bool_())
    return answer_chunk(index, src, dst)


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
