"""The CPU backend: :class:`CpuKernels`, the kernel interface over NumPy arrays.

The Numba twins of the CUDA sources live beside it, one module per source file:
:mod:`.graph` and :mod:`.rows` (``graph.cu`` and ``scc.cu``), :mod:`.labels` and :mod:`.hubs`
(``labels.cu``, with :mod:`.sweeps`), :mod:`.search` (``search.cu``), :mod:`.classify`
(``classify.cu``), :mod:`.bidir` (``bidir.cu``), :mod:`.paths` (``paths.cu``) and
:mod:`.append` (``append.cu``). All are
``nogil``: DuckDB's worker threads, which call the ``reaches`` UDF concurrently, are not
serialised by the GIL while a kernel runs.

Queries use every core within a call: a large batch is classified with ``prange`` over chunks
(one parallel region at a time: Numba's default thread pool is not safe for concurrent
parallel regions), and the deferred pairs are searched by a pool of threads, each running the
nogil bidirectional search on blocks of pairs taken from a shared counter (dynamic balance:
the cost of a pair varies by orders of magnitude). Batches under ``SERIAL_MAX`` pairs (DuckDB's
2,048-row chunks) run on the calling thread while other calls are running, so concurrent chunks
run side by side; a small batch while no two calls have overlapped lately (DuckDB on one
thread) is spread over every core too (:func:`_chunk_rows`).

The build runs its sweeps on every core too (:class:`CpuSettings`, :mod:`.cores`); the tree
sweeps take no PARALLEL_LOCK (none uses Numba's threads), so two chains of them run side by side.

Numba's OpenMP workers (the classification's region), between two regions, spin by default;
on a machine of few cores that other processes share (a laptop, a CI runner), a spinning
worker takes a core from the one still working. There, unless the process says otherwise
(``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``), they sleep instead; on a machine of more cores the
spin stays.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

#: machines of at most this many cores are taken as shared: OpenMP's workers sleep between
#: regions there (read when Numba first starts its workers)
SHARED_CORES = 4
if ((os.cpu_count() or 1) <= SHARED_CORES and "OMP_WAIT_POLICY" not in os.environ
        and "GOMP_SPINCOUNT" not in os.environ):
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import numpy as np  # noqa: E402

from ...growth import roomy, roomy_zeros
from ..host import PARALLEL_LOCK
from ..host.keys import or_bits, pieces_of, widened
from ..protocol import CSR, PairAnswers, TopoOrder, edge_levels_of
from ..shared import CHECK_EVERY, DEFERRED, LOOKUP_DENSE, LOOKUP_SORTED, N_STATUS, WIN_WORDS, pack_pairs
from . import (append, bidir, bounds, classify, graph, hubs, labels, levels, pages, rows, search,
               sweeps)
from .cores import cores, item_rows, on_threads
from .paths import CpuPaths

_EMPTY_I64, _EMPTY_I32 = np.empty(0, np.int64), np.empty(0, np.int32)
_EMPTY_U8 = np.empty(0, np.uint8)
_NO_WINDOWS = (np.zeros((0, WIN_WORDS), np.uint64), np.zeros((0, WIN_WORDS), np.uint64),
               np.zeros(0, np.int32))
#: batches of fewer pairs are classified on the calling thread alone
SERIAL_MAX = 16_384
#: rows per chunk of a parallel classification (a multiple of 8: chunks never share a byte)
CHUNK = 4_096
#: a smaller batch that runs alone is spread over every core from this many pairs on
ALONE_MIN = 1_024
#: machines of at most this many cores spread a batch on the package's threads, not Numba's
#: (``classify.answer_parallel`` costs seconds of a first run's compile), and a lone smaller
#: batch from ALONE_MIN_FEW pairs on (waking a thread costs more than a DuckDB chunk's work)
FEW_CORES = 4
ALONE_MIN_FEW = 8_192
#: rows per chunk, at least, of such a batch (a multiple of 8)
SMALL_CHUNK = 64
#: pairs per block of the threaded search (a thread takes one block at a time)
SEARCH_BLOCK = 8


class _InFlight:
    """How many ``answer_pairs`` calls are running, and when two last overlapped: ``with
    IN_FLIGHT as alone`` says whether the entering call may take every core, that is whether
    no two calls have overlapped for QUIET seconds. (DuckDB's threads hold the GIL in turns,
    so a chunk often enters while the others wait for the GIL: the count alone would send
    many chunks of a multi-threaded statement to parallel regions, measured slower.)"""

    QUIET = 0.25

    def __init__(self):
        self._lock = threading.Lock()
        self.calls = 0
        self.overlap_at = -1e9

    def __enter__(self) -> bool:
        now = time.monotonic()
        with self._lock:
            self.calls += 1
            if self.calls > 1:
                self.overlap_at = now
            return now - self.overlap_at > self.QUIET

    def __exit__(self, *exc) -> None:
        with self._lock:
            self.calls -= 1


IN_FLIGHT = _InFlight()


@dataclass(frozen=True)
class CpuSettings:
    """Tuning knobs of one :class:`CpuKernels` instance (results never depend on them).

    ``level_work``: the build's sweeps run level by level, each level shared by the cores,
    when the levels hold this many vertices and edges per core on average; else one sweep
    per core, the independent ones side by side. ``level_threads``: and when there are at
    least this many cores: on two the independent sweeps keep both busy already, and a core
    waiting at the end of a level for one that the system gave to another process (a shared
    machine) loses milliseconds. ``prefetch_degree``: the sweeps over graphs of at least
    this many edges per vertex prefetch the rows they will read, and the hubs' walks keep a
    record of both rows per vertex (on sparser graphs the rows are few and mostly in order:
    the prefetches and the records would cost more than the misses they save).
    """

    level_work: int = 64
    level_threads: int = 3
    prefetch_degree: int = 2


class CpuKernels(CpuPaths):
    """Kernels over NumPy arrays (see :class:`grail_duckdb.kernels.protocol.Kernels`).

    The only state is per-thread scratch for the search (handed back zeroed by every call),
    so concurrent calls from several threads never share memory they write.
    """

    name = "cpu"
    xp = np
    #: pairs per batch of a query call (a multiple of 8; a batch takes well under a second)
    query_batch = 1 << 18
    #: each batch's deferred pairs are searched after it: a threaded search has no fixed cost
    #: to share, and the call's progress learns the search's rate from the first batch on
    search_together = 1

    def __init__(self, threads: int | None = None, settings: CpuSettings | None = None):
        self.settings = settings or CpuSettings()
        self._local = threading.local()
        self.threads = int(threads or os.cpu_count() or 1)
        self._pool, self._pool_lock = None, threading.Lock()
        self._chunks = 4 * self.threads  # pieces of a parallel counting sort's input

    def synchronize(self) -> None:
        return None

    def query_labels(self, lab):
        return lab

    def _search_scratch(self, n, words):
        """Per-thread zeroed scratch for ``bitmask_search`` (which leaves it zeroed)."""
        cached = getattr(self._local, "scratch", None)
        if cached is None or cached[0].shape != (n, words):
            cached = (np.zeros((n, words), np.uint64), np.zeros((n, words), np.uint64),
                      np.zeros(n, np.bool_), np.zeros(n, np.bool_),
                      np.empty(n, np.int32), np.empty(n, np.int32))
            self._local.scratch = cached
        return cached

    # --- the save's label pages ------------------------------------------------------------
    def page_values(self, src, table, scratch, out) -> bool:
        """Decode pages into host bytes (:func:`.pages.page_values`, the twin of the GPU's
        ``place_pages``); False where a page does not hold its values."""
        return bool(pages.page_values(src, table, scratch, out))

    def parse_chunks(self, src, chunks, rest, records) -> None:
        """The LZ4 sequences of each chunk of pages (:func:`.pages.parse_chunks`)."""
        pages.parse_chunks(src, chunks, rest, records)

    def emit_chunks(self, src, chunks, rest, records, places, out) -> None:
        """Each chunk's bytes at its place in its page's block (:func:`.pages.emit_chunks`)."""
        pages.emit_chunks(src, chunks, rest, records, places, out)

    # --- CSR -------------------------------------------------------------------------------
    def csr_of_pairs(self, pairs, n):
        with PARALLEL_LOCK:
            return rows.csr_of_pairs(np.ascontiguousarray(pairs, np.uint64), n, self._chunks)

    def csr(self, src, dst, n):
        return self.csr_of_pairs(pack_pairs(np, src, dst), n)

    def csr_both_ways(self, pairs, n):
        pairs = np.ascontiguousarray(pairs, np.uint64)
        with PARALLEL_LOCK:
            if runs := rows.grouped_by_source(pairs):  # rows in place; pairs are consumed
                fwd = CSR(*rows.csr_of_runs(pairs, n, runs == rows.ROWS))
            else:
                fwd = CSR(*rows.csr_of_pairs(pairs, n, self._chunks))
            return fwd, CSR(*rows.reverse_rows(fwd.indptr, fwd.indices, self._chunks, pairs))

    def reverse(self, g: CSR):
        with PARALLEL_LOCK:
            return rows.reverse_rows(g.indptr, g.indices, self._chunks)

    def edge_levels(self, g: CSR, level):
        return graph.edge_levels(g.indices, level)

    # --- condensation ----------------------------------------------------------------------
    def trim(self, fwd: CSR, rev: CSR, alive):
        return int(graph.trim(fwd.indptr, fwd.indices, rev.indptr, rev.indices, alive))

    def reach_within_colour(self, g: CSR, seeds, colour):
        return graph.reach_within_colour(g.indptr, g.indices, seeds, colour)

    def propagate_max_colour(self, g: CSR, colour):
        graph.propagate_max_colour(g.indptr, g.indices, colour)

    def rank_by_first_occurrence(self, label):
        out, k = graph.rank_by_first_occurrence(label)
        return out, int(k)

    def representatives(self, comp):
        return graph.representatives(comp)

    def component_pairs(self, g: CSR, comp):
        return graph.component_pairs(g.indptr, g.indices, comp)

    # --- labels ----------------------------------------------------------------------------
    def topological_levels(self, fwd: CSR, rev: CSR) -> TopoOrder:
        topo = self.acyclic_levels(fwd, rev)
        if topo is None:
            raise AssertionError("condensed graph is not acyclic")  # a bug, never user input
        return topo

    def acyclic_levels(self, fwd: CSR, rev: CSR) -> TopoOrder | None:
        n = fwd.n
        level, order = roomy(np, (n,), np.int32), np.empty(n, np.int32)
        with PARALLEL_LOCK:
            way = levels.id_direction(fwd.indptr, fwd.indices)
            sweep = None
            if way:  # the ids are in a topological order (citation graphs often are)
                count = levels.levels_in_id_order(rev.indptr, rev.indices, level, way < 0)
                offsets = None
                sweep = np.arange(n, dtype=np.int32)
                if way < 0:  # the edges go to smaller ids: the parents come first
                    sweep = sweep[::-1].copy()
            else:
                offsets = np.empty(n + 2, np.int64)
                count, seen = labels.topological_levels(
                    fwd.indptr, fwd.indices, rev.indptr, np.empty(n, np.int32), level, order,
                    offsets, self._fetch(fwd), self._parts(None, fwd.m, n), self._chunks,
                    sweeps.LEVEL_PIECE * self.sweeps_on_one_core())
                if seen != n:
                    return None
                offsets = offsets[:count + 1].copy()
            offsets = levels.order_by_level(level, count, order, offsets)
        return TopoOrder(level, order, offsets, sweep)

    def _fetch(self, g: CSR) -> bool:
        """Whether the sweeps over ``g`` prefetch (``CpuSettings.prefetch_degree``)."""
        return g.m >= self.settings.prefetch_degree * g.n

    def _parts(self, topo: TopoOrder | None, edges: int, n: int | None = None) -> int:
        """How a sweep over ``topo``'s levels and ``edges`` edges shares the cores: 0, a core
        per independent sweep; else level by level, each level in up to that many pieces
        (``CpuSettings.level_work``, ``level_threads``). Without
        ``topo`` (Kahn's sweep, of ``n`` vertices, which no other sweep runs beside: shared
        from two cores on), as if it had one level."""
        threads = cores()
        if threads < (2 if topo is None else max(2, self.settings.level_threads)):
            return 0
        if topo is not None:
            work = topo.order.shape[0] + edges
            if work < self.settings.level_work * threads * topo.levels:
                return 0
        elif n + edges < self.settings.level_work * threads:
            return 0
        return sweeps.PIECES_PER_CORE * threads

    def sweeps_on_one_core(self) -> bool:
        """Whether each build sweep runs on one core (:meth:`_parts`): two may run at once."""
        return 1 < cores() < max(2, self.settings.level_threads)

    def largest_rows(self, g: CSR, count: int):
        return graph.largest_rows(g.indptr, int(count))

    def tree_parents(self, rev: CSR, level):
        parent = np.empty(level.shape[0], np.int32)
        with PARALLEL_LOCK:
            labels.tree_parents(rev.indptr, rev.indices, level, parent)
        return parent

    def subtree_sizes(self, parent, topo: TopoOrder):
        size = np.ones(parent.shape[0], np.int32)
        labels.subtree_sizes(parent, topo.order, topo.offsets, size, self._parts(topo, 0))
        return size

    def tree_children(self, fwd: CSR, level):
        child = np.empty(level.shape[0], np.int32)
        labels.tree_children(fwd.indptr, fwd.indices, level, child)
        return child

    def post_orders(self, parent, topo: TopoOrder, size, d, seed):
        n = parent.shape[0]
        post = roomy(np, (n, d), np.int32)  # the intervals' inner bounds
        labels.post_orders(parent, topo.order, topo.offsets, size, seed,
                           np.empty((min(cores(), d), n), np.int32), post, self._parts(topo, 0))
        return post

    def interval_bounds(self, fwd: CSR, topo: TopoOrder, post):
        outer = roomy(np, post.shape, post.dtype)
        with PARALLEL_LOCK:
            parts = self._parts(topo, fwd.m)
            walk = _walked(topo, parts)  # the ids' order needs no prefetch (measured slower)
            bounds.interval_bounds(fwd.indptr, fwd.indices, walk, topo.offsets, post, outer,
                                   parts, self._fetch(fwd) and walk is topo.order)
        return post, outer

    def hub_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of, words, first=None):
        first = np.zeros(0, np.int32) if first is None else np.asarray(first, np.int32)
        n = topo.level.shape[0]
        down, up = roomy_zeros(np, (n, words), np.uint64), roomy_zeros(np, (n, words), np.uint64)
        with PARALLEL_LOCK:
            hubs.hub_bits(fwd.indptr, fwd.indices, rev.indptr, rev.indices, topo.walk,
                            np.asarray(hub_of, np.int32), topo.level, first, down, up,
                            self._fetch(fwd))
        return down, up

    def hub_and_window_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of, words, win_of,
                            win_words, first):
        n = topo.level.shape[0]
        two = words == 2 and win_words == 2  # one walk a side (else the outputs are ORed)
        out = [roomy(np, (n, w), np.uint64) for w in (words, words, win_words, win_words)]
        if not two:
            for a in out:
                a.fill(0)
        records = two and self._fetch(fwd)  # see hubs._both_sweep
        rec = _aligned((2, n if records else 0, 4), np.uint64)
        base_of = np.empty((2, n if two else 0), np.int32)
        with PARALLEL_LOCK:
            parts = self._parts(topo, fwd.m)
            hubs.hub_and_window_bits(fwd.indptr, fwd.indices, rev.indptr, rev.indices,
                                       _walked(topo, parts), topo.offsets, np.asarray(hub_of, np.int32),
                                       np.asarray(win_of, np.int32), topo.level,
                                       np.asarray(first, np.int32), *out, rec, base_of,
                                       parts, self._fetch(fwd))
        return tuple(out)

    # --- queries ---------------------------------------------------------------------------
    def append_fold(self, rows: CSR, topo: TopoOrder, inner, outer, down, wdown, base, span):
        append.append_fold(rows.indptr, rows.indices, topo.order, inner, outer, down, wdown,
                           base, int(span))

    def gather_labels(self, lab, ids, inner, outer, down, wdown, base):
        windows = lab.win_down is not None and wdown.shape[1] > 0
        append.gather_labels(ids, lab.inner, lab.outer, lab.hub_down,
                             lab.win_down if windows else wdown,
                             lab.level if windows else _EMPTY_I32,
                             np.asarray(lab.win_first, np.int32) if windows else _EMPTY_I32,
                             inner, outer, down, wdown, base)

    def answer_pairs(self, qi, ks, kt, valid, prune=True, budget=256):
        ks, kt = widened(pieces_of(ks)), widened(pieces_of(kt))
        if len(ks) == 1:
            return self._answer_piece(qi, ks[0], kt[0], valid, prune, budget)
        starts = np.cumsum([0] + [a.shape[0] for a in ks])
        few = cores() <= FEW_CORES and starts[-1] >= ALONE_MIN_FEW  # items side by side
        tasks = _tasks(self.threads, len(ks), (0, 1, ks[0], kt[0])) if few else 1
        step = item_rows(int(starts[-1]), tasks, SERIAL_MAX)
        pieces = [(int(at) + i, a[i:i + step], b[i:i + step],
                   None if valid is None else valid[at + i:at + min(i + step, a.shape[0])])
                  for at, a, b in zip(starts, ks, kt) for i in range(0, a.shape[0], step)]
        on_threads(self._answer_pieces, tasks, qi, pieces, prune, budget, tasks > 1,
                   out := [None] * len(pieces))
        return _joined([(at, a.shape[0], part) for (at, a, _, _), part in zip(pieces, out)],
                       int(starts[-1]))

    def _answer_pieces(self, task, tasks, qi, pieces, prune, budget, serial, out):
        """Pieces task, task + tasks, ... of a call (``serial``: each on this thread alone)."""
        for i in range(task, len(pieces), tasks):
            at, a, b, valid = pieces[i]
            out[i] = self._answer_piece(qi, a, b, valid, prune, budget, serial)

    def _answer_piece(self, qi, ks, kt, valid, prune, budget, serial=False):
        """:meth:`answer_pairs` of one piece of keys (arrays of one key type and layout)."""
        nq = ks.shape[0]
        args = (ks, kt, _EMPTY_U8 if valid is None else valid.view(np.uint8),
                *_index_args(qi), bool(prune), int(budget))
        bits, codes = np.empty((nq + 7) >> 3, np.uint8), np.empty(nq, np.int8)
        with IN_FLIGHT as alone:
            large = nq >= SERIAL_MAX  # waits for the parallel region; a small batch never does
            least = ALONE_MIN if cores() > FEW_CORES else ALONE_MIN_FEW
            spread = not serial and (large or (alone and nq >= least and self.threads > 1
                                               and cores() > 1))
            if spread and PARALLEL_LOCK.acquire(blocking=large):
                try:
                    counts = _answer_spread(args, bits, codes, self.threads)
                finally:
                    PARALLEL_LOCK.release()
            else:
                counts = np.zeros(N_STATUS, np.int64)
                classify.answer_range(0, nq, *args, bits, codes, counts)
        rows = u = t = _EMPTY_I32
        if counts[DEFERRED]:
            rows = np.flatnonzero(codes == DEFERRED).astype(np.int32)
            u, t = classify.pair_components(rows, *args[:2], *args[3:9])
        return PairAnswers(bits, counts, (rows, u, t))

    def search_pairs(self, qi, u, t, prune=True, words=1, checkpoint=None):
        n = u.shape[0]
        if n == 0:
            return np.zeros(0, np.bool_)
        if not prune:  # the plain multi-source bitmask BFS (the bench's baseline)
            order = np.argsort(u, kind="stable")
            out = np.empty(n, np.bool_)
            out[order] = self.bitmask_search(qi.dag, qi.labels, u[order], t[order], words, False)
            return out
        out = np.zeros(n, np.bool_)
        edge_levels_of(self, qi)
        blocks = -(-n // SEARCH_BLOCK)
        work = _BlockWork(self, qi, u, t, out, blocks)
        workers = min(self.threads, blocks)
        if workers <= 1:
            work.run_here(checkpoint)
        else:
            work.run_on(self._executor(), workers, checkpoint)
        return out

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="grail-search")
            return self._pool

    def _bidir_scratch(self, n):
        """Per-thread scratch of the bidirectional search (``mark`` handed back zeroed)."""
        cached = getattr(self._local, "bidir", None)
        if cached is None or cached[0].shape[0] != n:
            cached = (np.zeros(n, np.int8),) + tuple(np.empty(max(n, 1), np.int32)
                                                     for _ in range(5))
            self._local.bidir = cached
        return cached

    def bitmask_search(self, dag: CSR, lab, cs, ct, words=1, prune=True):
        return search.bitmask_search(dag.indptr, dag.indices, lab.level, lab.inner, lab.outer,
                                     lab.tree, lab.hub_down, lab.hub_up, cs, ct, words, prune,
                                     *self._search_scratch(dag.n, words))

    # --- fingerprints ----------------------------------------------------------------------
    def edge_hash_sum(self, pairs):
        pairs = np.ascontiguousarray(pairs, np.uint64)
        with PARALLEL_LOCK:
            return int(graph.edge_hash_sum(pairs))

    def key_hash_sum(self, keys):
        with PARALLEL_LOCK:
            return int(graph.key_hash_sum(keys))


def _walked(topo: TopoOrder, parts: int):
    """The order a build's sweep walks: level by level (``parts`` > 0) ``topo.order``, else
    ``topo.walk`` (a sweep on one core needs no levels)."""
    return topo.order if parts else topo.walk


def _aligned(shape, dtype, align: int = 64):
    """An empty C-contiguous array whose data starts on an ``align``-byte boundary (rows of
    32 bytes never straddle two cache lines)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def _answer_spread(args, bits, codes, threads: int) -> np.ndarray:
    """A batch's counts, classified in chunks on every core (few cores: the package's threads)."""
    chunk = _chunk_rows(codes.shape[0], threads)
    if cores() > FEW_CORES:
        return classify.answer_parallel(*args, bits, codes, chunk).sum(0)
    per = np.zeros((-(-codes.shape[0] // chunk), N_STATUS), np.int64)
    tasks = _tasks(threads, per.shape[0], (0, chunk, *args, bits, codes, per[0]))
    on_threads(_answer_chunks, tasks, args, bits, codes, chunk, per)
    return per.sum(0)


def _tasks(threads: int, items: int, call) -> int:
    """Tasks for ``items`` pieces on the package's threads; one where ``answer_range`` runs its
    Python source for ``call`` (a failed one is undone by restoring its whole arrays)."""
    if not classify.answer_range.runs_compiled(call):
        return 1
    return max(1, min(threads, cores(), items))


def _answer_chunks(task, tasks, args, bits, codes, chunk: int, per) -> None:
    """Chunks task, task + tasks, ... of :func:`_answer_spread` (``per``: their counts)."""
    nq = codes.shape[0]
    for c in range(task, per.shape[0], tasks):
        lo = c * chunk
        classify.answer_range(lo, min(lo + chunk, nq), *args, bits, codes, per[c])


def _chunk_rows(nq: int, threads: int) -> int:
    """Rows per chunk of a batch spread over ``threads`` cores: four chunks a core (the
    bounded searches make some chunks dearer than others, and a batch of 25 equal chunks on
    16 cores would leave 7 idle for its second half), a multiple of 8, between SMALL_CHUNK
    and CHUNK.

    >>> _chunk_rows(2048, 16), _chunk_rows(2048, 2), _chunk_rows(100_000, 16), _chunk_rows(10**6, 16)
    (64, 256, 1568, 4096)
    """
    per = -(-nq // (4 * threads))
    return min(CHUNK, max(SMALL_CHUNK, (per + 7) & ~7))


def _joined(parts, nq: int) -> PairAnswers:
    """The answers of consecutive pieces ``(first row, rows, PairAnswers)`` of one batch of
    ``nq`` pairs as one."""
    bits = np.zeros((nq + 7) >> 3, np.uint8)
    counts = np.zeros(N_STATUS, np.int64)
    rows, us, ts = [], [], []
    for at, n, part in parts:
        or_bits(bits, at, part.bits, n)
        counts += part.counts
        r, u, t = part.deferred
        if r.shape[0]:
            rows.append(r + np.int32(at))
            us.append(u)
            ts.append(t)
    if not rows:
        return PairAnswers(bits, counts, (_EMPTY_I32, _EMPTY_I32, _EMPTY_I32))
    return PairAnswers(bits, counts, (np.concatenate(rows), np.concatenate(us),
                                      np.concatenate(ts)))


def _label_args(lab):
    """The label arrays in the order the query kernels take them."""
    return (lab.level, lab.inner, lab.outer, lab.tree, lab.hub_down, lab.hub_up)


def _index_args(qi) -> tuple:
    """What the classification reads of the index after the keys, in its order; made once
    per query index, so that a DuckDB chunk's call adds only its keys."""
    if qi.classify_args is None:
        lab, table, mode = qi.labels, qi.lookup_table, qi.lookup_mode
        windows = _NO_WINDOWS if lab.win_down is None else (
            lab.win_down, lab.win_up, np.asarray(lab.win_first, np.int32))
        qi.classify_args = (mode, qi.lookup_offset, qi.lookup_size,
                            table if mode == LOOKUP_DENSE else _EMPTY_I32,
                            table if mode == LOOKUP_SORTED else _EMPTY_I64,
                            _EMPTY_I32 if qi.comp is None else qi.comp, qi.dag.indptr,
                            qi.dag.indices, *_label_args(lab), *windows)
    return qi.classify_args


class _BlockWork:
    """The deferred pairs of one :meth:`CpuKernels.search_pairs` call, cut into blocks of
    SEARCH_BLOCK pairs that threads take from a shared counter until none is left or the call
    is stopped (``checkpoint`` raised in the calling thread)."""

    def __init__(self, kernels, qi, u, t, out, blocks):
        self.k, self.qi, self.u, self.t, self.out, self.blocks = kernels, qi, u, t, out, blocks
        self.next = itertools.count()
        self.done = 0
        self.stop = threading.Event()

    def _block(self, b, scratch):
        qi, lo = self.qi, b * SEARCH_BLOCK
        hi = min(lo + SEARCH_BLOCK, self.u.shape[0])
        bidir.bidir_block(self.u[lo:hi], self.t[lo:hi], qi.dag.indptr, qi.dag.indices,
                          qi.rev.indptr, qi.rev.indices, *qi.edge_levels,
                          *_label_args(qi.labels), True, *scratch, self.out[lo:hi])
        self.done += hi - lo  # read for progress only: an approximate count is enough

    def worker(self):
        scratch = self.k._bidir_scratch(self.qi.dag.n)
        while not self.stop.is_set():
            b = next(self.next)
            if b >= self.blocks:
                return
            self._block(b, scratch)

    def run_here(self, checkpoint):
        scratch = self.k._bidir_scratch(self.qi.dag.n)
        for b in range(self.blocks):
            self._block(b, scratch)
            if checkpoint is not None:
                checkpoint(self.done)

    def run_on(self, pool, workers, checkpoint):
        futures = [pool.submit(self.worker) for _ in range(workers)]
        try:
            if checkpoint is not None:
                checkpoint(self.done)
            while wait(futures, timeout=CHECK_EVERY).not_done:
                if checkpoint is not None:
                    checkpoint(self.done)
        except BaseException:
            self.stop.set()
            wait(futures)
            raise
        for f in futures:
            f.result()
