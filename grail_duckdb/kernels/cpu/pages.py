"""Host loops of the index file's pages (:mod:`grail_duckdb.engine.parquet_parts`).

The DAG's children are one BLOB of little-endian int32 per component. pyarrow's writer encodes
a BLOB column value by value (about 50 ns each: a quarter of a save's encoding on the citation
indices, README "Scale", stop 27); a PLAIN page of BLOBs is only each value's byte length
(int32) followed by its bytes, which this loop writes with the children copied as words.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, boundscheck=False)
def blob_words(ptr, children, out):
    """One PLAIN page body of int32 BLOBs, as int32 words: for each row i, its byte length
    ``4 * (ptr[i + 1] - ptr[i])`` and then ``children[ptr[i] - ptr[0]:ptr[i + 1] - ptr[0]]``
    (``out``: ``len(ptr) - 1 + len(children)`` words). Returns the words written.

    >>> out = np.empty(6, np.int32)
    >>> blob_words(np.array([3, 5, 5, 6]), np.array([7, 8, 9], np.int32), out), out.tolist()
    (6, [8, 7, 8, 0, 4, 9])
    """
    q = 0
    base = ptr[0]
    for i in range(ptr.shape[0] - 1):
        a, b = ptr[i] - base, ptr[i + 1] - base
        out[q] = np.int32(4 * (b - a))
        q += 1
        for e in range(a, b):
            out[q] = children[e]
            q += 1
    return q
