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
into the final arrays and hashes them as they arrive. The digest is a blake2b over the sha256 digests of every
column of every row group. Files of formats 1 and 2 are refused with a message that
says to rebuild.
"""
from __future__ import annotations

import hashlib
import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import IndexFileError, StaleIndexError
from ..kernels import to_host
from . import parquet_parts
from .atomic_write import replace_atomically
from .csr import CSR
from .ids import VertexIds
from .labels import Labels

FORMAT_NAME = "grail_duckdb-index"
FORMAT_VERSION = 3
_META = "grail_duckdb."
#: raw bytes of index data per part (one row group, encoded by one thread)
PART_BYTES = 64 << 20
#: bytes written between two flushes to disk while a save is under way
_SYNC_BYTES = 256 << 20
_LZ4 = ("level", "inner_", "outer_", "hub_")


def _threads() -> int:
    return max(1, os.cpu_count() or 1)


def _label_names(d: int, hub_words: int) -> list[str]:
    """The per-component columns, in file order."""
    return (["level", "tree_lo", "tree_post"]
            + [f"{side}_{j + 1}" for j in range(d) for side in ("inner", "outer")]
            + [f"hub_{side}_{w + 1}" for w in range(hub_words) for side in ("down", "up")])


def _write_options(names: list[str], key_kind: str) -> dict:
    """pyarrow writer options of the index's columns (see the module: speed first)."""
    compression = {name: "lz4" if name.startswith(_LZ4) else "none" for name in names}
    compression["key"] = "zstd" if key_kind == "str" else "none"
    encoding = {name: "DELTA_BINARY_PACKED" for name in ("component",)
                + (("key",) if key_kind == "int" else ())}
    return dict(compression=compression, column_encoding=encoding, use_dictionary=False,
                write_statistics=False)


# --- the digest: the bytes as written, hashed where they are written and read ------------
def _hash(data) -> bytes:
    """One leaf of the digest: sha256 (SHA-NI: about twice blake2b's speed), 16 bytes."""
    return hashlib.sha256(memoryview(data).cast("B")).digest()[:16]


def _root(meta: dict[str, str], layout: bytes, leaves: list[bytes]) -> str:
    """The file's digest: its metadata (but the digest itself), its layout (the footer but
    the metadata: schema, row groups, offsets, encodings) and the hash of each row group's
    column chunks. Any changed byte a load reads changes it."""
    root = hashlib.blake2b(digest_size=16)
    for name in sorted(meta):
        if name != "digest":
            root.update(f"{name}={meta[name]};".encode())
    root.update(layout)
    for leaf in leaves:
        root.update(leaf)
    return root.hexdigest()


def _blobs(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A BLOB column's values: their byte offsets from 0 (64-bit) and their bytes."""
    wide = pa.types.is_large_binary(arr.type)
    offs = np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)
    offs = offs[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    if not len(arr) or offs[-1] == offs[0]:
        return offs - (offs[0] if len(offs) else 0), np.zeros(0, np.uint8)
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offs[0]:offs[-1]]
    return offs - offs[0], data


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
    with ThreadPoolExecutor(_threads()) as pool:
        host = dict(zip(arrays, pool.map(lambda a: np.ascontiguousarray(to_host(a)),
                                         arrays.values())))
    comp = host["comp"].astype(np.int32, copy=False)
    d, hw = host["inner"].shape[1], host["hub_down"].shape[1]
    names = _label_names(d, hw)
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
    options = _write_options(names, rows.ids.kind)

    def encode(bounds):
        part = parquet_parts.encode_part(rows.part(*bounds), **options)
        return part, _hash(memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end])

    fd = os.open(tmp, os.O_WRONLY)
    try:
        writer = _Writer(fd, sync)
        with ThreadPoolExecutor(_threads()) as pool, ThreadPoolExecutor(4) as io_pool:
            writes = [io_pool.submit(writer.write, 0, parquet_parts.MAGIC)]
            parts, leaves, pos = [], [], len(parquet_parts.MAGIC)
            for part, leaf in pool.map(encode, rows.bounds()):
                chunks = memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end]
                writes.append(io_pool.submit(writer.write, pos, chunks))
                pos += part.size
                parts.append(part)
                leaves.append(leaf)
            for w in writes:
                w.result()
        file_meta = parquet_parts.file_meta(parts)
        meta = {**meta, "digest": _root(meta, parquet_parts.layout(file_meta), leaves)}
        tail = parquet_parts.footer(parts, {_META + k: v for k, v in meta.items()}, meta=file_meta)
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
        timings["final flush and rename"] = (time.perf_counter() - t1
                                             - timings.get("encode and write", 0.0))
    return out


# --- load ---------------------------------------------------------------------------------
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


class _Reader:
    """Reads an index file's row groups on every core into the final arrays, hashing each
    group's bytes as it decodes them."""

    def __init__(self, path: Path, meta: dict[str, str], mapped):
        self.path, self.meta, self.mapped = path, meta, mapped
        self.n, self.c = int(meta["vertices"]), int(meta["components"])
        self.d, self.hw = int(meta["labels"]), int(meta["hub_words"])
        self.names = ["key", "component"] + _label_names(self.d, self.hw) + ["dag_children"]
        self.identity = self.n == self.c
        self._local = threading.local()
        md = pq.ParquetFile(path, memory_map=True).metadata
        if md.num_rows != self.n:
            raise ValueError(f"{md.num_rows} rows, metadata says {self.n}")
        if md.schema.to_arrow_schema().names != self.names:
            raise ValueError("the columns are not those of this format")
        footer, end = parquet_parts.read_footer(mapped)
        self.layout = parquet_parts.layout(footer)
        self.spans = parquet_parts.group_spans(footer, end)
        if len(self.spans) != md.num_row_groups:
            raise ValueError("the footer's row groups differ from pyarrow's")
        starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        self.groups = [(g, int(starts[g]), int(starts[g + 1])) for g in range(md.num_row_groups)]
        c, d, hw = self.c, self.d, self.hw
        self.comp = np.empty(self.n, np.int32)
        self.int_keys = np.empty(self.n, np.int64) if meta["key_type"] == "int" else None
        self.flat = {"level": np.empty(c, np.int32), "tree_lo": np.empty(c, np.int32),
                     "tree_post": np.empty(c, np.int32)}
        self.wide = {"inner": np.empty((c, d), np.int32), "outer": np.empty((c, d), np.int32),
                     "hub_down": np.empty((c, hw), np.uint64), "hub_up": np.empty((c, hw), np.uint64)}
        self.degree = np.zeros(c, np.int64)

    def _file(self) -> pq.ParquetFile:
        pf = getattr(self._local, "pf", None)
        if pf is None:
            pf = self._local.pf = pq.ParquetFile(self.path, memory_map=True)
        return pf

    def group(self, g: int, lo: int, hi: int):
        """Hash row group ``g``'s bytes, decode it (rows ``[lo, hi)``) and place its values;
        returns ``(leaf, str keys or None, representative rows, their component span,
        children bytes)``."""
        start, stop = self.spans[g]
        leaf = _hash(memoryview(self.mapped)[start:stop])
        table = self._file().read_row_group(g, use_threads=False)
        if table.num_rows != hi - lo:
            raise ValueError(f"row group {g} holds {table.num_rows} rows, not {hi - lo}")
        comp = table.column("component").combine_chunks().to_numpy()
        self.comp[lo:hi] = comp
        keys = table.column("key").combine_chunks()
        if self.int_keys is not None:
            self.int_keys[lo:hi] = keys.to_numpy()
            keys = None
        children = table.column("dag_children").combine_chunks()
        if self.identity:  # row i is component i
            if children.null_count:
                raise ValueError("representative rows do not match the component count")
            take, put, span = slice(None), slice(lo, hi), (lo, hi)
            rows = np.arange(lo, hi)
        else:
            take = np.flatnonzero(children.is_valid().to_numpy(zero_copy_only=False))
            rows, put = take + lo, comp[take]
            if put.shape[0] and (put.min() < 0 or put.max() >= self.c):
                raise ValueError("component ids out of range")
            span = (int(put[0]), int(put[-1]) + 1) if put.shape[0] else (0, 0)
        for name in self.names[2:-1]:
            values = table.column(name).combine_chunks().to_numpy()[take]
            if name in self.flat:
                self.flat[name][put] = values
            else:
                base, _, j = name.rpartition("_")
                self.wide[base][put, int(j) - 1] = values
        offsets, blob = _blobs(children)
        lengths = np.diff(offsets)[take]
        if (lengths % 4).any():
            raise ValueError("a children BLOB is not a whole number of int32")
        self.degree[put] = lengths // 4
        return leaf, keys, rows, span, blob

    def read(self) -> dict:
        """Every row group in parallel, then the DAG's rows and the checks."""
        with ThreadPoolExecutor(_threads()) as pool:
            got = list(pool.map(lambda g: self.group(*g), self.groups))
            reps = np.concatenate([r for _, _, r, _, _ in got]) if got else np.zeros(0, np.int64)
            if reps.shape[0] != self.c:
                raise ValueError("representative rows do not match the component count")
            if self.c and not np.array_equal(self.comp[reps], np.arange(self.c, dtype=np.int32)):
                raise ValueError("component numbering does not follow the rows")
            ptr = np.zeros(self.c + 1, np.int64)
            np.cumsum(self.degree, out=ptr[1:])
            if ptr[-1] != int(self.meta["dag_edges"]):
                raise ValueError("the DAG's edge count differs from the metadata")
            idx = np.empty(int(ptr[-1]), np.int32)

            def place(item):
                _, _, _, (c0, c1), data = item
                lo, hi = ptr[c0], ptr[c1]
                if data.shape[0] != 4 * (hi - lo):
                    return False
                part = data.view(np.int32)
                idx[lo:hi] = part
                return not part.shape[0] or bool(part.min() >= 0 and part.max() < self.c)

            if not all(pool.map(place, got)):
                raise ValueError("DAG edges out of range")
            if self.n and (self.comp.min() < 0 or self.comp.max() >= self.c):
                raise ValueError("component ids out of range")
        digest = _root(self.meta, self.layout, [leaf for leaf, *_ in got])
        if digest != self.meta.get("digest"):
            raise ValueError("content digest mismatch")
        if self.int_keys is not None:
            ids = VertexIds.from_sorted_keys(pa.array(self.int_keys))
        else:
            strs = [k for _, k, *_ in got]
            ids = VertexIds.from_sorted_keys(pa.concat_arrays(strs) if strs else pa.array([], pa.string()))
        lab = Labels(level=self.flat["level"], inner=self.wide["inner"], outer=self.wide["outer"],
                     tree_post=self.flat["tree_post"], tree_lo=self.flat["tree_lo"],
                     hub_down=self.wide["hub_down"], hub_up=self.wide["hub_up"])
        return dict(ids=ids, comp=self.comp, n_components=self.c, dag=CSR(ptr, idx), labels=lab,
                    seed=int(self.meta["seed"]), edge_rows=int(self.meta["edge_rows"]),
                    fingerprint=self.meta["fingerprint"])


def load(path, *, expect_fingerprint: str | None = None) -> dict:
    """Read an index written by :func:`save`, with no recomputation: the fields of a
    :class:`~grail_duckdb.engine.index.GrailIndex` but its kernels, as host arrays
    (:func:`grail_duckdb.engine.index.load_index` moves them to a backend).

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
            return _Reader(path, meta, mapped).read()
    except (StaleIndexError, IndexFileError):
        raise
    except Exception as exc:
        raise IndexFileError(f"{path} is damaged ({exc}); delete it and rebuild the index") from exc
