"""The Python functions behind the SQL macros (``__grail_*``), registered once per database.

Each finds its database's :class:`~.registry.Registry` by a token on every call. Arrow UDFs
get DuckDB's chunks (at most 2,048 rows) as ``pyarrow`` arrays; the list forms answer whole
columns in one engine call.
"""
from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.index import DEFAULT_LABELS
from ..errors import EdgeInputError, GrailError
from .registry import SUMMARY_SQL, SUMMARY_TYPE, Registry, registry_by_token

__all__ = ["answer_lists", "register_functions"]


def register_functions(con, token: str) -> None:
    """The Python functions behind the macros, on ``con``'s database; each finds its registry
    by ``token`` on every call."""
    funcs = [
        ("__grail_db_token", _token_udf(token), [], "VARCHAR", "native", False),
        ("__grail_reaches_int", _reaches_udf(token), ["BIGINT", "BIGINT", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_str", _reaches_udf(token), ["VARCHAR", "VARCHAR", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        # the same without the index name: DuckDB then converts no per-row name column
        ("__grail_reaches_int_only", _reaches_only_udf(token), ["BIGINT", "BIGINT"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_str_only", _reaches_only_udf(token), ["VARCHAR", "VARCHAR"], "BOOLEAN",
         "arrow", False),
        ("__grail_reaches_list_int", _reaches_list_udf(token), ["BIGINT[]", "BIGINT[]", "VARCHAR"],
         "BOOLEAN[]", "arrow", False),
        ("__grail_reaches_list_str", _reaches_list_udf(token),
         ["VARCHAR[]", "VARCHAR[]", "VARCHAR"], "BOOLEAN[]", "arrow", False),
        ("__grail_index", _index_udf(token),
         ["VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR", "BOOLEAN"],
         SUMMARY_SQL, "arrow", True),
        ("__grail_indexes", _indexes_udf(token), [], f"{SUMMARY_SQL}[]", "native", True),
    ]
    for name, fn, params, ret, kind, side_effects in funcs:
        try:
            con.remove_function(name)
        except (duckdb.InvalidInputException, duckdb.CatalogException):
            pass
        con.create_function(name, fn, params, ret, type=kind, null_handling="special",
                            side_effects=side_effects)

def _token_udf(token: str):
    def db_token():
        """The registry token of this database (found again by later installs)."""
        return token
    return db_token

def _one_name(names) -> str:
    """The index name of a chunk: the argument is a constant in practice; refuse mixtures."""
    if isinstance(names, pa.ChunkedArray):
        arr = names.chunk(0) if names.num_chunks == 1 else names.combine_chunks()
    else:
        arr = names
    if len(arr) == 0:
        return ""
    first = arr[0].as_py()
    if len(arr) > 1 and not _constant(arr, first):
        raise GrailError("reaches: the index name must be the same on every row (a constant)")
    return first or ""

def _constant(arr: pa.Array, first) -> bool:
    """Whether every value of ``arr`` is ``first``; a byte comparison of the string buffers
    (a few microseconds per 2048-row chunk, against ~35 for a compute kernel)."""
    if arr.null_count:
        return arr.null_count == len(arr) and first is None
    if pa.types.is_string(arr.type) and first is not None:
        raw = first.encode()
        off = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + len(arr) + 1]
        if int(off[-1] - off[0]) != len(raw) * len(arr):
            return False
        lengths_ok = bool((np.diff(off) == len(raw)).all())
        data = arr.buffers()[2]
        if not lengths_ok or data is None:
            return lengths_ok
        start, stop = int(off[0]), int(off[-1])
        return data.slice(start, stop - start).equals(pa.py_buffer(raw * len(arr)))
    return bool(pc.all(pc.equal(arr, first)).as_py())

def _reaches_udf(token: str):
    def reaches(src, dst, names):
        """Arrow scalar UDF: one chunk (<= 2048 rows) of pairs -> answers."""
        if src.null_count == len(src) or dst.null_count == len(dst):
            return pa.nulls(len(src), pa.bool_())
        return registry_by_token(token).get(_one_name(names)).index.reaches(src, dst)
    return reaches

def _reaches_only_udf(token: str):
    def reaches_only(src, dst):
        """Arrow scalar UDF on the database's only index: one chunk of pairs -> answers."""
        if src.null_count == len(src) or dst.null_count == len(dst):
            return pa.nulls(len(src), pa.bool_())
        return registry_by_token(token).get("").index.reaches(src, dst)
    return reaches_only

def _reaches_list_udf(token: str):
    def reaches_list(src, dst, names):
        """Arrow UDF over list rows: each row's two key lists -> one list of answers."""
        return answer_lists(registry_by_token(token), src, dst, _one_name(names))
    return reaches_list

def answer_lists(reg: Registry, src, dst, name: str) -> pa.ListArray:
    """Answers for list rows, all rows' keys sent to the engine in one call."""
    src = src.combine_chunks() if isinstance(src, pa.ChunkedArray) else src
    dst = dst.combine_chunks() if isinstance(dst, pa.ChunkedArray) else dst
    ls = pc.list_value_length(src).fill_null(0)
    ld = pc.list_value_length(dst).fill_null(0)
    if not pc.all(pc.equal(ls, ld)).as_py() and len(src):
        raise GrailError("reaches_list: the two key lists of a row differ in length")
    valid = pc.and_(src.is_valid(), dst.is_valid())
    lengths = pc.if_else(valid, ls, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    keep = np.repeat(valid.to_numpy(zero_copy_only=False), ls.to_numpy(zero_copy_only=False))
    s_vals, d_vals = _list_values(src), _list_values(dst)
    if not keep.all():
        s_vals, d_vals = s_vals.filter(pa.array(keep)), d_vals.filter(pa.array(keep))
    if len(s_vals) == 0 or s_vals.null_count == len(s_vals) or d_vals.null_count == len(d_vals):
        answers = pa.nulls(len(s_vals), pa.bool_()) if len(s_vals) else pa.array([], pa.bool_())
    else:
        answers = reg.get(name).index.reaches(s_vals, d_vals)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    mask = pc.invert(valid)
    return pa.ListArray.from_arrays(offsets, answers, mask=mask)

def _list_values(arr: pa.ListArray) -> pa.Array:
    """The element values of a list array, respecting slicing (NULL rows contribute their
    stored elements, if any; callers drop those by the rows' lengths)."""
    offsets = arr.offsets.to_numpy(zero_copy_only=False)
    return arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))

def _index_udf(token: str):
    def grail_index(tables, srcs, dsts, labels, names, paths, rebuilds):
        """Arrow UDF behind the grail_index macro: one summary struct per row."""
        reg = registry_by_token(token)
        rows = []
        for i in range(len(tables)):
            table = tables[i].as_py()
            if table is None:
                raise EdgeInputError("grail_index: the table name is NULL")
            rows.append(reg.build(table, src=srcs[i].as_py() or "src",
                                   dst=dsts[i].as_py() or "dst",
                                   labels=(DEFAULT_LABELS if labels[i].as_py() is None
                                           else labels[i].as_py()),
                                   name=names[i].as_py() or None,
                                   path=paths[i].as_py() or None,
                                   rebuild=bool(rebuilds[i].as_py())))
        return pa.array(rows, SUMMARY_TYPE)
    return grail_index

def _indexes_udf(token: str):
    def grail_indexes():
        """The summaries of the indices this registry holds."""
        reg = registry_by_token(token)
        with reg.lock:
            return [e.summary() for _, e in sorted(reg.entries.items())]
    return grail_indexes
