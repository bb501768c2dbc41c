"""The rows of an index file as a save cuts and encodes them: the parts (one row group each,
encoded on its own thread), the children's pages, and the label columns of each part, taken
from the index's arrays where they live (on the device for a GPU index) and encoded there
or by pyarrow (:mod:`.writer` lays them out and writes them).
"""
from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..kernels import (Landing, TransferSettings, is_device_array, kernels_for, mark_ready,
                       on_own_stream, to_host, to_host_all, to_host_columns)
from ..kernels.host import TRANSFERS
from ..model import VertexIds
from . import label_pages, parts
from .format import EARLY_FIELDS, TREE_FILE_COLUMNS, tree_size, write_options


@dataclass(frozen=True)
class SaveSettings:
    """The knobs of a save (:func:`.writer.save`, :class:`.writer.IndexWriter`)."""

    #: raw bytes of index data per part (one row group, encoded by one thread), at least, where
    #: that makes ``min_parts`` or more: each part costs a fixed share of work under the
    #: interpreter's lock (its footer decoded and moved, its pages, its copies)
    part_bytes: int = 128 << 20
    #: parts of a large index, at most (larger parts beyond: fewer footers to move)
    max_parts: int = 256
    #: parts of a small index, at least (1,024 rows each at least): one per core of a
    #: 16-core host, so that every core encodes and loads
    min_parts: int = 16
    #: where the early label columns and hub bits are encoded by the backend's page encoder
    #: (:mod:`.label_pages`) rather than pyarrow: "device" (a GPU index), "always" (the CPU
    #: twin too: tests), "never"
    own_pages: str = "device"
    #: raw bytes of label columns one launch of the page encoder takes at most
    encode_batch: int = 1 << 30
    #: bytes written between two flushes where the system cannot be asked to write a range
    #: back as soon as it is written (no ``sync_file_range``)
    sync_bytes: int = 256 << 20
    #: threads that write the encoded parts
    writers: int = 8
    #: how device arrays come to the host
    transfers: TransferSettings = TRANSFERS


SAVE = SaveSettings()
#: the size columns of the tree intervals -> the ``tree`` matrix's (lo, post) columns
_SIZES = {size: (lo_j, post_j) for size, _, lo_j, post_j in TREE_FILE_COLUMNS}


@dataclass
class Graph:
    """What the children's region needs, known once the condensation is done (before the
    labels): the components, the DAG's rows, and how to cut the file's rows into parts. The
    children stay on the index's backend: each part brings its own to the host, with its
    row pointers. Where every row is its own component (a DAG's condensation) nothing is
    copied before the first page, so the disk starts at once."""

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
    transfers: TransferSettings = TRANSFERS  # how the rows come to the host

    def blobs(self, k: int, landing: Landing | None = None) -> parts.Blobs:
        """The children of part ``k``'s rows (landed in ``landing``), copied on this thread's
        stream."""
        c0, c1 = self.spans[k]
        kids = self.idx[self.ptr_at[k]:self.ptr_at[k + 1]]
        with on_own_stream(self.ready):
            ptr, kids = to_host_all([self.ptr[c0:c1 + 1], kids], landing, ready=True,
                                    settings=self.transfers)
        return parts.Blobs("dag_children", ptr, kids, self.valid(k))

    def valid(self, k: int) -> np.ndarray | None:
        """Which of part ``k``'s rows hold their component's children (None: all)."""
        lo, hi = self.bounds[k]
        return None if self.rep is None else self.rep[lo:hi]

    def page_size(self, k: int) -> int:
        """Bytes of part ``k``'s page of children (0: a part of no rows has none)."""
        (lo, hi), (c0, c1) = self.bounds[k], self.spans[k]
        if hi == lo:
            return 0
        return parts.blob_page_bytes("dag_children", hi - lo, self.valid(k), c1 - c0,
                                             self.edges(k))

    def components(self, lo: int, hi: int) -> np.ndarray:
        """The components of rows ``[lo, hi)``, on the host (call it on a stream of the
        thread's own, :func:`on_own_stream`: a small copy waits for the current stream)."""
        if self.comp is None:
            return np.arange(lo, hi, dtype=np.int32)
        return np.ascontiguousarray(to_host(self.comp[lo:hi], ready=True,
                                            settings=self.transfers))

    def edges(self, k: int) -> int:
        """The DAG edges (children) that part ``k`` holds: the file's ``group_edges``, so
        that a reader places each row group's children without waiting for the groups
        before."""
        return self.ptr_at[k + 1] - self.ptr_at[k]




def part_bounds(n: int, c: int, d: int, dag_edges: int, labels_share: float = 1.0,
                settings: SaveSettings = SAVE) -> list[tuple[int, int]]:
    """The parts' rows: parts of about ``settings.part_bytes`` of raw data, or larger ones
    where that makes more than ``max_parts``, smaller ones where it makes fewer than
    ``min_parts`` (of
    1,024 rows at least, but for the last), counted with two words of hub bits per side (the
    labels' own widths are not known yet). Only the first ``c`` rows (one per component)
    hold labels (the rows after them hold zeros, encoded about eight times as fast), so the
    parts are cut by their host work, not their rows: rmat:23:12's 8.4M rows hold 5.3M
    components, and parts of equal rows left a third of the threads next to nothing to do
    when pyarrow encoded the labels. ``labels_share``: a label row's host work as a share of
    that (0 where the backend encodes the label pages, whose host work is then only their
    compressed bytes' copy and hash); the number of parts still comes from the bytes.

    >>> part_bounds(4096, 4096, 1, 0)
    [(0, 1024), (1024, 2048), (2048, 3072), (3072, 4096)]
    >>> cut = part_bounds(100_000, 10_000, 1, 0)  # 10% of the rows hold labels
    >>> len(cut), sum(hi <= 10_000 for _, hi in cut), part_bounds(0, 0, 1, 0)
    (16, 4, [(0, 0)])
    >>> len(part_bounds(40_000_000, 40_000_000, 9, 175_000_000, 0.0))  # 6.1 GB: parts of 128 MB
    46
    >>> [f(hi - lo for lo, hi in part_bounds(100_000, 10_000, 1, 0, share))
    ...  for share in (1.0, 0.0) for f in (min, max)]  # by work, then by rows (~6,250 each)
    [2048, 8192, 5792, 7168]
    """
    base = 8 + 4 + 4 * dag_edges / max(n, 1)  # the key, the component, the children
    labels = 4 * (2 * d + 5) + 32
    raw = c * (base + labels) + (n - c) * (base + labels / 8)
    parts = min(settings.max_parts, max(settings.min_parts, -(-int(raw) // settings.part_bytes)))
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


def graph_of(ids: VertexIds, comp, n_components: int, dag, bounds: list, ptr_at: list | None,
             ready, transfers: TransferSettings = TRANSFERS) -> Graph:
    """The :class:`Graph` of a condensation cut at ``bounds`` (:func:`part_bounds`). Where every
    row is its own component, ``ptr_at`` holds the row pointers at the bounds and nothing
    else is copied; else the representatives, the spans and their row pointers are found on
    the backend, beside the build's label passes (on a stream of this thread's own, after
    ``ready``: the DAG is made, :func:`~grail_duckdb.kernels.mark_ready`), and only they
    come over, so that the first page is written without a whole copy of the components."""
    n = int(comp.shape[0])
    if n_components == n:  # components are numbered by their first rows: comp[i] == i
        return Graph(ids, None, n, dag.indptr, dag.indices, None, bounds, bounds, ptr_at,
                     ready, transfers)
    kernels = kernels_for("gpu" if is_device_array(comp) else "cpu")
    xp = kernels.xp
    with on_own_stream(ready):
        rep = kernels.representatives(comp)
        # components are numbered by their representatives' rows: those before a row count them
        before = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(rep, dtype=xp.int64)])
        at = before[xp.asarray([lo for lo, _ in bounds] + [n])]
        at, ptr, rep = to_host_all([at, dag.indptr[at], rep], settings=transfers)
    spans = list(zip(at[:-1].tolist(), at[1:].tolist()))
    return Graph(ids, comp, n_components, dag.indptr, dag.indices, rep, bounds, spans,
                 ptr.tolist(), ready, transfers)


@dataclass
class Rows:
    """Label arrays, and how they make each part's table: the early ones (:data:`EARLY_FIELDS`,
    after the key and the component) or the hub bits (before the children's placeholder).
    They stay on the index's backend: each part brings its run of components to the host
    (:func:`~grail_duckdb.kernels.to_host_columns`: a slice, no gather), so the copy is
    spread over the encoding threads instead of preceding them. Each thread does so on a
    stream of its own, after ``ready``: the early columns are written while the build's hub
    passes run on the default stream."""

    graph: Graph
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
        placeholder for their page in the region (:func:`.parts.external_chunk`).
        Device rows land in ``landing`` (:class:`~grail_duckdb.kernels.Landing`: the table
        is valid until its next use)."""
        g = self.graph
        rows = slice(min(lo, g.c), min(hi, g.c))
        names = list(self.fields) if labels else []
        with on_own_stream(self.ready):
            host = to_host_columns([self.fields[f][rows] for f in names], landing,
                                   self.graph.transfers)
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
            arrays[name] = pa.array(padded(values, hi - lo))
        if not self.early:
            arrays["dag_children"] = pa.nulls(hi - lo, pa.binary())
        # every column but the children is declared NOT NULL: no definition levels to decode
        return pa.Table.from_arrays(list(arrays.values()), schema=pa.schema(
            [pa.field(k, v.type, nullable=k == "dag_children") for k, v in arrays.items()]))


def padded(values: np.ndarray, rows: int) -> np.ndarray:
    """``values`` followed by zeros up to ``rows`` values (the label columns' rows past the
    last component).

    >>> padded(np.array([7, 8], np.int32), 4).tolist()
    [7, 8, 0, 0]
    """
    if values.shape[0] == rows:
        return values
    out = np.zeros(rows, values.dtype)
    out[:values.shape[0]] = values
    return out




def encodes_labels(array, settings: SaveSettings = SAVE) -> bool:
    """Whether a save encodes the label columns of an index whose arrays live where
    ``array`` does itself (``settings.own_pages``)."""
    own = settings.own_pages
    return own == "always" or (own == "device" and is_device_array(array))


def own_pages(rows: Rows, bounds: list, settings: SaveSettings = SAVE) -> OwnPages | None:
    """The label columns of ``rows`` encoded on the backend (:class:`OwnPages`), or None
    where pyarrow encodes them."""
    if rows.cols and encodes_labels(rows.ready_array, settings):
        return OwnPages(rows, bounds, settings.encode_batch)
    return None


class OwnPages:
    """A save's label columns (the early ones, or the hub bits) encoded on the index's
    backend (:func:`.label_pages.encode_parts`), a batch of consecutive parts at a time (at
    most ``batch_bytes`` raw bytes), the batches in file order on a thread of their own
    from the moment the rows are known (the encoders' threads only wait for their part's
    batch, rather than the first of them encoding it while the others wait). Each part's
    bytes go once taken (:meth:`take`)."""

    def __init__(self, rows: Rows, bounds: list, batch_bytes: int):
        self._rows, self._bounds = rows, bounds
        row_bytes = rows.ready_array.dtype.itemsize * len(rows.cols)
        batches, self._of, size = [], {}, batch_bytes
        for k, (lo, hi) in enumerate(bounds):
            if hi == lo:
                continue
            if size + (hi - lo) * row_bytes > batch_bytes:
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


def rows_of(fields: dict, graph: Graph, early: bool, ready) -> Rows:
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
    return Rows(graph, fields, cols, early, ready)


def split_labels(lab) -> tuple[dict, dict]:
    """A :class:`~.labels.Labels`' arrays: the early ones, the hub bits."""
    arrays = {name: a for name, a in lab.arrays().items() if name != "win_first"}
    return ({f: arrays[f] for f in EARLY_FIELDS},
            {f: a for f, a in arrays.items() if f not in EARLY_FIELDS})
