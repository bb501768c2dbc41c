"""The Python functions behind the SQL macros of ``sql/grail.sql``.

Each body takes the database's :class:`~.registry.Registry` first (the trampolines of
:mod:`.connections` pass it) and then DuckDB's arguments. The ``reaches`` bodies are the
per-chunk path: DuckDB calls them once per chunk of at most 2,048 rows, from several threads at
once; each checks the index's freshness (one counter read while nothing was written) and
answers the chunk in one compiled call (:mod:`.chunks`).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import paths
from ..errors import EdgeInputError, GrailError, KeyTypeError
from . import chunks, duckdb_api, names, traversal
from .registry import SUMMARY_SQL, SUMMARY_TYPE

__all__ = ["FUNCTIONS", "answer_lists"]


def _index_for(reg, name: str):
    """The fresh entry named ``name`` ('' = the only one)."""
    return reg.fresh(reg.get(name))


def key_error(reg, types, values):
    """Raise the error for keys of a type no index has (called only for such rows)."""
    raise KeyTypeError(
        f"reaches: vertex keys must be both integers or both VARCHAR, got "
        f"{types[0].as_py() if len(types) else 'other types'}; cast them to the key type of "
        "the edge table, e.g. CAST(x AS BIGINT)")


def reaches_only(reg, src, dst):
    """``reaches(a, b)`` on the database's only index: one chunk of pairs -> answers."""
    return chunks.answer(_index_for(reg, "").index, src, dst)


def reaches_named(reg, src, dst, names):
    """``reaches(a, b, index_name)``: one chunk of pairs -> answers."""
    return chunks.answer(_index_for(reg, _one_name(names)).index, src, dst)


def _one_name(names) -> str:
    """The index name of a chunk: a constant in practice (checked cheaply); refuse mixtures."""
    arr = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    if len(arr) == 0:
        return ""
    first = arr[0].as_py()
    if len(arr) > 1 and not chunks.constant_strings(arr, first):
        raise GrailError("reaches: the index name must be the same on every row (a constant)")
    return first or ""


def reaches_list(reg, src, dst, names):
    """Arrow UDF over list rows: each row's two key lists -> one list of answers."""
    return answer_lists(reg, src, dst, _one_name(names))


def answer_lists(reg, src, dst, name: str) -> pa.ListArray:
    """Answers for list rows, all rows' keys sent to the engine in one call (a NULL list on
    either side gives a NULL row)."""
    src = src.combine_chunks() if isinstance(src, pa.ChunkedArray) else src
    dst = dst.combine_chunks() if isinstance(dst, pa.ChunkedArray) else dst
    ls = pc.list_value_length(src).fill_null(0)
    ld = pc.list_value_length(dst).fill_null(0)
    valid = pc.and_(src.is_valid(), dst.is_valid())
    if len(src) and not pc.all(pc.or_(pc.equal(ls, ld), pc.invert(valid))).as_py():
        raise GrailError("reaches_list: the two key lists of a row differ in length")
    lengths = pc.if_else(valid, ls, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    keep = np.repeat(valid.to_numpy(zero_copy_only=False), ls.to_numpy(zero_copy_only=False))
    s_vals, d_vals = _list_values(src), _list_values(dst)
    if len(keep) != len(d_vals):
        d_vals = pa.nulls(len(keep), s_vals.type)
    if not keep.all():
        s_vals, d_vals = s_vals.filter(pa.array(keep)), d_vals.filter(pa.array(keep))
    if len(s_vals) == 0:
        answers = pa.array([], pa.bool_())
    else:
        answers = chunks.answer(_index_for(reg, name).index, s_vals, d_vals)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, answers, mask=pc.invert(valid))


def _list_values(arr: pa.ListArray) -> pa.Array:
    """The element values of a list array, respecting slicing."""
    offsets = arr.offsets.to_numpy(zero_copy_only=False)
    return arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def grail_index(reg, tables, srcs, dsts, labels, names, paths, rebuilds, autos, sessions):
    """Arrow UDF behind the grail_index macro: one summary struct per row (``sessions``: the
    calling connection's, see :mod:`.resolve`)."""
    rows = []
    for i in range(len(tables)):
        table = tables[i].as_py()
        if table is None:
            raise EdgeInputError("grail_index: the table name is NULL")
        label = labels[i].as_py()
        rows.append(reg.build(table, src=srcs[i].as_py() or "src", dst=dsts[i].as_py() or "dst",
                              labels=label,
                              name=names[i].as_py() or None, path=paths[i].as_py() or None,
                              rebuild=bool(rebuilds[i].as_py()),
                              auto_rebuild=autos[i].as_py(),
                              session=sessions[i].as_py()))
    return pa.array(rows, SUMMARY_TYPE)


def grail_indexes(reg):
    """The summaries of the indices this registry holds."""
    with reg.lock:
        return [e.summary() for _, e in sorted(reg.entries.items())]


def reach_count(reg, keys, names, forwards):
    """``descendants_count`` / ``ancestors_count``: the size of each key's set."""
    return pa.array([traversal.set_count(_index_for(reg, n or ""), k, bool(f))
                     if k is not None else None
                     for k, n, f in zip(keys.to_pylist(), names.to_pylist(), forwards.to_pylist())],
                    pa.int64())


def keys_source(reg, name):
    """The name of an Arrow source ``(id, key)`` of every vertex of an index, registered in
    DuckDB while the index lives (folded at bind time inside the one-to-all table macros)."""
    entry = _index_for(reg, name or "")
    handle = entry.cache.get("keys_handle")
    if handle is None:
        cur = reg.cursor(quiet=False)
        try:
            handle = duckdb_api.register_source(cur, traversal.keys_table(entry))
        finally:
            cur.close()
        entry.cache["keys_handle"] = handle
    return handle.name


def hops(reg, src, dst, names):
    """``hops(a, b [, index_name])``: one chunk of pairs -> the edges of a shortest path."""
    return _index_for(reg, _one_name(names)).index.hops(src, dst)


def path(reg, src, dst, names):
    """``reaches_path(a, b [, index_name])``: one chunk of pairs -> one shortest path each,
    a list of keys (VARCHAR[] lists as DuckDB's string type)."""
    out = _index_for(reg, _one_name(names)).index.path(src, dst)
    return out.cast(pa.list_(pa.string())) if pa.types.is_large_string(out.type.value_type) \
        else out


def within(reg, src, dst, k, names):
    """``reaches_within(a, b, k [, index_name])``: one chunk of pairs -> answers."""
    return _index_for(reg, _one_name(names)).index.reaches_within(src, dst, k)


_HOPS_TYPE = pa.list_(pa.struct([("id", pa.int32()), ("hops", pa.int32())]))


def reach_hops(reg, keys, names, forwards, limits):
    """``descendants`` / ``ancestors`` with hops: ``(id, hops)`` of every vertex reached from
    (or reaching) each key within its max_hops (NULL: any), ``[(-1, 0)]`` for a key that is
    not a vertex (it reaches only itself), ``[]`` for NULL or a negative max_hops."""
    out = []
    for key, name, forward, limit in zip(keys.to_pylist(), names.to_pylist(),
                                         forwards.to_pylist(), limits.to_pylist()):
        found = paths.reached_ids(_index_for(reg, name or "").index, key, bool(forward), limit)
        ids, dist = found if found is not None else ([-1], [0])
        out.append(pa.StructArray.from_arrays([pa.array(ids, pa.int32()),
                                               pa.array(dist, pa.int32())], ["id", "hops"]))
    offsets = np.concatenate([[0], np.cumsum([len(o) for o in out])]).astype(np.int32)
    values = pa.concat_arrays(out) if out else pa.array([], _HOPS_TYPE.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=_HOPS_TYPE)


def reach_counts_source(reg, name, mode, precision):
    """The name of an Arrow source of ``grail_reach_counts(name, mode, precision)``:
    ``name`` is an index's name or its edge table's (kept registered while the index
    lives, one per mode and precision; folded at bind time inside the table macro)."""
    entry = _index_or_table(reg, name or "")
    slot = ("reach_counts", mode, precision)
    handle = entry.cache.get(slot)
    if handle is None:
        table = entry.index.reach_counts(mode or "auto", int(precision))
        cur = reg.cursor(quiet=False)
        try:
            handle = duckdb_api.register_source(cur, table)
        finally:
            cur.close()
        entry.cache[slot] = handle
    return handle.name


def _index_or_table(reg, name: str):
    """The fresh entry of the index ``name``, else of the only index of the table ``name``."""
    try:
        return _index_for(reg, name)
    except GrailError:
        wanted = name.lower()
        with reg.lock:
            hits = [e for e in reg.entries.values()
                    if wanted in (names.plain_table(e.table).lower(),
                                  names.readable(e.table).lower())]
        if len(hits) != 1:
            raise
        return reg.fresh(hits[0])


_KEY = {"int": "BIGINT", "str": "VARCHAR"}
#: the type of ``__grail_session()`` (sql/grail.sql)
SESSION_SQL = ("STRUCT(database VARCHAR, schema VARCHAR, search_path VARCHAR, "
               "temporary VARCHAR[])")

#: (name, body, parameter types, return type, 'arrow' | 'native', side effects)
FUNCTIONS = [
    *[(f"reaches_{k}_only", reaches_only, [t, t], "BOOLEAN", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"reaches_{k}", reaches_named, [t, t, "VARCHAR"], "BOOLEAN", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"reaches_list_{k}", reaches_list, [f"{t}[]", f"{t}[]", "VARCHAR"], "BOOLEAN[]",
       "arrow", False) for k, t in _KEY.items()],
    *[(f"reaches_list_{k}", reaches_list, [a, b, "VARCHAR"], "BOOLEAN[]", "arrow", False)
      for k, a, b in (("uint_uint", "UBIGINT[]", "UBIGINT[]"), ("uint_int", "UBIGINT[]", "BIGINT[]"),
                      ("int_uint", "BIGINT[]", "UBIGINT[]"))],
    *[(f"reach_count_{k}", reach_count, [t, "VARCHAR", "BOOLEAN"], "BIGINT", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"hops_{k}", hops, [t, t, "VARCHAR"], "INTEGER", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"path_{k}", path, [t, t, "VARCHAR"], f"{t}[]", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"within_{k}", within, [t, t, "BIGINT", "VARCHAR"], "BOOLEAN", "arrow", False)
      for k, t in _KEY.items()],
    *[(f"reach_hops_{k}", reach_hops, [t, "VARCHAR", "BOOLEAN", "BIGINT"],
       "STRUCT(id INTEGER, hops INTEGER)[]", "arrow", False) for k, t in _KEY.items()],
    ("reach_counts_source", reach_counts_source, ["VARCHAR", "VARCHAR", "BIGINT"], "VARCHAR",
     "native", False),
    ("keys_source", keys_source, ["VARCHAR"], "VARCHAR", "native", False),
    ("key_error", key_error, ["VARCHAR", "VARCHAR"], "BOOLEAN", "arrow", False),
    ("index", grail_index,
     ["VARCHAR", "VARCHAR", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR", "BOOLEAN", "BOOLEAN",
      SESSION_SQL], SUMMARY_SQL, "arrow", True),
    ("indexes", grail_indexes, [], f"{SUMMARY_SQL}[]", "native", True),
]
