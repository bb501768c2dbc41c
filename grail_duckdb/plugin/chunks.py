"""The per-chunk path: answers for one DuckDB chunk (at most 2,048 pairs).

DuckDB calls a Python function once per chunk, from several threads at once. The engine's
query path is one fused compiled pass per call (key lookup, cuts, bounded search; the GIL
released), so a chunk costs the engine's work plus DuckDB's own per-call floor; what this
module adds is only the unwrapping of DuckDB's one-chunk Arrow arrays. A GPU index answers
chunks from its host copy (a chunk is far below what a device call amortises).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.ingest import as_column

__all__ = ["answer", "constant_strings"]


def answer(index, src, dst) -> pa.Array:
    """``index.reaches`` for one chunk of Arrow keys (BooleanArray, NULL where a key is)."""
    src, dst = as_column(src), as_column(dst)
    if src.null_count == len(src) or dst.null_count == len(dst):
        return pa.nulls(len(src), pa.bool_())
    return index.reaches(src, dst)


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
