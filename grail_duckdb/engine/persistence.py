"""The index as one Parquet file, written atomically, refused when corrupt, foreign or stale.

Layout: one row per vertex, in id order (the sorted keys), readable by DuckDB itself
(``SELECT * FROM 'cites.grail.parquet'``):

============== ==================================================================
column         meaning
============== ==================================================================
key            the vertex key (BIGINT or VARCHAR, as in the edge table)
component      id of the vertex's strongly connected component
level          topological level of the component in the condensed DAG
tree_lo        first post rank of the component's spanning-tree subtree
tree_post      post rank of the component in the spanning tree
inner_j        lower end of the component's j-th GRAIL interval (j = 1..d)
outer_j        upper end of the component's j-th GRAIL interval
hub_down_w     bits of the hubs the component reaches (UBIGINT, w = 1..hub words)
hub_up_w       bits of the hubs that reach the component
dag_children   the component's children in the condensed DAG, on the component's first
               vertex (its representative) and NULL on every other row
============== ==================================================================

Components are numbered by their first vertex, so the representatives' rows, in file order,
are components 0, 1, 2, ...: loading needs no recomputation.

Schema metadata holds the format name and version, d, the seed, the fingerprint of the
source edges, counts, what the caller says about the source (``source.*``: the SQL plugin
records the table, its columns and a cheap check of its content), and a digest of all of it
and of the content, checked on load.

Speed (format 2, issue 12): the file is written by DuckDB's Parquet writer, which encodes and
compresses row groups on every core (zstd level 1; pyarrow's writer uses one thread), and read
back by DuckDB's parallel scan. The digest is a tree of blake2b digests over pieces of
64 MiB hashed on every core (``hashlib`` releases the GIL), so neither side has a
single-threaded pass over the data. When every component is one vertex (any DAG), the
per-component columns are written as they are, with no gather. Files of format 1 (one
sequential digest) are refused with a message that says to rebuild.
"""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IndexFileError, StaleIndexError
from ..kernels import to_host
from .atomic_write import replace_atomically
from .csr import CSR
from .ids import VertexIds
from .labels import Labels

FORMAT_NAME = "grail_duckdb-index"
FORMAT_VERSION = 2
_META = "grail_duckdb."
#: the digest hashes its input in pieces of this many bytes, in parallel
_PIECE = 64 << 20


def _threads() -> int:
    return max(1, os.cpu_count() or 1)


def _bytes_of(a) -> memoryview:
    """The bytes of a contiguous NumPy array (no copy) or of an Arrow buffer."""
    if isinstance(a, np.ndarray):
        return memoryview(np.ascontiguousarray(a)).cast("B")
    return memoryview(a)


def _key_parts(keys: pa.Array) -> list:
    """The keys in a canonical byte form: int64 values, or normalised string offsets + data."""
    if pa.types.is_integer(keys.type):
        return [keys.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)]
    k = keys.cast(pa.large_string()) if not pa.types.is_large_string(keys.type) else keys
    offsets = np.frombuffer(k.buffers()[1], np.int64)[k.offset:k.offset + len(k) + 1]
    data = memoryview(k.buffers()[2])[offsets[0]:offsets[-1]] if len(k) else b""
    return [offsets - offsets[0], np.frombuffer(data, np.uint8)]


def _digest(meta: dict, keys: pa.Array, columns: dict[str, np.ndarray], dag_ptr, dag_idx) -> str:
    """blake2b over the metadata (but the digest itself) and, as a tree, over the content: each
    named array is cut into pieces of ``_PIECE`` bytes, the pieces are hashed on every core, and
    the root hashes the names with their pieces' digests in a fixed order."""
    named = [("key", p) for p in _key_parts(keys)]
    named += [(name, columns[name]) for name in sorted(columns)]
    named += [("dag_ptr", np.asarray(dag_ptr, np.int64)), ("dag_idx", np.asarray(dag_idx, np.int32))]
    pieces = []
    for name, arr in named:
        buf = _bytes_of(arr)
        pieces += [(name, buf[lo:lo + _PIECE]) for lo in range(0, max(len(buf), 1), _PIECE)]
    with ThreadPoolExecutor(_threads()) as pool:
        sums = list(pool.map(lambda p: hashlib.blake2b(p[1], digest_size=16).digest(), pieces))
    root = hashlib.blake2b(digest_size=16)
    for name in sorted(meta):
        if name != "digest":
            root.update(f"{name}={meta[name]};".encode())
    for (name, _), s in zip(pieces, sums):
        root.update(name.encode())
        root.update(s)
    return root.hexdigest()


def _component_columns(lab: Labels) -> dict[str, np.ndarray]:
    """Per-component arrays by column name (contiguous host copies)."""
    cols = {"level": to_host(lab.level), "tree_lo": to_host(lab.tree_lo),
            "tree_post": to_host(lab.tree_post)}
    inner, outer = to_host(lab.inner), to_host(lab.outer)
    for j in range(inner.shape[1]):
        cols[f"inner_{j + 1}"] = np.ascontiguousarray(inner[:, j])
        cols[f"outer_{j + 1}"] = np.ascontiguousarray(outer[:, j])
    down, up = to_host(lab.hub_down), to_host(lab.hub_up)
    for w in range(down.shape[1]):
        cols[f"hub_down_{w + 1}"] = np.ascontiguousarray(down[:, w])
        cols[f"hub_up_{w + 1}"] = np.ascontiguousarray(up[:, w])
    return cols


def _representatives(comp: np.ndarray) -> np.ndarray:
    """Rows of each component's first vertex (components are numbered by first occurrence,
    so these are exactly the rows where the running maximum grows)."""
    if comp.shape[0] == 0:
        return np.zeros(0, bool)
    running = np.maximum.accumulate(comp)
    return np.concatenate([[True], running[1:] > running[:-1]])


def _children_column(ptr: np.ndarray, idx: np.ndarray, rep: np.ndarray | None, n: int):
    """The DAG's child lists on the representatives' rows, NULL elsewhere (``rep`` None: every
    row is its component's representative). 64-bit offsets past 2**31 - 1 children."""
    if rep is None:
        offsets = np.asarray(ptr, np.int64)
        mask = None
    else:
        counts = np.zeros(n, np.int64)
        counts[rep] = np.diff(ptr)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        mask = pa.array(~rep)
    values = pa.array(idx, pa.int32())
    if offsets[-1] < 2**31 - 1:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)


def to_table(index, source: dict | None = None) -> tuple[pa.Table, dict[str, str]]:
    """The index as an Arrow table (one row per vertex) and its metadata (``str -> str``, keys
    without the ``grail_duckdb.`` prefix); ``source`` (str -> str) is stored under
    ``source.<key>``."""
    comp = to_host(index.comp).astype(np.int32, copy=False)
    n = comp.shape[0]
    ccols = _component_columns(index.labels)
    ptr, idx = to_host(index.dag.indptr), to_host(index.dag.indices)
    identity = index.n_components == n  # every component is one vertex: no gather
    rep = None if identity else _representatives(comp)
    keys = index.ids.keys
    arrays = {"key": keys, "component": pa.array(comp)}
    for name, values in ccols.items():
        arrays[name] = pa.array(values if identity else values[comp])
    arrays["dag_children"] = _children_column(ptr, idx, rep, n)
    meta = {
        "format": FORMAT_NAME, "version": str(FORMAT_VERSION), "labels": str(index.d),
        "seed": str(index.seed), "fingerprint": index.fingerprint,
        "edge_rows": str(index.edge_rows), "vertices": str(n),
        "components": str(index.n_components), "dag_edges": str(idx.shape[0]),
        "key_type": index.ids.kind, "hub_words": str(index.labels.hub_down.shape[1]),
    }
    meta.update({f"source.{k}": str(v) for k, v in (source or {}).items()})
    meta["digest"] = _digest(meta, keys, ccols, ptr, idx)
    return pa.table(arrays), meta


def _sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _write_parquet(table: pa.Table, meta: dict[str, str], tmp: str) -> None:
    """Write the table with its metadata as Parquet, on every core (DuckDB's writer: row groups
    encoded and zstd-compressed in parallel, in order)."""
    con = duckdb.connect(config={"threads": _threads()})
    try:
        con.register("grail_index_rows", table)
        kv = ", ".join(f"{_sql_text(_META + k)}: {_sql_text(v)}" for k, v in meta.items())
        con.execute(f"COPY grail_index_rows TO {_sql_text(tmp)} (FORMAT parquet, "
                    f"COMPRESSION zstd, COMPRESSION_LEVEL 1, KV_METADATA {{{kv}}})")
    finally:
        con.close()


def save(index, path, *, source: dict | None = None, fsync: bool = True) -> Path:
    """Write ``index`` to ``path`` atomically (:mod:`.atomic_write`: a locked temporary beside
    it, flushed, renamed over the old file; a crash at any point leaves the previous file
    intact). A ``path`` that exists and is not an index of this project is refused with
    :class:`IndexFileError`. ``source`` (str -> str) describes where the edges came from;
    :func:`read_metadata` returns it under ``source.<key>``."""
    table, meta = to_table(index, source)
    return replace_atomically(Path(path), FORMAT_NAME,
                              lambda tmp: _write_parquet(table, meta, tmp), fsync=fsync)


def read_metadata(path) -> dict[str, str]:
    """The index file's metadata (format, version, labels, fingerprint, counts) without reading
    its data; raises :class:`IndexFileError` for anything that is not a current index file."""
    path = Path(path)
    if not path.exists():
        raise IndexFileError(f"no index file at {path}; build one first (grail_duckdb.build_index "
                             "or SELECT grail_index(...) in SQL)")
    try:
        raw = pq.read_schema(path).metadata or {}
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise IndexFileError(f"{path} is not a readable Parquet file (truncated or corrupt: "
                             f"{exc}); delete it and rebuild the index") from exc
    meta = {k.decode()[len(_META):]: v.decode() for k, v in raw.items()
            if k.startswith(_META.encode())}
    if meta.get("format") != FORMAT_NAME:
        raise IndexFileError(f"{path} is a Parquet file but not a grail_duckdb index")
    try:
        version = int(meta.get("version", ""))
    except ValueError:
        raise IndexFileError(f"{path} has an unreadable format version") from None
    if version > FORMAT_VERSION:
        raise IndexFileError(f"{path} was written in index format {version} by a newer "
                             f"grail_duckdb (this one reads format {FORMAT_VERSION}); upgrade "
                             "grail_duckdb or rebuild the index")
    if version < FORMAT_VERSION:
        raise IndexFileError(f"{path} was written in index format {version} by an older "
                             f"grail_duckdb (this one reads format {FORMAT_VERSION}); rebuild "
                             "the index (grail_index(..., rebuild := true) in SQL, or "
                             "python -m grail_duckdb build)")
    return meta


def _read_parquet(path: Path) -> pa.Table:
    """The index file as an Arrow table, in file order, read on every core by DuckDB (3x
    pyarrow's reader on the list column, measured on 2 cores)."""
    con = duckdb.connect(config={"threads": _threads()})
    try:
        return con.sql(f"SELECT * FROM read_parquet({_sql_text(str(path))})").to_arrow_table()
    finally:
        con.close()


def _column(table: pa.Table, name: str) -> np.ndarray:
    """One column of the table as a NumPy array (its chunks concatenated)."""
    col = table.column(name)
    if col.null_count:
        raise ValueError(f"column {name} has NULLs")
    return col.to_numpy()


def load(path, *, expect_fingerprint: str | None = None) -> dict:
    """Read an index written by :func:`save`, with no recomputation: the fields of a
    :class:`~grail_duckdb.engine.index.GrailIndex` but its kernels, as host arrays
    (:func:`grail_duckdb.engine.index.load_index` moves them to a backend).

    Refused with :class:`IndexFileError`: a missing, truncated, corrupt, foreign or newer-format
    file, or one whose content digest does not match. With ``expect_fingerprint``, an index
    built from other edges is refused with :class:`StaleIndexError`.
    """
    path = Path(path)
    meta = read_metadata(path)
    if expect_fingerprint is not None and meta.get("fingerprint") != expect_fingerprint:
        raise StaleIndexError(f"the index at {path} was built from different edges than the "
                              "current ones; rebuild it (grail_index(..., rebuild := true) in SQL "
                              "or grail_duckdb.build_index(...).save(path))")
    try:
        table = _read_parquet(path)
        d = int(meta["labels"])
        n, c = int(meta["vertices"]), int(meta["components"])
        if table.num_rows != n:
            raise ValueError(f"{table.num_rows} rows, metadata says {n}")
        hw = int(meta["hub_words"])
        names = ["level", "tree_lo", "tree_post"] + [
            f"{side}_{j + 1}" for j in range(d) for side in ("inner", "outer")]
        hub_names = [f"hub_{side}_{w + 1}" for w in range(hw) for side in ("down", "up")]
        with ThreadPoolExecutor(_threads()) as pool:
            got = dict(zip(["component"] + names + hub_names, pool.map(
                lambda nm: _column(table, nm), ["component"] + names + hub_names)))
        comp = got.pop("component").astype(np.int32, copy=False)
        children = table.column("dag_children")
        identity = c == n
        if identity:
            if children.null_count:
                raise ValueError("representative rows do not match the component count")
            reps, rep_idx = children, None
        else:
            rep = children.is_valid().to_numpy(zero_copy_only=False)
            if int(rep.sum()) != c:
                raise ValueError("representative rows do not match the component count")
            rep_idx = np.flatnonzero(rep)
            reps = children.filter(pa.chunked_array([pa.array(rep)]))
        lengths = pc.list_value_length(reps).to_numpy().astype(np.int64)
        ptr = np.zeros(c + 1, np.int64)
        np.cumsum(lengths, out=ptr[1:])
        idx = pc.list_flatten(reps).to_numpy().astype(np.int32, copy=False)
        if rep_idx is not None:
            if not np.array_equal(comp[rep_idx], np.arange(c, dtype=np.int32)):
                raise ValueError("component numbering does not follow the rows")
            got = {nm: a[rep_idx] for nm, a in got.items()}
        elif n and not np.array_equal(comp, np.arange(n, dtype=np.int32)):
            raise ValueError("component numbering does not follow the rows")
        ccols = {nm: got[nm].astype(np.int32, copy=False) for nm in names}
        ccols.update({nm: got[nm].astype(np.uint64, copy=False) for nm in hub_names})
        keys = table.column("key").combine_chunks()
        del table, children, reps
        if _digest(meta, keys, ccols, ptr, idx) != meta.get("digest"):
            raise ValueError("content digest mismatch")
        if n and (comp.min() < 0 or comp.max() >= c):
            raise ValueError("component ids out of range")
        if idx.shape[0] and (idx.min() < 0 or idx.max() >= c):
            raise ValueError("DAG edges out of range")
        seed, edge_rows, fingerprint = int(meta["seed"]), int(meta["edge_rows"]), meta["fingerprint"]
    except (StaleIndexError, IndexFileError):
        raise
    except Exception as exc:
        raise IndexFileError(f"{path} is damaged ({exc}); delete it and rebuild the index") from exc
    inner = np.stack([ccols[f"inner_{j + 1}"] for j in range(d)], axis=1)
    outer = np.stack([ccols[f"outer_{j + 1}"] for j in range(d)], axis=1)
    down = np.stack([ccols[f"hub_down_{w + 1}"] for w in range(hw)], axis=1).reshape(c, hw)
    up = np.stack([ccols[f"hub_up_{w + 1}"] for w in range(hw)], axis=1).reshape(c, hw)
    lab = Labels(level=ccols["level"], inner=inner.reshape(c, d), outer=outer.reshape(c, d),
                 tree_post=ccols["tree_post"], tree_lo=ccols["tree_lo"], hub_down=down,
                 hub_up=up)
    return dict(ids=VertexIds.from_sorted_keys(keys), comp=comp, n_components=c,
                dag=CSR(ptr, idx), labels=lab, seed=seed, edge_rows=edge_rows,
                fingerprint=fingerprint)
