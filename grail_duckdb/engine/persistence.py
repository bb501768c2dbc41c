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
dag_children   the component's children in the condensed DAG as a BLOB of little-endian
               int32 component ids, on the component's first vertex (its representative)
               and NULL on every other row
============== ==================================================================

Components are numbered by their first vertex, so the representatives' rows, in file order,
are components 0, 1, 2, ...: loading needs no recomputation.

Schema metadata holds the format name and version, d, the seed, the fingerprint of the
source edges, counts, what the caller says about the source (``source.*``: the SQL plugin
records the table, its columns and a cheap check of its content), and a digest of all of it
and of the content, checked on load.

Speed (format 3, issue 12): the rows are cut into parts of about ``PART_BYTES``; every core
encodes parts with pyarrow's writer into memory (one row group each) and hashes them, and
:mod:`.parquet_parts` lays them into one file behind a footer of its own (pyarrow writes on
one thread, DuckDB's parallel writer reached 0.28 GB/s). Columns are encoded for speed: sorted
keys and component ids delta-encoded, the label columns LZ4 (they shrink to ~0.5), the rest
(tree ranks, the children) plain: they hardly compress. The children are one BLOB per
component rather than a list: a list column costs a repetition level per child, ten times the
time of the BLOB both ways (measured). Loading reads the row groups on every core straight
into the final arrays (on the device, for a GPU index) and hashes them as they arrive
(:mod:`.index_reader`). The digest is a blake2b over the sha256 digests of every
column of every row group. Files of formats 1 and 2 are refused with a message that
says to rebuild.
"""
from __future__ import annotations

import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import IndexFileError, StaleIndexError
from ..kernels import to_host
from . import parquet_parts
from .atomic_write import replace_atomically
from .ids import VertexIds
from .index_format import (FORMAT_NAME, FORMAT_VERSION, META_PREFIX, label_names, leaf_hash,
                           read_metadata, root_digest, threads, write_options)
from .index_reader import IndexReader

#: raw bytes of index data per part (one row group, encoded by one thread)
PART_BYTES = 64 << 20
#: bytes written between two flushes to disk while a save is under way
_SYNC_BYTES = 256 << 20


# --- save ---------------------------------------------------------------------------------
@dataclass
class _Rows:
    """The index's arrays on the host, and how to cut them into the file's rows."""

    ids: VertexIds
    comp: np.ndarray
    cols: dict[str, tuple[np.ndarray, int | None]]  # column -> (array, column of a 2-D one)
    ptr: np.ndarray
    idx: np.ndarray
    rep: np.ndarray | None  # representative rows (None: every row is one)
    names: list[str]

    @property
    def n(self) -> int:
        return self.comp.shape[0]

    def bounds(self) -> list[tuple[int, int]]:
        """Row ranges of the parts (at least one, also for an empty index)."""
        per_row = 8 + 4 + 4 * len(self.cols) + 4 * self.idx.shape[0] / max(self.n, 1)
        step = max(1024, int(PART_BYTES / per_row))
        return [(lo, min(lo + step, self.n)) for lo in range(0, max(self.n, 1), step)]

    def part(self, lo: int, hi: int) -> pa.Table:
        """Rows ``[lo, hi)`` as an Arrow table (label columns gathered per vertex)."""
        comp = self.comp[lo:hi]
        rng = self.ids.key_range()
        if rng is not None:
            key = pa.array(np.arange(rng[0] + lo, rng[0] + hi, dtype=np.int64))
        else:
            key = self.ids.keys.slice(lo, hi - lo)
        arrays = {"key": key, "component": pa.array(comp)}
        for name, (arr, j) in self.cols.items():
            rows = slice(lo, hi) if self.rep is None else comp
            arrays[name] = pa.array(np.ascontiguousarray(arr[rows] if j is None else arr[rows, j]))
        arrays["dag_children"] = self._children(lo, hi, comp)
        return pa.table(arrays)

    def _children(self, lo: int, hi: int, comp: np.ndarray) -> pa.Array:
        """The DAG's children of rows ``[lo, hi)`` as BLOBs of int32 (NULL off the
        representatives), built over the arrays without a copy of the children."""
        if self.rep is None:
            c0, c1, valid, nulls = lo, hi, None, 0
            counts = np.diff(self.ptr[lo:hi + 1])
        else:
            r = self.rep[lo:hi]
            first = comp[r]
            c0 = int(first[0]) if first.shape[0] else 0
            c1 = c0 + first.shape[0]
            counts = np.zeros(hi - lo, np.int64)
            counts[r] = np.diff(self.ptr[c0:c1 + 1])
            valid = pa.array(r).buffers()[1]
            nulls = (hi - lo) - first.shape[0]
        offsets = np.zeros(hi - lo + 1, np.int64)
        np.cumsum(counts * 4, out=offsets[1:])
        data = self.idx[self.ptr[c0]:self.ptr[c1]]
        wide = offsets[-1] >= 2**31
        typ = pa.large_binary() if wide else pa.binary()
        offs = offsets if wide else offsets.astype(np.int32)
        return pa.Array.from_buffers(typ, hi - lo, [valid, pa.py_buffer(offs), pa.py_buffer(data)],
                                     null_count=nulls)


def _host_rows(index) -> _Rows:
    """The index's arrays copied to the host (in parallel: device copies and gathers)."""
    lab = index.labels
    arrays = {"comp": index.comp, "ptr": index.dag.indptr, "idx": index.dag.indices,
              **lab.arrays()}
    with ThreadPoolExecutor(threads()) as pool:
        host = dict(zip(arrays, pool.map(lambda a: np.ascontiguousarray(to_host(a)),
                                         arrays.values())))
    comp = host["comp"].astype(np.int32, copy=False)
    d, hw = host["inner"].shape[1], host["hub_down"].shape[1]
    names = label_names(d, hw)
    cols: dict = {"level": (host["level"], None), "tree_lo": (host["tree_lo"], None),
                  "tree_post": (host["tree_post"], None)}
    for j in range(d):
        cols[f"inner_{j + 1}"] = (host["inner"], j)
        cols[f"outer_{j + 1}"] = (host["outer"], j)
    for w in range(hw):
        cols[f"hub_down_{w + 1}"] = (host["hub_down"], w)
        cols[f"hub_up_{w + 1}"] = (host["hub_up"], w)
    rep = None if index.n_components == comp.shape[0] else _representatives(comp)
    return _Rows(index.ids, comp, {n: cols[n] for n in names},
                 host["ptr"].astype(np.int64, copy=False),
                 host["idx"].astype(np.int32, copy=False), rep, names)


def _representatives(comp: np.ndarray) -> np.ndarray:
    """Rows of each component's first vertex (components are numbered by first occurrence,
    so these are exactly the rows where the running maximum grows)."""
    if comp.shape[0] == 0:
        return np.zeros(0, bool)
    running = np.maximum.accumulate(comp)
    return np.concatenate([[True], running[1:] > running[:-1]])


def metadata(index, dag_edges: int, source: dict | None = None) -> dict[str, str]:
    """The index's metadata (``str -> str``, keys without the ``grail_duckdb.`` prefix), but
    the digest; ``source`` (str -> str) is stored under ``source.<key>``."""
    meta = {
        "format": FORMAT_NAME, "version": str(FORMAT_VERSION), "labels": str(index.d),
        "seed": str(index.seed), "fingerprint": index.fingerprint,
        "edge_rows": str(index.edge_rows), "vertices": str(index.n_vertices),
        "components": str(index.n_components), "dag_edges": str(dag_edges),
        "key_type": index.ids.kind, "hub_words": str(index.labels.hub_down.shape[1]),
    }
    meta.update({f"source.{k}": str(v) for k, v in (source or {}).items()})
    return meta


class _Writer:
    """Writes parts at their offsets from a few threads, flushing to disk every
    ``_SYNC_BYTES`` while the rest is still being encoded (so the final flush is short)."""

    def __init__(self, fd: int, sync: bool):
        self.fd, self.sync = fd, sync
        self._lock = threading.Lock()
        self._syncing = threading.Lock()
        self._unsynced = 0

    def write(self, pos: int, data) -> None:
        view = memoryview(data).cast("B")
        size = len(view)
        while len(view):
            done = os.pwrite(self.fd, view, pos)
            view, pos = view[done:], pos + done
        with self._lock:
            self._unsynced += size
            due = self.sync and self._unsynced >= _SYNC_BYTES
            if due:
                self._unsynced = 0
        if due and self._syncing.acquire(blocking=False):
            try:
                os.fdatasync(self.fd)
            finally:
                self._syncing.release()


def _write_parquet(rows: _Rows, meta: dict[str, str], tmp: str, sync: bool = True,
                   timings: dict | None = None) -> None:
    """Encode the parts on every core, write each where it belongs as soon as the parts
    before it are known, then the footer with the digest (see :mod:`.parquet_parts`)."""
    t0 = time.perf_counter()
    names = ["key", "component"] + rows.names + ["dag_children"]
    options = write_options(names, rows.ids.kind)

    def encode(bounds):
        part = parquet_parts.encode_part(rows.part(*bounds), **options)
        return part, leaf_hash(memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end])

    fd = os.open(tmp, os.O_WRONLY)
    try:
        writer = _Writer(fd, sync)
        with ThreadPoolExecutor(threads()) as pool, ThreadPoolExecutor(4) as io_pool:
            writes = [io_pool.submit(writer.write, 0, parquet_parts.MAGIC)]
            parts, leaves, pos = [], [], len(parquet_parts.MAGIC)
            for part, leaf in pool.map(encode, rows.bounds()):
                chunks = memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end]
                writes.append(io_pool.submit(writer.write, pos, chunks))
                writes[-1].add_done_callback(lambda _, p=part: setattr(p, "data", None))
                del chunks  # the part's bytes are freed once written
                pos += part.size
                parts.append(part)
                leaves.append(leaf)
            for w in writes:
                w.result()
        file_meta = parquet_parts.file_meta(parts)
        meta = {**meta, "digest": root_digest(meta, parquet_parts.layout(file_meta), leaves)}
        tail = parquet_parts.footer(parts, {META_PREFIX + k: v for k, v in meta.items()}, meta=file_meta)
        writer.write(pos, tail)
    finally:
        os.close(fd)
    if timings is not None:
        timings["encode and write"] = time.perf_counter() - t0


def save(index, path, *, source: dict | None = None, fsync: bool = True,
         timings: dict | None = None) -> Path:
    """Write ``index`` to ``path`` atomically (:mod:`.atomic_write`: a locked temporary beside
    it, flushed, renamed over the old file; a crash at any point leaves the previous file
    intact). A ``path`` that exists and is not an index of this project is refused with
    :class:`IndexFileError`. ``source`` (str -> str) describes where the edges came from;
    :func:`read_metadata` returns it under ``source.<key>``. ``timings``: a dict that
    receives the seconds of the steps (host copy, encode and write, final flush)."""
    t0 = time.perf_counter()
    rows = _host_rows(index)
    meta = metadata(index, rows.idx.shape[0], source)
    if timings is not None:
        timings["host copy"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    out = replace_atomically(Path(path), FORMAT_NAME,
                             lambda tmp: _write_parquet(rows, meta, tmp, fsync, timings),
                             fsync=fsync)
    if timings is not None:
        timings["checks, final flush, rename"] = (time.perf_counter() - t1
                                             - timings.get("encode and write", 0.0))
    return out


# --- load ---------------------------------------------------------------------------------
def load(path, *, expect_fingerprint: str | None = None, xp=np) -> dict:
    """Read an index written by :func:`save`, with no recomputation: the fields of a
    :class:`~grail_duckdb.engine.index.GrailIndex` but its kernels, as arrays of ``xp``
    (NumPy; CuPy to read straight onto the current GPU).

    Refused with :class:`IndexFileError`: a missing, truncated, corrupt, foreign, older- or
    newer-format file, or one whose content digest does not match. With
    ``expect_fingerprint``, an index built from other edges is refused with
    :class:`StaleIndexError`.
    """
    path = Path(path)
    meta = read_metadata(path)
    if expect_fingerprint is not None and meta.get("fingerprint") != expect_fingerprint:
        raise StaleIndexError(f"the index at {path} was built from different edges than the "
                              "current ones; rebuild it (grail_index(..., rebuild := true) in SQL "
                              "or grail_duckdb.build_index(...).save(path))")
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return IndexReader(path, meta, mapped, xp).read()
    except (StaleIndexError, IndexFileError):
        raise
    except Exception as exc:
        raise IndexFileError(f"{path} is damaged ({exc}); delete it and rebuild the index") from exc


__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "PART_BYTES", "load", "metadata", "read_metadata",
           "save"]
