"""An index file written atomically, on every core, as a build goes or from a built index.

:class:`IndexWriter` lays the file out in three regions (the children's pages, the early
label columns, each row group's hub bits) and writes each as soon as what it holds is known:
a build that saves (``build_index(..., save_to=...)``) writes the children while it computes
the labels and the early columns while it computes the hub bits. :func:`save` writes a built
index the same way. The file goes in place with one rename (:mod:`.atomic_write`); the
layout, the encodings and the digest are described in docs/index-format.md.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..kernels import Landing, mark_ready, on_own_stream, to_host
from ..kernels.host import workers
from ..model import VertexIds
from . import label_pages, parts
from .appends import remove_parts
from .atomic_write import Replacement
from .digest import digest_site, group_leaf, leaf_hash, root_digest
from .format import FORMAT_NAME, first_text, metadata, with_group_edges
from .rows import (SAVE, OwnPages, Rows, SaveSettings, encodes_labels, graph_of, own_pages,
                   part_bounds, rows_of, split_labels)

__all__ = ["IndexWriter", "SaveSettings", "save"]


class _Writer:
    """Writes parts at their offsets from a few threads and has the disk take each one while
    the rest is still being encoded, so that the final flush is short: on Linux each write's
    range is handed to the kernel's write-back at once (``sync_file_range``, asynchronous:
    the pages stay cached for a load that follows), elsewhere the file is flushed every
    ``sync_bytes`` (a write-back started per range kept 16 GB of 64 MB writes from 8 threads
    near twice the rate of one flush at the end)."""

    def __init__(self, fd: int, sync: bool, sync_bytes: int):
        self.fd, self.sync, self.sync_bytes = fd, sync, sync_bytes
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
            due = self._unsynced >= self.sync_bytes
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


def _written(part: parts.Part, buffers: parts.Buffers) -> None:
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
        return self.at[-1] + self.sizes[-1] if self.at else len(parts.MAGIC)

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
    condensation is done: :func:`~grail_duckdb.engine.build.build_index` with ``save_to``).

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
    as it was). ``source`` (str -> str) describes where the edges came from (:func:`save`);
    ``settings`` (:class:`SaveSettings`) holds the knobs."""

    def __init__(self, path, *, source: dict | None = None, fsync: bool = True,
                 settings: SaveSettings = SAVE):
        self.path, self.fsync, self.source, self.settings = Path(path), fsync, source, settings
        self._file = Replacement(Path(path), FORMAT_NAME)
        self._writer = _Writer(self._file.fd, fsync, settings.sync_bytes)
        self._pool = ThreadPoolExecutor(workers())  # the region's pages
        self._encoders = ThreadPoolExecutor(workers())  # the label columns, beside them
        self._io = ThreadPoolExecutor(settings.writers)
        self._conductor = ThreadPoolExecutor(1)  # lays out the regions
        self._local = threading.local()
        self._buffers = parts.Buffers()
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
        bounds = part_bounds(n, n_components, d, int(dag.indices.shape[0]),
                             0.0 if encodes_labels(comp, self.settings) else 1.0, self.settings)
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
        g = self._graph = graph_of(ids, comp, n_components, dag, bounds, ptr_at, ready,
                                        self.settings.transfers)
        rows = [hi - lo for lo, hi in g.bounds]
        sizes = [g.page_size(k) for k in range(len(rows))]
        at = list(np.cumsum([len(parts.MAGIC)] + sizes[:-1]).tolist())
        region = _Region(at, sizes, [], t0)

        def page(k: int) -> bytes:
            if not sizes[k]:
                return leaf_hash(b"")
            blobs = g.blobs(k, self._landing())
            buf = self._buffers.take(sizes[k])
            try:
                out = buf[:sizes[k]]
                parts.write_blob_page(blobs, rows[k], out)
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
            rows = rows_of(fields, self._graph, early=True, ready=ready)
            region = self._region.result()  # laid out already: this thread did it
            pos = early.end = region.end
            pages = own_pages(rows, self._graph.bounds, self.settings)
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

    def _encode(self, rows: Rows, k: int, own: OwnPages | None = None):
        """Part ``k`` of ``rows`` encoded: ``(part, hash of its bytes, its bytes when it
        holds no rows)``; with ``own``, its label columns are those encoded there."""
        lo, hi = self._graph.bounds[k]
        own_pages = own is not None and hi > lo
        table = rows.part(lo, hi, self._landing(), labels=not own_pages)
        part = parts.encode_part(table, self._buffers,
                                         **rows.options(hi - lo, labels=not own_pages))
        if own_pages:
            encoded, ready = own.take(k)
            with on_own_stream(ready):  # the hub bits before the children's placeholder
                part = label_pages.with_pages(part, list(rows.cols), encoded, self._buffers,
                                              before=not rows.early)
        region = self._region.result()
        if not rows.early and region.sizes[k]:
            parts.external_chunk(part, table, region.at[k], region.sizes[k])
        own = memoryview(part.data)[len(parts.MAGIC):part.data_end]
        return part, leaf_hash(own), bytes(own) if hi == lo else None

    def _write_part(self, part: parts.Part, pos: int, ends: list[float]):
        """Write a part's chunks at ``pos`` (a writer thread; its buffer goes back after)."""
        def done(_):
            ends.append(time.perf_counter())
            _written(part, self._buffers)

        chunks = memoryview(part.data)[len(parts.MAGIC):part.data_end]
        write = self._io.submit(self._writer.write, pos, chunks)
        write.add_done_callback(done)
        return write

    def finish(self, index, *, timings: dict | None = None) -> Path:
        """Write the rest of ``index`` (the children and the early columns first, if
        :meth:`write_children` and :meth:`write_intervals` were not called) and put the file
        in place; ``timings`` receives the seconds of the steps."""
        try:
            t0 = time.perf_counter()
            early_fields, hub_fields = split_labels(index.labels)
            if self._region is None:
                self.write_children(index.ids, index.comp, index.n_components, index.dag,
                                    index.d)
            if self._early is None:
                self.write_intervals(early_fields)
            region = self._region.result()
            rows = rows_of(hub_fields, self._graph, early=False,
                         ready=mark_ready(hub_fields["hub_down"]))
            pages = own_pages(rows, self._graph.bounds, self.settings)
            self._queued.wait()
            # queued now, behind the early parts: a thread free of those takes one at once
            hubs = [self._encoders.submit(self._encode, rows, k, pages)
                    for k in range(len(self._graph.bounds))]
            early = self._early.result()
            first = index.labels.win_first
            meta = metadata(index, rows.graph.idx.shape[0], self.source,
                            None if first is None else first_text(to_host(first)))
            t1 = time.perf_counter()
            self._write_groups(hubs, region, early, meta)
            t2 = time.perf_counter()
            if timings is not None:
                timings["children's region"] = region.seconds
                timings["children after the labels"] = region.past(t0)
                timings["intervals' region"] = early.seconds
                timings["intervals after the labels"] = early.past(t0)
                timings["encode and write"] = t2 - t1
            remove_parts(self.path)  # the parts of the file it replaces, before it goes
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
        writes = [self._io.submit(self._writer.write, 0, parts.MAGIC)]
        wholes, leaves, edges, groups, pos, ends = [], [], [], [], early.end, []
        g = self._graph
        for k, (part, own, raw) in enumerate(h.result() for h in hubs):
            whole = parts.joined(early.parts[k], part, early.at[k])
            groups += parts.moved_groups(whole, pos, len(groups), in_place=True)
            writes.append(self._write_part(part, pos, ends))
            pos += part.size
            wholes.append(whole)
            leaves.append((own, raw))
            edges.append(g.edges(k))
        for w in writes:
            w.result()
        early.wait()
        pages = region.hashes()
        leaves = [group_leaf(page, before, own) if raw is None else
                  group_leaf(leaf_hash(b""), leaf_hash(b""), leaf_hash(early_raw + raw))
                  for page, before, early_raw, (own, raw)
                  in zip(pages, early.hashes, early.raw, leaves)]
        tail = parts.footer(wholes, with_group_edges(meta, edges), groups)
        body = tail[:-8]  # the footer's length and PAR1 follow
        site = digest_site(body)
        digest = root_digest(body, site, leaves).encode()
        self._writer.write(pos, tail[:site] + digest + tail[site + len(digest):])


def save(index, path, *, source: dict | None = None, fsync: bool = True,
         timings: dict | None = None, settings: SaveSettings = SAVE) -> Path:
    """Write ``index`` to ``path`` atomically (:class:`IndexWriter`: a locked temporary beside
    it, flushed, renamed over the old file; a crash at any point leaves the previous file
    intact). A ``path`` that exists and is not an index of this project is refused with
    :class:`IndexFileError`. ``source`` (str -> str) describes where the edges came from;
    :func:`~.format.read_metadata` returns it as ``source``. ``timings``: a dict that
    receives the seconds of the steps (the children's region, how long it ran past the
    start of the label columns, encode and write, final flush); ``settings``: the knobs
    (:class:`SaveSettings`)."""
    return IndexWriter(path, source=source, fsync=fsync, settings=settings).finish(
        index, timings=timings)
