"""The index as one Parquet file, written atomically, refused when corrupt, foreign or stale.

Layout: one row per vertex, in id order (the sorted keys), readable by DuckDB itself
(``SELECT * FROM 'cites.grail.parquet'``). The key and the component are the vertex's, the
children its component's (on the component's first row); the label columns (``level`` to
``win_up_w``) are indexed by component instead: row r holds component r's labels, and the
rows after the last component hold zeros (a vertex's labels are those of the row whose
number is its ``component``):

============== ==================================================================
column         meaning
============== ==================================================================
key            the vertex key (BIGINT or VARCHAR, as in the edge table)
component      id of the vertex's strongly connected component
level          topological level of component r in the condensed DAG
tree_size      size of the component's subtree in the tree of parents (its first post rank
               is ``tree_post - tree_size + 1``)
tree_post      post rank of the component in the tree of parents
rtree_size     the same two for the tree of chosen children (:mod:`.labels`)
rtree_post
inner_j        lower end of the component's j-th GRAIL interval (j = 1..d)
outer_j        upper end of the component's j-th GRAIL interval
hub_down_w     bits of the hubs the component reaches (UBIGINT, w = 1..hub words)
hub_up_w       bits of the hubs that reach the component
win_down_w     bits of the window hubs the component reaches (its own window: :mod:`.labels`)
win_up_w       bits of the window hubs that reach it
dag_children   the component's children in the condensed DAG as a BLOB of little-endian
               int32 component ids, on the component's first vertex (its representative)
               and NULL on every other row
============== ==================================================================

Components are numbered by their first vertex, so the representatives' rows, in file order,
are components 0, 1, 2, ...: loading needs no recomputation but one subtraction per component.
Labels by component (format 9) store each component's labels once: the rows of a large
component's other vertices held copies in format 8 (a third of rmat:23:12's rows), which the
save gathered, encoded and wrote and the load decoded and dropped.

Schema metadata holds the format name and version, d, the seed, the fingerprint of the
source edges, counts (``group_edges``: the DAG edges of each row group, so that a load
places every group's children at once), what the caller says about the source (``source.*``:
the SQL plugin records the table, its columns and a cheap check of its content), and a digest
of all of it and of the content, checked on load.

Speed (formats 3 and 4, issue 12): the rows are cut into parts of about ``PART_BYTES``; every
core takes a part's rows on the index's backend (the device for a GPU index: no whole-index
host copy), brings them over through small reused pinned buffers, encodes them with pyarrow's
writer into memory (one row group each, into buffers reused from part to part:
:class:`.parquet_parts.Buffers`) and hashes them, and
:mod:`.parquet_parts` lays them into one file behind a footer of its own (pyarrow writes on
one thread, DuckDB's parallel writer reached 0.28 GB/s); the children's BLOBs are written by
:mod:`.parquet_parts` itself, one plain page per part (pyarrow's value-by-value path was a
quarter of the encoding). Columns are encoded for the disk's sake where it costs the load
little time (:mod:`.index_format` says how, with the measurements): the labels, post ranks,
tree sizes and levels byte-stream-split and LZ4, hub bits as dictionaries and LZ4 (plain and
LZ4 where the device encodes the labels: :mod:`.label_pages`), sorted keys and component ids
delta-encoded, the children plain; the spanning-tree interval is
stored as its size (small numbers) rather than its first rank, and every column but the
children is NOT NULL (no definition levels). Format 3 stored the
first rank plain, the labels, levels and hub bits LZ4. The children are one BLOB
per component rather than a list: a list column costs a repetition level per child, ten times
the time of the BLOB both ways (measured). Loading reads the row groups on every core straight
into the final arrays (on the device, for a GPU index, which decodes the label pages there:
:mod:`.page_plan`) and hashes them as they arrive (:mod:`.index_reader`). The digest is a
blake2b over the footer's bytes (its own
digits read as zeros: the metadata, schema, offsets and encodings, hashed without decoding
them) and a 128-bit hash of every row group's bytes (:mod:`grail_duckdb.kernels.cpu.digest`:
it detects damage at memory speed; format 3's sha256 ran 2 GB/s per core). Format 5 adds the
interval of the tree of chosen children (``rtree_size``, ``rtree_post``, encoded as their
counterparts). Format 6 adds the window hubs' bits (``win_*``, LZ4) and their table of levels
(metadata ``win_first``). Format 7 moves the children's chunks (one BLOB page per row group,
42% of the file at 2.5B edges) into a region at the front of the file, before every group's
other chunks (Parquet finds each chunk by its offset: pyarrow and DuckDB read it as any
file): that region is known once the condensation is done, so a build that saves
(``build_index(..., save_to=...)``, the command line's ``build``) writes it on every core
while the GPU computes the labels, and only the label columns are left to write after them
(:class:`IndexWriter`; 2.5B edges on an H200: the save after the labels 13.1 s against a
14.9-s build, README, Scale, stop 29). Format 8 adds a second region after it: every
group's columns known once the GRAIL intervals are (key, component, level, trees,
intervals: :data:`~.index_format.EARLY_FIELDS`, 85% of a citation index's label bytes),
encoded as a part of their own and written while the build computes the hub bits; each
group's footer entry joins its two parts (:func:`.parquet_parts.joined`), so a reader sees
one row group as before. A row group's digest leaf hashes its three spans (its page in the
first region, its chunks in the second, its own bytes). Format 9 indexes the label
columns by component (above). Files of formats 1 to 8 are refused with a message that says to
rebuild.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import mmap
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import IndexFileError, StaleIndexError
from ..kernels import (Landing, is_device_array, kernels_for, mark_ready, on_own_stream,
                       to_host, to_host_all, to_host_columns)
from . import label_pages, parquet_parts
from .atomic_write import Replacement
from .ids import VertexIds
from .index_format import (DIGEST_KEY, DIGEST_PLACEHOLDER, EARLY_FIELDS, FORMAT_NAME,
                           FORMAT_VERSION, META_PREFIX, TREE_FILE_COLUMNS, digest_site,
                           first_text, group_leaf, leaf_hash, read_metadata, root_digest,
                           tree_size, write_options)
from .index_reader import IndexReader
from .ingest import workers

#: raw bytes of index data per part (one row group, encoded by one thread), at least, where
#: that makes ``MIN_PARTS`` parts or more. Each part costs a fixed share of work, much of it
#: under the interpreter's lock (its writer's footer decoded and moved, its pages, its
#: copies): at 438M edges, parts of 128 MB saved in 4.39-5.28 s and loaded in 2.30-2.44 s,
#: parts of 64 MB in 5.13-6.75 s and 2.64-3.50 s (whole saves to /dev/shm and loads,
#: alternated in one process, NVIDIA H200 host; README, Scale, stop 31)
PART_BYTES = 128 << 20
#: parts of a large index, at most: at 2.5B edges (656 parts of 64 MB) the label columns were
#: encoded and written in 9.9-10.8 s against 8.4-8.9 s in parts of 160 MB (the same kind of
#: A/B; README, Scale, stop 30)
MAX_PARTS = 256
#: parts of a small index, at least (where it has 1,024 rows per part): one per core of the
#: device hosts, so that every core encodes and loads. Each part costs a fixed share of work
#: (its Thrift footer decoded and moved in Python, its copies): rmat:23:12 (8.4M rows) saved
#: in 0.48 s and loaded in 0.24 s in 16 parts, in 0.51 and 0.26 s in 32, 0.57 and 0.29 s in
#: 12 (medians of four, alternated in one process, NVIDIA H200 host with 16 cores; the 1M-
#: vertex random graph: 0.13 and 0.10 s in 16, 0.20 and 0.12 s in 32; README, Scale, stop 33)
MIN_PARTS = 16
#: bytes written between two flushes to disk while a save is under way, where the kernel
#: cannot be asked to write a range back as soon as it is written (no ``sync_file_range``)
_SYNC_BYTES = 256 << 20
#: threads that write the encoded parts (each part's write-back starts as it is written)
_WRITERS = 8
#: the size columns of the tree intervals -> the ``tree`` matrix's (lo, post) columns
_SIZES = {size: (lo_j, post_j) for size, _, lo_j, post_j in TREE_FILE_COLUMNS}


# --- save ---------------------------------------------------------------------------------
@dataclass
class _Graph:
    """What the children's region needs, known once the condensation is done (before the
    labels): the components, the DAG's rows, and how to cut the file's rows into parts. The
    children stay on the index's backend: each part brings its own to the host, with its
    row pointers. Where every row is its own component (a DAG's condensation) nothing is
    copied before the first page (at 438M edges the whole pointers and components took 0.8 s
    to come over, while the disk waited: README, Scale, stop 32)."""

    ids: VertexIds
    comp: object  # int32 on the backend (None: every row its own component, comp[i] == i)
    c: int  # components: rows [0, c) hold their labels
    ptr: object  # the DAG's row pointers, on the backend
    idx: object  # the DAG's children, on the backend
    rep: np.ndarray | None  # host bool: representative rows (None: every row is one)
    bounds: list[tuple[int, int]]  # the parts' rows
    spans: list[tuple[int, int]]  # the components whose representatives each part holds
    ptr_at: list[int]  # the row pointer at each span's start, and at the last one's end
    ready: object = None  # the DAG is made (:func:`~grail_duckdb.kernels.mark_ready`)

    def blobs(self, k: int, landing: Landing | None = None) -> parquet_parts.Blobs:
        """The children of part ``k``'s rows (landed in ``landing``), copied on this thread's
        stream."""
        (lo, hi), (c0, c1) = self.bounds[k], self.spans[k]
        kids = self.idx[self.ptr_at[k]:self.ptr_at[k + 1]]
        with on_own_stream(self.ready):
            ptr, kids = to_host_all([self.ptr[c0:c1 + 1], kids], landing, ready=True)
        return parquet_parts.Blobs("dag_children", ptr, kids, self.valid(k))

    def valid(self, k: int) -> np.ndarray | None:
        """Which of part ``k``'s rows hold their component's children (None: all)."""
        lo, hi = self.bounds[k]
        return None if self.rep is None else self.rep[lo:hi]

    def page_size(self, k: int) -> int:
        """Bytes of part ``k``'s page of children (0: a part of no rows has none)."""
        (lo, hi), (c0, c1) = self.bounds[k], self.spans[k]
        if hi == lo:
            return 0
        return parquet_parts.blob_page_bytes("dag_children", hi - lo, self.valid(k), c1 - c0,
                                             self.edges(k))

    def components(self, lo: int, hi: int) -> np.ndarray:
        """The components of rows ``[lo, hi)``, on the host (call it on a stream of the
        thread's own, :func:`on_own_stream`: a small copy waits for the current stream)."""
        if self.comp is None:
            return np.arange(lo, hi, dtype=np.int32)
        return np.ascontiguousarray(to_host(self.comp[lo:hi], ready=True))

    def edges(self, k: int) -> int:
        """The DAG edges (children) that part ``k`` holds: the file's ``group_edges``, so
        that a reader places each row group's children without waiting for the groups
        before."""
        return self.ptr_at[k + 1] - self.ptr_at[k]


#: a label row's host work when the backend encodes and decodes the label pages (a GPU
#: index's save, a GPU load), as a share of its host work when pyarrow does (the host only
#: copies and hashes their compressed bytes): none, so that parts hold as many rows.
#: rmat:23:12's ETL save / load took 0.242 / 0.143 s cut with pyarrow's weights (1.0),
#: 0.238 / 0.137 with 0.25, 0.219 / 0.135 with 0.1 and 0.219 / 0.129 with none (medians of
#: eight, alternated in one process, H100 host; README, Scale, stop 37)
DEVICE_LABEL_SHARE = 0.0


def _bounds(n: int, c: int, d: int, dag_edges: int,
            labels_share: float = 1.0) -> list[tuple[int, int]]:
    """The parts' rows: parts of about ``PART_BYTES`` of raw data, or larger ones where that
    makes more than ``MAX_PARTS``, smaller ones where it makes fewer than ``MIN_PARTS`` (of
    1,024 rows at least, but for the last), counted with two words of hub bits per side (the
    labels' own widths are not known yet). Only the first ``c`` rows (one per component)
    hold labels (the rows after them hold zeros, encoded about eight times as fast), so the
    parts are cut by their host work, not their rows: rmat:23:12's 8.4M rows hold 5.3M
    components, and parts of equal rows left a third of the threads next to nothing to do
    when pyarrow encoded the labels. ``labels_share``: a label row's host work as a share of
    that (:data:`DEVICE_LABEL_SHARE`); the number of parts still comes from the bytes.

    >>> _bounds(4096, 4096, 1, 0)
    [(0, 1024), (1024, 2048), (2048, 3072), (3072, 4096)]
    >>> cut = _bounds(100_000, 10_000, 1, 0)  # 10% of the rows hold labels
    >>> len(cut), sum(hi <= 10_000 for _, hi in cut), _bounds(0, 0, 1, 0)
    (16, 4, [(0, 0)])
    >>> len(_bounds(40_000_000, 40_000_000, 9, 175_000_000, 0.0))  # 6.1 GB: parts of 128 MB
    46
    >>> [f(hi - lo for lo, hi in _bounds(100_000, 10_000, 1, 0, share))
    ...  for share in (1.0, 0.0) for f in (min, max)]  # by work, then by rows (~6,250 each)
    [2048, 8192, 5792, 7168]
    """
    base = 8 + 4 + 4 * dag_edges / max(n, 1)  # the key, the component, the children
    labels = 4 * (2 * d + 5) + 32
    raw = c * (base + labels) + (n - c) * (base + labels / 8)
    parts = min(MAX_PARTS, max(MIN_PARTS, -(-int(raw) // PART_BYTES)))
    full, empty = base + labels * labels_share, base + labels * labels_share / 8
    total = c * full + (n - c) * empty
    cuts = [0]
    for k in range(1, parts):
        at = k * total / parts
        row = at / full if at <= c * full else c + (at - c * full) / empty
        row = min(n, -(-int(row) // 1024) * 1024)
        if row > cuts[-1]:
            cuts.append(row)
    if cuts[-1] < n or n == 0:
        cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def _graph(ids: VertexIds, comp, n_components: int, dag, bounds: list, ptr_at: list | None,
           ready) -> _Graph:
    """The :class:`_Graph` of a condensation cut at ``bounds`` (:func:`_bounds`). Where every
    row is its own component, ``ptr_at`` holds the row pointers at the bounds and nothing
    else is copied; else the representatives, the spans and their row pointers are found on
    the backend, beside the build's label passes (on a stream of this thread's own, after
    ``ready``: the DAG is made, :func:`~grail_duckdb.kernels.mark_ready`), and only they
    come over: bringing the components and the row pointers over and finding them on the
    host took 116 ms of rmat:23:12's save, all of it before the first page was written
    (H100 host; README, Scale, stop 37)."""
    n = int(comp.shape[0])
    if n_components == n:  # components are numbered by their first rows: comp[i] == i
        return _Graph(ids, None, n, dag.indptr, dag.indices, None, bounds, bounds, ptr_at,
                      ready)
    kernels = kernels_for("gpu" if is_device_array(comp) else "cpu")
    xp = kernels.xp
    with on_own_stream(ready):
        rep = kernels.representatives(comp)
        # components are numbered by their representatives' rows: those before a row count them
        before = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(rep, dtype=xp.int64)])
        at = before[xp.asarray([lo for lo, _ in bounds] + [n])]
        at, ptr, rep = to_host_all([at, dag.indptr[at], rep])
    spans = list(zip(at[:-1].tolist(), at[1:].tolist()))
    return _Graph(ids, comp, n_components, dag.indptr, dag.indices, rep, bounds, spans,
                  ptr.tolist(), ready)


@dataclass
class _Rows:
    """Label arrays, and how they make each part's table: the early ones (:data:`EARLY_FIELDS`,
    after the key and the component) or the hub bits (before the children's placeholder).
    They stay on the index's backend: each part brings its run of components to the host
    (:func:`~grail_duckdb.kernels.to_host_columns`: a slice, no gather), so the copy is
    spread over the encoding threads instead of preceding them. Each thread does so on a
    stream of its own, after ``ready``: the early columns are written while the build's hub
    passes run on the default stream."""

    graph: _Graph
    fields: dict[str, object]  # label array name -> backend array (1-D, or 2-D: one column per j)
    cols: dict[str, tuple[str, int | None]]  # file column -> (label array, its column j)
    early: bool  # the key and the component first; else the children's placeholder last
    ready: object = None  # the fields are made (:func:`~grail_duckdb.kernels.mark_ready`)

    @property
    def names(self) -> list[str]:
        """The table's columns, in file order."""
        return ((["key", "component"] if self.early else []) + list(self.cols)
                + ([] if self.early else ["dag_children"]))

    @functools.cached_property
    def _options(self) -> dict[tuple[bool, bool], dict]:
        """pyarrow's writer options of a part, by whether it is empty and whether it holds
        the label columns (made once)."""
        out = {}
        for empty in (False, True):
            for labels in (False, True):
                names = self.names if labels else [n for n in self.names if n not in self.cols]
                out[empty, labels] = write_options(names, self.graph.ids.kind, 0 if empty else 1)
        return out

    def options(self, rows: int, labels: bool = True) -> dict:
        """pyarrow's writer options of a part of ``rows`` rows (:func:`write_options`), with
        the label columns or without them."""
        return self._options[rows == 0, labels]

    @property
    def ready_array(self):
        """One of the label arrays (where they live: host or device)."""
        return next(iter(self.fields.values()))

    @functools.cached_property
    def kernels(self):
        """The kernels of the backend the label arrays live on."""
        return kernels_for("gpu" if is_device_array(self.ready_array) else "cpu")

    def _column(self, name: str, column):
        """File column ``name``'s values from the label arrays (``column(field, j)``: column
        ``j`` of a matrix, or the array itself where ``j`` is None): the tree intervals'
        sizes made from their two ranks."""
        if name in _SIZES:  # the interval [lo, post] stored as its size
            lo_j, post_j = _SIZES[name]
            return tree_size(column("tree", post_j), column("tree", lo_j))
        return column(*self.cols[name])

    def label_values(self, lo: int, hi: int):
        """The label columns of rows ``[lo, hi)`` as one ``(columns, rows)`` array on the
        arrays' backend, in file order: components ``[lo, hi)``'s labels, zeros past the
        last component (the early columns all int32, the hub bits all uint64)."""
        g = self.graph
        rows = slice(min(lo, g.c), min(hi, g.c))
        xp = self.kernels.xp
        out = xp.zeros((len(self.cols), hi - lo), self.ready_array.dtype)
        for i, name in enumerate(self.cols):
            out[i, :rows.stop - rows.start] = self._column(
                name, lambda f, j: self.fields[f][rows] if j is None else self.fields[f][rows, j])
        return out

    def part(self, lo: int, hi: int, landing: Landing | None = None, labels: bool = True
             ) -> pa.Table:
        """Rows ``[lo, hi)`` as an Arrow table: the label columns those of components ``[lo,
        hi)``, zeros past the last one; for the hub bits, the children's column all NULL, a
        placeholder for their page in the region (:func:`.parquet_parts.external_chunk`).
        Device rows land in ``landing`` (:class:`~grail_duckdb.kernels.Landing`: the table
        is valid until its next use)."""
        g = self.graph
        rows = slice(min(lo, g.c), min(hi, g.c))
        names = list(self.fields) if labels else []
        with on_own_stream(self.ready):
            host = to_host_columns([self.fields[f][rows] for f in names], landing)
            comp = g.components(lo, hi) if self.early else None
        by_field = dict(zip(names, host))
        arrays = {}
        if self.early:
            rng = g.ids.key_range()
            if rng is not None:
                arrays["key"] = pa.array(np.arange(rng[0] + lo, rng[0] + hi, dtype=np.int64))
            else:
                arrays["key"] = g.ids.keys.slice(lo, hi - lo)
            arrays["component"] = pa.array(comp)
        for name in (self.cols if labels else ()):
            values = self._column(name, lambda f, j: by_field[f] if j is None else by_field[f][j])
            arrays[name] = pa.array(_padded(values, hi - lo))
        if not self.early:
            arrays["dag_children"] = pa.nulls(hi - lo, pa.binary())
        # every column but the children is declared NOT NULL: no definition levels to decode
        return pa.Table.from_arrays(list(arrays.values()), schema=pa.schema(
            [pa.field(k, v.type, nullable=k == "dag_children") for k, v in arrays.items()]))


def _padded(values: np.ndarray, rows: int) -> np.ndarray:
    """``values`` followed by zeros up to ``rows`` values (the label columns' rows past the
    last component).

    >>> _padded(np.array([7, 8], np.int32), 4).tolist()
    [7, 8, 0, 0]
    """
    if values.shape[0] == rows:
        return values
    out = np.zeros(rows, values.dtype)
    out[:values.shape[0]] = values
    return out


#: where a save encodes the early label columns itself (:mod:`.label_pages`) rather than
#: through pyarrow: "device" for an index on a GPU, "always" (the tests: the CPU twin of the
#: encoder), "never"
OWN_PAGES = "device"


#: raw bytes of label columns that one launch of the page encoder takes at most (the backend
#: holds about four times as much meanwhile)
ENCODE_BATCH = 1 << 30


def _encodes_labels(array) -> bool:
    """Whether a save encodes the label columns of an index whose arrays live where
    ``array`` does itself (:data:`OWN_PAGES`)."""
    return OWN_PAGES == "always" or (OWN_PAGES == "device" and is_device_array(array))


def _own_pages(rows: _Rows, bounds: list) -> _OwnPages | None:
    """The label columns of ``rows`` encoded on the backend (:class:`_OwnPages`), or None
    where pyarrow encodes them."""
    return _OwnPages(rows, bounds) if rows.cols and _encodes_labels(rows.ready_array) else None


class _OwnPages:
    """A save's label columns (the early ones, or the hub bits) encoded on the index's
    backend (:func:`.label_pages.encode_parts`), a batch of consecutive parts at a time (at
    most :data:`ENCODE_BATCH` raw bytes), the batches in file order on a thread of their own
    from the moment the rows are known (the encoders' threads only wait for their part's
    batch, rather than the first of them encoding it while the others wait). Each part's
    bytes go once taken (:meth:`take`)."""

    def __init__(self, rows: _Rows, bounds: list):
        self._rows, self._bounds = rows, bounds
        row_bytes = rows.ready_array.dtype.itemsize * len(rows.cols)
        batches, self._of, size = [], {}, ENCODE_BATCH
        for k, (lo, hi) in enumerate(bounds):
            if hi == lo:
                continue
            if size + (hi - lo) * row_bytes > ENCODE_BATCH:
                batches.append([])
                size = 0
            batches[-1].append(k)
            self._of[k] = len(batches) - 1
            size += (hi - lo) * row_bytes
        self._done: dict[int, tuple[object, object]] = {}
        self._lock = threading.Lock()
        device = ThreadPoolExecutor(1)
        self._batches = [device.submit(self._batch, ks) for ks in batches]
        device.shutdown(wait=False)  # the thread ends with the last batch

    def _batch(self, ks: list[int]) -> None:
        """Encode the parts ``ks`` (on this thread's stream, after the rows are made)."""
        with on_own_stream(self._rows.ready):
            values = [self._rows.label_values(*self._bounds[j]) for j in ks]
            # the levels, trees and intervals byte-stream split, the hub bits plain
            encoded = label_pages.encode_parts(self._rows.kernels, values,
                                               split=self._rows.early)
            ready = mark_ready(encoded[0].data)
        with self._lock:
            self._done.update((k, (e, ready)) for k, e in zip(ks, encoded))

    def take(self, k: int):
        """Part ``k``'s :class:`.label_pages.Encoded` and what its bytes wait for
        (:func:`mark_ready`), once its batch is encoded."""
        self._batches[self._of[k]].result()
        with self._lock:
            return self._done.pop(k)


def _rows(fields: dict, graph: _Graph, early: bool, ready) -> _Rows:
    """The rows of the early label arrays (``fields``: :data:`EARLY_FIELDS`) or of the hub
    bits (``hub_down``, ``hub_up`` and the window hubs' where there are), left where they
    are; ``ready``: when they are made (:func:`~grail_duckdb.kernels.mark_ready`)."""
    cols: dict = {}
    if early:
        d = fields["inner"].shape[1]
        cols["level"] = ("level", None)
        for size, post, lo_j, post_j in TREE_FILE_COLUMNS:
            cols[size] = ("tree", lo_j)
            cols[post] = ("tree", post_j)
        for j in range(d):
            cols[f"inner_{j + 1}"] = ("inner", j)
            cols[f"outer_{j + 1}"] = ("outer", j)
    else:
        for base in ("hub", "win"):
            for w in range(fields[f"{base}_down"].shape[1] if f"{base}_down" in fields else 0):
                cols[f"{base}_down_{w + 1}"] = (f"{base}_down", w)
                cols[f"{base}_up_{w + 1}"] = (f"{base}_up", w)
    return _Rows(graph, fields, cols, early, ready)


def _split(lab) -> tuple[dict, dict]:
    """A :class:`~.labels.Labels`' arrays: the early ones, the hub bits."""
    arrays = {name: a for name, a in lab.arrays().items() if name != "win_first"}
    return ({f: arrays[f] for f in EARLY_FIELDS},
            {f: a for f, a in arrays.items() if f not in EARLY_FIELDS})


def win_words(lab) -> int:
    """Words per side of the labels' window hubs (0: none)."""
    return 0 if lab.win_down is None else int(lab.win_down.shape[1])


def metadata(index, dag_edges: int, source: dict | None = None) -> dict[str, str]:
    """The index's metadata (``str -> str``, keys without the ``grail_duckdb.`` prefix), but
    the digest; ``source`` (str -> str) is stored under ``source.<key>``."""
    meta = {
        "format": FORMAT_NAME, "version": str(FORMAT_VERSION), "labels": str(index.d),
        "seed": str(index.seed), "fingerprint": index.fingerprint,
        "edge_rows": str(index.edge_rows), "vertices": str(index.n_vertices),
        "components": str(index.n_components), "dag_edges": str(dag_edges),
        "key_type": index.ids.kind, "hub_words": str(index.labels.hub_down.shape[1]),
        "win_words": str(win_words(index.labels)),
    }
    if index.labels.win_first is not None:
        meta["win_first"] = first_text(to_host(index.labels.win_first))
    meta.update({f"source.{k}": str(v) for k, v in (source or {}).items()})
    return meta


class _Writer:
    """Writes parts at their offsets from a few threads and has the disk take each one while
    the rest is still being encoded, so that the final flush is short: on Linux each write's
    range is handed to the kernel's write-back at once (``sync_file_range``, asynchronous:
    the pages stay cached for a load that follows), elsewhere the file is flushed every
    ``_SYNC_BYTES``. (Device host, 16 GB in 64 MB writes from 8 threads: 2.37 GB/s durable
    with each range's write-back started as it is written, 1.24 GB/s with one flush at the
    end, 2.15 GB/s through ``O_DIRECT``, which leaves the load to read the disk: README,
    Scale, stop 27.)"""

    def __init__(self, fd: int, sync: bool):
        self.fd, self.sync = fd, sync
        self._lock = threading.Lock()
        self._syncing = threading.Lock()
        self._unsynced = 0

    def write(self, pos: int, data) -> None:
        view = memoryview(data).cast("B")
        size, start = len(view), pos
        while len(view):
            done = os.pwrite(self.fd, view, pos)
            view, pos = view[done:], pos + done
        if not self.sync or write_back(self.fd, start, size):
            return
        with self._lock:
            self._unsynced += size
            due = self._unsynced >= _SYNC_BYTES
            if due:
                self._unsynced = 0
        if due and self._syncing.acquire(blocking=False):
            try:
                os.fdatasync(self.fd)
            finally:
                self._syncing.release()


def _sync_file_range():
    """libc's ``sync_file_range`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()
#: sync_file_range's flag: start the write-back of the range's dirty pages, do not wait
_SYNC_FILE_RANGE_WRITE = 2
#: the span whose write-back is started is cut to whole pages of this many bytes
_PAGE = mmap.PAGESIZE


def write_back(fd: int, pos: int, size: int) -> bool:
    """Start writing ``size`` bytes of ``fd`` at ``pos`` back to disk without waiting for them
    (the final flush waits for what is left); False where the system cannot be asked to.
    Only the whole pages of the span: a page that it shares with the next part would be
    under write-back when that part is written into it, and such a write waits for the disk
    (stable pages); the final flush takes the shared pages."""
    if _SYNC_FILE_RANGE is None:
        return False
    lo, hi = -(-pos // _PAGE) * _PAGE, (pos + size) // _PAGE * _PAGE
    return hi <= lo or _SYNC_FILE_RANGE(fd, lo, hi - lo, _SYNC_FILE_RANGE_WRITE) == 0


def _written(part: parquet_parts.Part, buffers: parquet_parts.Buffers) -> None:
    """A part is on its way to disk: its bytes go, its buffer back to the pool."""
    part.data = None
    if part.buffer is not None:
        buffers.give(part.buffer)
        part.buffer = None


class _Timed:
    """When a region's writes ended (``start``, ``ends``: perf_counter at its start and as
    each write ended)."""

    start: float
    ends: list[float]

    @property
    def seconds(self) -> float:
        """From the region's start to its last write (once they are over)."""
        return max(self.ends, default=self.start) - self.start

    def past(self, t0: float) -> float:
        """How long its writes ran past ``t0`` (the end of the labels)."""
        return max(0.0, max(self.ends, default=0.0) - t0)


@dataclass
class _Region(_Timed):
    """The children's pages at the front of the file, one per part (empty parts have none):
    where each lies (known as soon as the condensation is), and each page's writing, whose
    result is the page's hash (the first half of its row group's leaf) and which records
    when it ended."""

    at: list[int]
    sizes: list[int]
    pages: list  # Future per page: its hash, once written
    start: float  # perf_counter at the region's start
    ends: list[float] = field(default_factory=list)  # perf_counter as each page was written

    @property
    def end(self) -> int:
        return self.at[-1] + self.sizes[-1] if self.at else len(parquet_parts.MAGIC)

    def hashes(self) -> list[bytes]:
        """Every page's hash, once every page is written (a failed write raises here)."""
        return [page.result() for page in self.pages]


@dataclass
class _Early(_Timed):
    """The early label columns' chunks (:data:`EARLY_FIELDS`, with the key and the
    component), one part per row group, laid one after the other in the region that follows
    the children's: each part (its footer; its bytes until written), where it lies, the hash
    of its bytes, and the writes under way."""

    start: float  # perf_counter at the region's start
    at: list[int] = field(default_factory=list)
    parts: list = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)
    raw: list = field(default_factory=list)  # an empty part's bytes (its leaf spans the file)
    writes: list = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # perf_counter as each part was written
    end: int = 0  # where the region ends: the groups' own bytes start there

    def wait(self) -> None:
        """Every part written (a failed write raises here)."""
        for w in self.writes:
            w.result()


class IndexWriter:
    """An index file under way (one :func:`save`; or a build's, started as soon as the
    condensation is done: :func:`~grail_duckdb.engine.index.build_index` with ``save_to``).

    The file is the index's row groups behind two regions: one that holds every group's
    children (their BLOBs' chunk, 42% of the file at 2.5B edges), known from the
    condensation, and one that holds every group's early label columns (levels, trees,
    intervals: 85% of the label bytes of a citation index), known once the intervals are.
    :meth:`write_children` writes the first in the background, on every core, so a build
    writes it while it computes the labels; :meth:`write_intervals` encodes and writes the
    second while the build computes the hub bits; :meth:`finish` then encodes the groups' hub
    bits on every core (queued behind the early parts at once, so that no thread waits for
    the last of those) and writes them after both, then the footer and the digest, and
    renames the file over ``path`` (:class:`.atomic_write.Replacement`: checks first, a
    locked temporary, a flush, the rename; a failure or :meth:`discard` leaves the old file
    as it was). ``source`` (str -> str) describes where the edges came from (:func:`save`)."""

    def __init__(self, path, *, source: dict | None = None, fsync: bool = True):
        self.path, self.fsync, self.source = Path(path), fsync, source
        self._file = Replacement(Path(path), FORMAT_NAME)
        self._writer = _Writer(self._file.fd, fsync)
        self._pool = ThreadPoolExecutor(workers())  # the region's pages
        self._encoders = ThreadPoolExecutor(workers())  # the label columns, beside them
        self._io = ThreadPoolExecutor(_WRITERS)
        self._conductor = ThreadPoolExecutor(1)  # lays out the regions
        self._local = threading.local()
        self._buffers = parquet_parts.Buffers()
        self._graph = self._region = self._early = None
        self._queued = threading.Event()  # every early part is handed to the encoders

    def _landing(self) -> Landing:
        if not hasattr(self._local, "landing"):
            self._local.landing = Landing()
        return self._local.landing

    def write_children(self, ids: VertexIds, comp, n_components: int, dag, d: int) -> None:
        """Start writing the children's region of the index of this condensation (``d``:
        the labels it will have); returns at once."""
        if self._region is not None:
            raise RuntimeError("the children are being written already")
        n = int(comp.shape[0])
        bounds = _bounds(n, n_components, d, int(dag.indices.shape[0]),
                         DEVICE_LABEL_SHARE if _encodes_labels(comp) else 1.0)
        ptr_at = None
        if n_components == n:  # one small gather, here: before the caller's next kernels
            ptr_at = to_host(dag.indptr[[lo for lo, _ in bounds] + [n]]).tolist()
        ready = mark_ready(dag.indptr)
        self._region = self._conductor.submit(self._children, ids, comp, n_components, dag,
                                              bounds, ptr_at, ready)

    def write_intervals(self, fields: dict) -> None:
        """Start writing the early label columns' region (``fields``: the arrays
        :data:`EARLY_FIELDS` of the labels under way, which must not change any more), after
        the children's; returns at once."""
        if self._region is None:
            raise RuntimeError("the children's region comes first")
        if self._early is not None:
            raise RuntimeError("the intervals are being written already")
        ready = mark_ready(fields["level"])  # here: the caller's stream, before its next kernels
        self._early = self._conductor.submit(self._intervals, dict(fields), ready)

    def _children(self, ids, comp, n_components, dag, bounds, ptr_at, ready) -> _Region:
        """The region's layout, its pages handed to the pool (not waited for)."""
        t0 = time.perf_counter()
        g = self._graph = _graph(ids, comp, n_components, dag, bounds, ptr_at, ready)
        rows = [hi - lo for lo, hi in g.bounds]
        sizes = [g.page_size(k) for k in range(len(rows))]
        at = list(np.cumsum([len(parquet_parts.MAGIC)] + sizes[:-1]).tolist())
        region = _Region(at, sizes, [], t0)

        def page(k: int) -> bytes:
            if not sizes[k]:
                return leaf_hash(b"")
            blobs = g.blobs(k, self._landing())
            buf = self._buffers.take(sizes[k])
            try:
                out = buf[:sizes[k]]
                parquet_parts.write_blob_page(blobs, rows[k], out)
                self._writer.write(at[k], out)
                region.ends.append(time.perf_counter())
                return leaf_hash(out)
            finally:
                self._buffers.give(buf)

        region.pages = [self._pool.submit(page, k) for k in range(len(sizes))]
        return region

    def _intervals(self, fields: dict, ready) -> _Early:
        """The early columns encoded on every core (beside the region's last pages) and each
        part written after the children's region as soon as the parts before it are known;
        returns once every part is handed to the writers."""
        try:
            early = _Early(time.perf_counter())
            rows = _rows(fields, self._graph, early=True, ready=ready)
            region = self._region.result()  # laid out already: this thread did it
            pos = early.end = region.end
            pages = _own_pages(rows, self._graph.bounds)
            encoded = self._encoders.map(lambda k: self._encode(rows, k, pages),
                                         range(len(self._graph.bounds)))
        finally:
            self._queued.set()  # the hub bits' parts queue behind them (:meth:`finish`)
        for part, own, raw in encoded:
            early.at.append(pos)
            early.parts.append(part)
            early.hashes.append(own)
            early.raw.append(raw)
            early.writes.append(self._write_part(part, pos, early.ends))
            pos += part.size
        early.end = pos
        return early

    def _encode(self, rows: _Rows, k: int, own: _OwnPages | None = None):
        """Part ``k`` of ``rows`` encoded: ``(part, hash of its bytes, its bytes when it
        holds no rows)``; with ``own``, its label columns are those encoded there."""
        lo, hi = self._graph.bounds[k]
        own_pages = own is not None and hi > lo
        table = rows.part(lo, hi, self._landing(), labels=not own_pages)
        part = parquet_parts.encode_part(table, self._buffers,
                                         **rows.options(hi - lo, labels=not own_pages))
        if own_pages:
            encoded, ready = own.take(k)
            with on_own_stream(ready):  # the hub bits before the children's placeholder
                part = label_pages.with_pages(part, list(rows.cols), encoded, self._buffers,
                                              before=not rows.early)
        region = self._region.result()
        if not rows.early and region.sizes[k]:
            parquet_parts.external_chunk(part, table, region.at[k], region.sizes[k])
        own = memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end]
        return part, leaf_hash(own), bytes(own) if hi == lo else None

    def _write_part(self, part: parquet_parts.Part, pos: int, ends: list[float]):
        """Write a part's chunks at ``pos`` (a writer thread; its buffer goes back after)."""
        def done(_):
            ends.append(time.perf_counter())
            _written(part, self._buffers)

        chunks = memoryview(part.data)[len(parquet_parts.MAGIC):part.data_end]
        write = self._io.submit(self._writer.write, pos, chunks)
        write.add_done_callback(done)
        return write

    def finish(self, index, *, timings: dict | None = None) -> Path:
        """Write the rest of ``index`` (the children and the early columns first, if
        :meth:`write_children` and :meth:`write_intervals` were not called) and put the file
        in place; ``timings`` receives the seconds of the steps."""
        try:
            t0 = time.perf_counter()
            early_fields, hub_fields = _split(index.labels)
            if self._region is None:
                self.write_children(index.ids, index.comp, index.n_components, index.dag,
                                    index.d)
            if self._early is None:
                self.write_intervals(early_fields)
            region = self._region.result()
            rows = _rows(hub_fields, self._graph, early=False,
                         ready=mark_ready(hub_fields["hub_down"]))
            pages = _own_pages(rows, self._graph.bounds)
            self._queued.wait()
            # queued now, behind the early parts: a thread free of those takes one at once
            hubs = [self._encoders.submit(self._encode, rows, k, pages)
                    for k in range(len(self._graph.bounds))]
            early = self._early.result()
            meta = metadata(index, rows.graph.idx.shape[0], self.source)
            t1 = time.perf_counter()
            self._write_groups(hubs, region, early, meta)
            t2 = time.perf_counter()
            if timings is not None:
                timings["children's region"] = region.seconds
                timings["children after the labels"] = region.past(t0)
                timings["intervals' region"] = early.seconds
                timings["intervals after the labels"] = early.past(t0)
                timings["encode and write"] = t2 - t1
            out = self._file.commit(fsync=self.fsync)
            if timings is not None:
                timings["final flush, rename"] = time.perf_counter() - t2
            return out
        except BaseException:
            self.discard()
            raise
        finally:
            self._shutdown()

    def discard(self) -> None:
        """Give up: the temporary goes, the old file (if any) stays."""
        self._shutdown()
        self._file.discard()

    def _shutdown(self) -> None:
        for task in (self._region, self._early):
            if task is not None:
                task.exception()  # their work is handed out before the pools close
        for pool in (self._conductor, self._pool, self._encoders, self._io):
            pool.shutdown(cancel_futures=True)  # a failed save's queued pages are not written;
            # the running ones are over before the file goes

    def _write_groups(self, hubs: list, region: _Region, early: _Early,
                      meta: dict[str, str]) -> None:
        """Join each group's early columns to its hub bits (``hubs``: the encodings of the
        groups' hub bits under way, :meth:`_encode`) and write them after both regions as
        soon as the groups before are known (the regions' last writes may still be under
        way), then, once everything is written, the footer with the digest."""
        writes = [self._io.submit(self._writer.write, 0, parquet_parts.MAGIC)]
        parts, leaves, edges, groups, pos, ends = [], [], [], [], early.end, []
        g = self._graph
        for k, (part, own, raw) in enumerate(h.result() for h in hubs):
            whole = parquet_parts.joined(early.parts[k], part, early.at[k])
            groups += parquet_parts.moved_groups(whole, pos, len(groups), in_place=True)
            writes.append(self._write_part(part, pos, ends))
            pos += part.size
            parts.append(whole)
            leaves.append((own, raw))
            edges.append(str(g.edges(k)))
        for w in writes:
            w.result()
        early.wait()
        pages = region.hashes()
        leaves = [group_leaf(page, before, own) if raw is None else
                  group_leaf(leaf_hash(b""), leaf_hash(b""), leaf_hash(early_raw + raw))
                  for page, before, early_raw, (own, raw)
                  in zip(pages, early.hashes, early.raw, leaves)]
        meta = {**meta, "group_edges": ",".join(edges)}
        pairs = {**{META_PREFIX + k: v for k, v in meta.items()}, DIGEST_KEY: DIGEST_PLACEHOLDER}
        tail = parquet_parts.footer(parts, pairs, groups)
        body = tail[:-8]  # the footer's length and PAR1 follow
        site = digest_site(body)
        digest = root_digest(body, site, leaves).encode()
        self._writer.write(pos, tail[:site] + digest + tail[site + len(digest):])


def save(index, path, *, source: dict | None = None, fsync: bool = True,
         timings: dict | None = None) -> Path:
    """Write ``index`` to ``path`` atomically (:class:`IndexWriter`: a locked temporary beside
    it, flushed, renamed over the old file; a crash at any point leaves the previous file
    intact). A ``path`` that exists and is not an index of this project is refused with
    :class:`IndexFileError`. ``source`` (str -> str) describes where the edges came from;
    :func:`read_metadata` returns it under ``source.<key>``. ``timings``: a dict that
    receives the seconds of the steps (the children's region, how long it ran past the
    start of the label columns, encode and write, final flush)."""
    return IndexWriter(path, source=source, fsync=fsync).finish(index, timings=timings)


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
        with open(path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return IndexReader(path, meta, mapped, xp).read()
            finally:
                _unmap(mapped)
    except (StaleIndexError, IndexFileError):
        raise
    except Exception as exc:
        raise IndexFileError(f"{path} is damaged ({exc}); delete it and rebuild the index") from exc


def _unmap(mapped: mmap.mmap) -> None:
    """Close a load's map of its file. A view of it that outlives the load (in a frame or a
    library's cache that only the collector frees) would make the close raise BufferError,
    and a load that read and checked every byte refused as damaged (a GPU load of
    rmat:23:12 once was, README, Scale, stop 37): the collector runs first, and a map still
    in use then goes with its last view."""
    try:
        mapped.close()
    except BufferError:
        gc.collect()
        try:
            mapped.close()
        except BufferError:
            pass


__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "IndexWriter", "PART_BYTES", "load", "metadata",
           "read_metadata", "save"]
