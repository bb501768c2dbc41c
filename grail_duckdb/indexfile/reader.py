"""Reading an index file on every core, straight into the arrays of a backend.

Each worker thread takes one row group: it hashes the group's bytes (its children's chunk in
the region at the front of the file, its early columns' chunks in the region after it, and its
own chunks: the digest's leaf, from the memory-mapped file), decodes the group (on a GPU load
the label columns of the kinds :mod:`.page_plan` reads go to the device as they lie in the
file and a kernel decodes and places them; pyarrow decodes the rest, and every column of a
CPU load), checks it (component ids and DAG edges in range, on a CPU load: a GPU load checks
those once on the device at the end; the representatives' components consecutive, children
BLOBs whole int32, in one pass without the interpreter's lock: ``children_rows``) and copies its values into the final arrays, which live on the device
when the index is loaded onto a GPU: every group is one block of rows there (through
per-thread pinned buffers, not waited for until the end), so no whole-index host copy is made
and the copies overlap the other workers' decoding. The per-component label matrices
(``inner``, ``outer``, the two tree intervals, hub bits: one file column per matrix column)
are written column by column: in place on the host, into a transposed device array on a GPU
(contiguous blocks; one device transpose at the end). The DAG's children go the same way:
the metadata says how many edges each row group holds (``group_edges``), so a worker knows
where its group's row pointers and children start and places them at once (no host copy of
the children is kept, no second pass). The digest is compared last: a damaged file is refused
before the index is returned.
"""
from __future__ import annotations

import contextlib
import gc
import mmap
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import IndexFileError, StaleIndexError
from ..growth import roomy
from ..kernels import TransferSettings, copy_into, kernels_for, upload_pages, upload_staging
from ..kernels.host import TRANSFERS, workers
from ..kernels.shared import PAGE_DST, PAGE_RAW, PAGE_SCRATCH, PAGE_SRC
from ..model import CSR, IndexData, Labels, VertexIds
from . import page_plan
from . import parts as parquet_parts
from .digest import digest_site, group_leaf, leaf_hash, root_digest
from .format import (TREE_FILE_COLUMNS, IndexMeta, blobs, early_count, first_array,
                     label_names, read_metadata, tree_lo)
from .page_headers import children_rows


class IndexReader:
    """One index file read into arrays of ``xp`` (NumPy or CuPy); :meth:`read` returns its
    :class:`~grail_duckdb.model.IndexData`."""

    def __init__(self, path: Path, meta: IndexMeta, mapped, xp=np,
                 transfers: TransferSettings = TRANSFERS):
        self.path, self.meta, self.mapped, self.xp = path, meta, mapped, xp
        self.n, self.c = meta.vertices, meta.components
        self.d, self.hw, self.ww = meta.labels, meta.hub_words, meta.win_words
        self.labels = label_names(self.d, self.hw, self.ww)
        self.names = ["key", "component"] + self.labels + ["dag_children"]
        self.identity = self.n == self.c
        self._local = threading.local()
        md = self.md = pq.ParquetFile(path, memory_map=True).metadata
        if md.num_rows != self.n:
            raise ValueError(f"{md.num_rows} rows, metadata says {self.n}")
        if md.schema.to_arrow_schema().names != self.names:
            raise ValueError("the columns are not those of this format")
        start, end = parquet_parts.footer_bounds(mapped)
        self.footer = bytes(mapped[start:end])
        self.site = digest_site(self.footer)
        digest = meta.digest.encode()
        if self.site < 0 or self.footer[self.site:self.site + len(digest)] != digest:
            raise ValueError("content digest mismatch (the footer's digest is not where it "
                             "belongs)")
        self.spans = parquet_parts.group_spans(md, start, early_count(self.d))
        starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        edges = np.cumsum([0, *meta.group_edges])
        if edges.shape[0] != md.num_row_groups + 1 or edges[-1] != meta.dag_edges:
            raise ValueError("the row groups' edge counts differ from the metadata")
        self.groups = [(g, int(starts[g]), int(starts[g + 1]), int(edges[g]), int(edges[g + 1]))
                       for g in range(md.num_row_groups)]
        c, d, hw = self.c, self.d, self.hw
        # host arrays with free rows after them: an append to the loaded index grows them
        # in place (grail_duckdb.growth)
        self.comp = roomy(xp, (self.n,), xp.int32)
        self.level = roomy(xp, (c,), xp.int32)
        self.ptr = roomy(np, (c + 1,), np.int64)
        self.ptr[0] = 0
        self.idx = roomy(xp, (int(edges[-1]),), xp.int32)
        self._device = None if xp is np else self.comp.device
        self.transfers = transfers
        self._staging = upload_staging(xp, transfers)
        shape = (lambda w: (c, w)) if self._device is None else (lambda w: (w, c))
        self.wide = {"inner": roomy(xp, shape(d), xp.int32),
                     "outer": roomy(xp, shape(d), xp.int32),
                     "tree": roomy(xp, shape(4), xp.int32),
                     "hub_down": roomy(xp, shape(hw), xp.uint64),
                     "hub_up": roomy(xp, shape(hw), xp.uint64)}
        if self.ww:
            self.wide.update(win_down=roomy(xp, shape(self.ww), xp.uint64),
                             win_up=roomy(xp, shape(self.ww), xp.uint64))
        self._targets_of = self._targets()
        self._dtypes = {name: dst.dtype for name, dst in self._targets_of.items()}
        self._kernels = None if self._device is None else kernels_for("gpu")
        self._err = None  # a page's damage, set by the device's decoding (_place)
        if self._device is not None:
            with self._device:
                self._err = xp.zeros(1, xp.int32)
                self._device.synchronize()  # zeroed before any worker's stream writes it

    def _file(self) -> pq.ParquetFile:
        """This thread's reader of the file, over the footer decoded once (each thread
        decoding it again took 11 ms of rmat:23:12's 16-group load, at every thread's start)."""
        pf = getattr(self._local, "pf", None)
        if pf is None:
            pf = self._local.pf = pq.ParquetFile(self.path, memory_map=True, metadata=self.md)
        return pf

    def _column(self, base: str, j: int):
        """Column ``j`` of the matrix ``base``: a strided view on the host, a contiguous row
        of the transposed array on a GPU."""
        return self.wide[base][:, j] if self._device is None else self.wide[base][j]

    def _put_all(self, puts: list) -> None:
        """``dst[lo:lo + len(values)] = values`` for each ``(dst, lo, values)``: a row
        group's blocks of rows, copied in one call (host -> device on a GPU: small columns
        share the pinned buffers and their waits, :func:`~grail_duckdb.kernels.copy_into`)."""
        pairs = [(dst[lo:lo + values.shape[0]], values) for dst, lo, values in puts
                 if values.shape[0]]
        # on a GPU, read() synchronizes the device before any array is used
        with self._device if self._device is not None else contextlib.nullcontext():
            copy_into(pairs, self._staging, self.transfers)

    def _matrices(self) -> dict:
        """The label matrices, one row per component (on the device transposed views: the
        backend's ``query_labels`` packs them into its own layout)."""
        if self._device is None:
            return self.wide
        with self._device:
            tree = self.wide["tree"]
            for _, _, lo_j, post_j in TREE_FILE_COLUMNS:
                tree[lo_j] = tree_lo(tree[post_j], tree[lo_j])
            return {k: v.T for k, v in self.wide.items()}

    def _targets(self) -> dict:
        """Each label column's destination: its array (a column of a label matrix, or the
        levels), by file column."""
        out = {"level": self.level}
        for size_name, post_name, lo_j, post_j in TREE_FILE_COLUMNS:
            out[post_name] = self._column("tree", post_j)
            out[size_name] = self._column("tree", lo_j)  # sizes: first ranks made later
        for base, width in (("inner", self.d), ("outer", self.d), ("hub_down", self.hw),
                            ("hub_up", self.hw), ("win_down", self.ww), ("win_up", self.ww)):
            for j in range(width):
                out[f"{base}_{j + 1}"] = self._column(base, j)
        return out

    def group(self, g: int, lo: int, hi: int, e0: int, e1: int):
        """Hash row group ``g``'s bytes, decode it (rows ``[lo, hi)``, DAG edges ``[e0, e1)``),
        check it and place its values, its rows' pointers and children included; returns
        ``(leaf, keys, component span [c0, c1))``. A GPU load decodes the label columns
        that :mod:`.page_plan` can on the device, from their bytes as they lie in the file;
        pyarrow decodes the rest, and every column of a CPU load."""
        with memoryview(self.mapped) as view:  # no view outlives the call (the map closes)
            leaf = group_leaf(*(leaf_hash(view[a:b]) for a, b in self.spans[g]))
        kept = max(0, min(hi, self.c) - lo)  # the rows that hold components' labels
        chunks = ({} if self._device is None or not kept
                  else page_plan.group_chunks(self.md, g, self.mapped, self._dtypes))
        skip = set(chunks) if kept else set(self._targets_of)
        table = self._file().read_row_group(
            g, columns=[n for n in self.names if n not in skip], use_threads=False)
        if table.num_rows != hi - lo:
            raise ValueError(f"row group {g} holds {table.num_rows} rows, not {hi - lo}")
        col = {name: table.column(name).combine_chunks() for name in table.column_names}
        comp = col["component"].to_numpy()
        if self._device is None:
            _check_range(comp, self.c, "component ids")
        puts = [(self.comp, lo, comp)]
        children = col["dag_children"]
        if self.identity and children.null_count:  # every row a representative
            raise ValueError("representative rows do not match the component count")
        # the label columns pyarrow decoded (those of ``chunks`` are decoded on the device:
        # _place): rows [lo, lo + kept) hold components [lo, lo + kept)
        taken = {name: col[name].to_numpy()[:kept] for name in self._targets_of if name in col}
        for name, values in taken.items():
            if self._device is None and name in _POSTS:  # the tree interval's first ranks
                values = tree_lo(taken[_POSTS[name]], values)
            puts.append((self._targets_of[name], lo, values))
        offsets, data = blobs(children)
        bitmap = children.buffers()[0] if children.null_count else None
        c0, c1, whole = children_rows(
            np.zeros(0, np.uint8) if bitmap is None else np.frombuffer(bitmap, np.uint8),
            children.offset, offsets, comp, self.ptr, e0)
        if not whole or (self.identity and c0 != lo):  # row i is component i
            raise ValueError("the representatives' components or children do not follow the "
                             "rows")
        if data.shape[0] != 4 * (e1 - e0) or c1 > self.c:
            raise ValueError("the children BLOBs do not hold the row group's DAG edges")
        part = data.view(np.int32)
        if self._device is None:
            _check_range(part, self.c, "DAG edges")
        puts.append((self.idx, e0, part))
        self._put_all(puts)
        if chunks:
            self._place(chunks, kept, lo)
        return leaf, col["key"], (c0, c1)

    def _place(self, chunks: dict, kept: int, first: int) -> None:
        """Decode a row group's ``chunks`` on the device into their destinations, its first
        ``kept`` rows from component ``first`` on (the rows after them are past the last
        component), their bytes copied as they lie in the file."""
        order = sorted(chunks.values(), key=lambda ch: ch.start)  # laid in file order
        runs, at, dst, pos = [], [], [], 0
        for ch in order:
            if runs and runs[-1][1] == ch.start:  # chunks that follow each other: one copy
                runs[-1][1] = ch.stop
            else:
                runs.append([ch.start, ch.stop])
            target = self._targets_of[ch.name]
            at.append(pos)
            dst.append(target.data.ptr + first * target.strides[0])
            pos += ch.stop - ch.start
        # one table for the group's pages: sources from the first run, scratch one after
        # the other, each page's destination its column's
        pages = [ch.table.shape[0] for ch in order]
        table = np.concatenate([ch.table for ch in order])
        table[:, PAGE_SRC] += np.repeat(at, pages)
        lz4 = table[:, PAGE_SCRATCH] >= 0
        room = np.where(lz4, table[:, PAGE_RAW], 0)
        table[lz4, PAGE_SCRATCH] = (np.cumsum(room) - room)[lz4]
        table[:, PAGE_DST] = np.repeat(np.array(dst, np.int64), pages)
        scratch = int(room.sum())
        view = memoryview(self.mapped)
        try:
            host_runs = [np.frombuffer(view, np.uint8, count=b - a, offset=a) for a, b in runs]
            with self._device:
                upload_pages(self._kernels, self._staging, host_runs, table, kept, scratch,
                             self._err)
        except BaseException as exc:  # the failed calls' frames hold views of the map
            traceback.clear_frames(exc.__traceback__)
            raise
        finally:
            host_runs = None
            view.release()

    def read(self) -> IndexData:
        """Every row group in parallel, then the checks across groups and the digest."""
        xp = self.xp
        try:
            with ThreadPoolExecutor(workers()) as pool:
                got = list(pool.map(lambda g: self.group(*g), self.groups))
        finally:
            if self._device is not None:  # every block on the device, also after a failure,
                self._device.synchronize()  # before the arrays are read or dropped
            self._staging = None
        # a row group may hold no representative at all (rows of a large component whose
        # first vertex lies in an earlier group): it spans no component
        spans = [span for *_, span in got if span[1] > span[0]]
        ends = [0] + [b for _, b in spans]
        if [a for a, _ in spans] != ends[:-1] or ends[-1] != self.c:
            raise ValueError("representative rows do not match the component count")
        if root_digest(self.footer, self.site, [leaf for leaf, *_ in got]) != self.meta.digest:
            raise ValueError("content digest mismatch")
        if self._err is not None and int(self._err[0]):
            raise ValueError("a label page does not decode into its values")
        if self._device is not None:  # the groups' checks, once, at the device's speed
            with self._device:
                _check_range(self.comp, self.c, "component ids")
                _check_range(self.idx, self.c, "DAG edges")
        wide = self._matrices()
        windows = {} if not self.ww else dict(
            win_down=wide["win_down"], win_up=wide["win_up"],
            win_first=xp.asarray(first_array(self.meta.win_first)))
        lab = Labels(level=self.level, inner=wide["inner"], outer=wide["outer"],
                     tree=wide["tree"], hub_down=wide["hub_down"], hub_up=wide["hub_up"],
                     **windows)
        return IndexData(ids=_ids([k for _, k, *_ in got], self.meta.key_type), comp=self.comp,
                         n_components=self.c, dag=CSR(xp.asarray(self.ptr), self.idx),
                         labels=lab, seed=self.meta.seed, edge_rows=self.meta.edge_rows,
                         fingerprint=self.meta.fingerprint)


#: the tree intervals' size columns -> their post columns
_POSTS = {size: post for size, post, *_ in TREE_FILE_COLUMNS}
#: elements per reduction of the whole-array checks (a few GB, whatever a library's index width)
_CHUNK = 1 << 30


def _chunks(values):
    """``(first index, slice)`` over ``values`` in pieces of ``_CHUNK`` elements."""
    return ((i, values[i:i + _CHUNK]) for i in range(0, values.shape[0], _CHUNK))


def _check_range(values, c: int, what: str) -> None:
    """Refuse ``values`` (component ids, host or device) outside ``[0, c)``. A load onto a
    GPU checks the whole arrays on the device at the end rather than each group on the host:
    at 2.5B edges the host's two passes over 10 GB of children were about 4 thread-seconds.

    >>> _check_range(np.array([0, 2], np.int32), 3, "ids")
    >>> _check_range(np.array([3], np.int32), 3, "ids")
    Traceback (most recent call last):
    ValueError: ids out of range
    """
    for _, part in _chunks(values):
        if int(part.min()) < 0 or int(part.max()) >= c:
            raise ValueError(f"{what} out of range")


def _ids(keys: list, kind: str) -> VertexIds:
    """The vertex ids of the row groups' keys (sorted and distinct: the digest has checked
    them): a range, with no key array kept, when the first and last keys span exactly as many
    keys as there are."""
    if not keys:
        return VertexIds.from_sorted_keys(pa.array([], pa.int64() if kind == "int" else pa.string()))
    total = sum(len(k) for k in keys)
    if kind == "int" and total:
        first = next(k[0].as_py() for k in keys if len(k))
        last = next(k[-1].as_py() for k in reversed(keys) if len(k))
        if last - first == total - 1:
            return VertexIds.of_range(first, total)
    return VertexIds.from_sorted_keys(pa.concat_arrays(keys))


def load(path, *, expect_fingerprint: str | None = None, xp=np,
         transfers: TransferSettings = TRANSFERS) -> IndexData:
    """Read an index written by :func:`~.writer.save`, with no recomputation, as arrays of
    ``xp`` (NumPy; CuPy to read straight onto the current GPU, through pinned buffers of
    ``transfers``).

    Refused with :class:`IndexFileError`: a missing, truncated, corrupt, foreign, older- or
    newer-format file, or one whose content digest does not match. With
    ``expect_fingerprint``, an index built from other edges is refused with
    :class:`StaleIndexError`.
    """
    path = Path(path)
    meta = read_metadata(path)
    if expect_fingerprint is not None and meta.fingerprint != expect_fingerprint:
        raise StaleIndexError(f"the index at {path} was built from different edges than the "
                              "current ones; rebuild it (grail_index(..., rebuild := true) in SQL "
                              "or grail_duckdb.build_index(...).save(path))")
    try:
        with open(path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return IndexReader(path, meta, mapped, xp, transfers).read()
            finally:
                _unmap(mapped)
    except (StaleIndexError, IndexFileError):
        raise
    except Exception as exc:
        raise IndexFileError(f"{path} is damaged ({exc}); delete it and rebuild the index") from exc


def _unmap(mapped: mmap.mmap) -> None:
    """Close a load's map of its file. A view of it that outlives the load (in a frame or a
    library's cache that only the collector frees) would make the close raise BufferError,
    and a load that read and checked every byte refused as damaged: the collector runs
    first, and a map still in use then goes with its last view."""
    try:
        mapped.close()
    except BufferError:
        gc.collect()
        try:
            mapped.close()
        except BufferError:
            pass
