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
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import IndexFileError, StaleIndexError
from ..kernels import to_host
from .csr import CSR
from .ids import VertexIds
from .labels import Labels

FORMAT_NAME = "grail_duckdb-index"
FORMAT_VERSION = 1
_META = "grail_duckdb."


def _digest(meta: dict, keys: pa.Array, columns: dict[str, np.ndarray], dag_ptr, dag_idx) -> str:
    """blake2b over the metadata (but the digest itself), the keys' values and every numeric
    column, in a canonical byte form."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(meta):
        if name != "digest":
            h.update(f"{name}={meta[name]};".encode())
    if pa.types.is_integer(keys.type):
        h.update(keys.to_numpy(zero_copy_only=False).astype(np.int64).tobytes())
    else:
        k = keys.cast(pa.large_string())
        offsets = np.frombuffer(k.buffers()[1], np.int64)[k.offset:k.offset + len(k) + 1]
        h.update((offsets - offsets[0]).tobytes())
        h.update(memoryview(k.buffers()[2])[offsets[0]:offsets[-1]] if len(k) else b"")
    for name in sorted(columns):
        h.update(name.encode())
        h.update(np.ascontiguousarray(columns[name]).tobytes())
    h.update(np.asarray(dag_ptr, np.int64).tobytes())
    h.update(np.asarray(dag_idx, np.int32).tobytes())
    return h.hexdigest()


def _component_columns(lab: Labels) -> dict[str, np.ndarray]:
    """Per-component arrays by column name (host copies)."""
    cols = {"level": to_host(lab.level), "tree_lo": to_host(lab.tree_lo),
            "tree_post": to_host(lab.tree_post)}
    inner, outer = to_host(lab.inner), to_host(lab.outer)
    for j in range(inner.shape[1]):
        cols[f"inner_{j + 1}"] = inner[:, j]
        cols[f"outer_{j + 1}"] = outer[:, j]
    down, up = to_host(lab.hub_down), to_host(lab.hub_up)
    for w in range(down.shape[1]):
        cols[f"hub_down_{w + 1}"] = down[:, w]
        cols[f"hub_up_{w + 1}"] = up[:, w]
    return cols


def _representatives(comp: np.ndarray) -> np.ndarray:
    """Rows of each component's first vertex (components are numbered by first occurrence,
    so these are exactly the rows where the running maximum grows)."""
    if comp.shape[0] == 0:
        return np.zeros(0, bool)
    running = np.maximum.accumulate(comp)
    return np.concatenate([[True], running[1:] > running[:-1]])


def to_table(index, source: dict | None = None) -> pa.Table:
    """The index as an Arrow table (one row per vertex) with its schema metadata;
    ``source`` (str -> str) is stored under ``source.<key>``."""
    comp = to_host(index.comp).astype(np.int32, copy=False)
    n = comp.shape[0]
    ccols = _component_columns(index.labels)
    ptr, idx = to_host(index.dag.indptr), to_host(index.dag.indices)
    rep = _representatives(comp)
    # list column: components' child lists on representative rows, NULL elsewhere
    counts = np.zeros(n, np.int64)
    counts[rep] = np.diff(ptr)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    children = pa.ListArray.from_arrays(pa.array(offsets), pa.array(idx, pa.int32()),
                                        mask=pa.array(~rep))
    keys = index.ids.keys
    arrays = {"key": keys, "component": pa.array(comp)}
    for name, values in ccols.items():
        arrays[name] = pa.array(values[comp] if n else values)
    arrays["dag_children"] = children
    meta = {
        "format": FORMAT_NAME, "version": str(FORMAT_VERSION), "labels": str(index.d),
        "seed": str(index.seed), "fingerprint": index.fingerprint,
        "edge_rows": str(index.edge_rows), "vertices": str(n),
        "components": str(index.n_components), "dag_edges": str(idx.shape[0]),
        "key_type": index.ids.kind, "hub_words": str(index.labels.hub_down.shape[1]),
    }
    meta.update({f"source.{k}": str(v) for k, v in (source or {}).items()})
    meta["digest"] = _digest(meta, keys, ccols, ptr, idx)
    schema_meta = {(_META + k).encode(): v.encode() for k, v in meta.items()}
    return pa.table(arrays).replace_schema_metadata(schema_meta)


def save(index, path, *, source: dict | None = None, fsync: bool = True) -> Path:
    """Write ``index`` to ``path`` atomically: a temporary file in the same folder, flushed,
    then renamed over the old one. A crash at any point leaves the previous file intact.
    ``source`` (str -> str) describes where the edges came from; :func:`read_metadata`
    returns it under ``source.<key>``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = to_table(index, source)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd", write_page_checksum=True)
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if fsync and hasattr(os, "O_DIRECTORY"):
            dfd = os.open(path.parent, os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


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
    if version < 1:
        raise IndexFileError(f"{path} has an unknown index format version {version}")
    return meta


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
        table = pq.read_table(path, page_checksum_verification=True)
        d = int(meta["labels"])
        n, c = int(meta["vertices"]), int(meta["components"])
        if table.num_rows != n:
            raise ValueError(f"{table.num_rows} rows, metadata says {n}")
        comp = table.column("component").to_numpy().astype(np.int32)
        children = table.column("dag_children").combine_chunks()
        rep = children.is_valid().to_numpy(zero_copy_only=False)
        if int(rep.sum()) != c:
            raise ValueError("representative rows do not match the component count")
        reps = children.filter(pa.array(rep))
        lengths = pc.list_value_length(reps).to_numpy(zero_copy_only=False).astype(np.int64)
        ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        idx = pc.list_flatten(reps).to_numpy(zero_copy_only=False).astype(np.int32)
        hw = int(meta["hub_words"])
        names = ["level", "tree_lo", "tree_post"] + [
            f"{side}_{j + 1}" for j in range(d) for side in ("inner", "outer")]
        hub_names = [f"hub_{side}_{w + 1}" for w in range(hw) for side in ("down", "up")]
        rep_idx = np.flatnonzero(rep)
        if not np.array_equal(comp[rep_idx], np.arange(c, dtype=np.int32)):
            raise ValueError("component numbering does not follow the rows")
        ccols = {nm: table.column(nm).to_numpy().astype(np.int32)[rep_idx] for nm in names}
        ccols.update({nm: table.column(nm).to_numpy().astype(np.uint64)[rep_idx]
                      for nm in hub_names})
        keys = table.column("key").combine_chunks()
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
