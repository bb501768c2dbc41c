"""The query half of the GPU backend: :class:`GpuQueries`, which
:class:`~grail_duckdb.kernels.gpu.GpuKernels` inherits (its methods there add the
out-of-memory error), over the CUDA sources ``kernels/classify.cu``, ``bidir.cu`` and
``search.cu``.

A call's batches go through one pass each: the keys are staged into a pinned buffer of the
calling thread (narrowed to int32 when they fit) and uploaded in one copy; the classification
(every cut) and the bounded search are queued on the thread's own stream; the status counts
and the answer bits come back in one copy and one sync. Pairs left over go to the
bidirectional search (one warp or one block per pair, rounds of growing scratch within
``search_scratch``); without the cuts, to the multi-query bitmask search.

Thread safety: each thread has its own stream and buffers (:class:`_QueryBuffers`); nothing
else is written between calls.
"""
from __future__ import annotations

import contextlib
import threading
import time
import weakref

import cupy as cp
import cupyx
import numpy as np

from .host import PARALLEL_LOCK, stage_pairs
from .host.keys import pieces_length
from .protocol import PairAnswers, edge_levels_of
from .records import record_labels, record_layout
from .shared import (CHECK_EVERY, DEFERRED, LOOKUP_DENSE, LOOKUP_IDS, LOOKUP_RANGE, LOOKUP_SORTED,
                     N_STATUS)

#: threads per block of every launch
BLOCK = 256
#: warps per pair that the bidirectional search's rounds may take (kernels/bidir.cu)
BIDIR_GROUPS = (1, 2, 4, 8)
#: int32 slots before the answer bits in a batch's result buffer (the status counts)
_COUNTS = 16
#: batch shapes per thread whose captured CUDA graph is kept
GRAPHS = 8
#: a thread's buffers hold a whole number of this many pairs (about 42 device bytes a pair)
BUFFER_STEP = 1 << 15
#: host-to-device / device-to-host kinds of cudaMemcpyAsync
_H2D, _D2H = 1, 2
#: device bytes per component of the grid-wide search besides its three words of bits per 64
#: pairs: six int32 arrays (:meth:`GpuKernels._bitmask_search`), its scan's int64, and room
WIDE_BYTES = 40
#: what a cancelled round's work counter is set to (every byte 0x7f: past any pair count)
_PAST_EVERY_PAIR = 0x7F
#: cudaLimitMaxL2FetchGranularity (cudaDeviceSetLimit)
_L2_FETCH = 0x05
#: the devices whose L2 fetch granularity this process has set; guarded by _FETCH_LOCK
_FETCH_SET: set = set()
_FETCH_LOCK = threading.Lock()


@contextlib.contextmanager
def whole_line_fetches():
    """The current device's L2 fetch granularity (``cudaLimitMaxL2FetchGranularity``, a
    hint: how much an L2 miss brings) at a whole 128-byte line for the exact searches run
    in it. The search's reads are random: a label record is one line, and a row's edges, its
    pointers and a group's scratch lie near each other (10M random pairs 7% faster on the
    2.5B-edge citation graph than at the default 64 bytes, 1-3% at 250M edges, H200; 32 bytes
    was 12% slower). Set at the process's first search on a device and kept: a limit holds
    for this process's context alone, and setting it and back costs about 0.4 ms on an H200,
    more than the search of a DuckDB chunk's few deferred pairs."""
    dev = cp.cuda.Device().id
    if dev not in _FETCH_SET:
        with _FETCH_LOCK:
            if dev not in _FETCH_SET:
                cp.cuda.runtime.deviceSetLimit(_L2_FETCH, 128)
                _FETCH_SET.add(dev)
    yield


class GpuQueries:
    """The query operations of the kernel interface on the GPU (see
    :class:`grail_duckdb.kernels.protocol.Kernels`). Needs from its subclass ``settings``,
    ``_function(name)``, ``_grid(name, fn)`` and ``_launch(...)``."""

    _local: threading.local
    #: deferred pairs kept across a call's batches before they are searched together: a
    #: search's last rounds take the few pairs that outgrow the first one and leave most of
    #: the GPU idle, so fewer, larger searches waste less
    search_together = 1 << 22

    @property
    def query_batch(self) -> int:
        """Pairs per batch of a query call (a multiple of 32: batches own whole answer words)."""
        return max(32, self.settings.query_batch // 32 * 32)

    def query_labels(self, lab):
        """``lab`` packed into one record per component on the device (:mod:`.records`)."""
        if lab.record is not None:
            return lab
        packed = record_labels(cp, lab)
        cp.cuda.runtime.deviceSynchronize()  # made before other streams read it
        return packed

    def _label_args(self, lab):
        """The label arguments of every query kernel (``LABEL_PARAMS`` in kernels/search.cu):
        the labels as one record per component (:mod:`.records`), the levels alone (the
        classification's first cut), the record's stride in ints, the offsets of its trees
        and of its hub words, d and the hub words per side, then the window hubs' rows, their
        table of levels, words per side and the table's last index (null pointers and 0 when
        there are none). An index's labels carry their record (:meth:`query_labels`); others,
        a direct caller's, are packed for the call."""
        lab = self.query_labels(lab)
        hw = int(lab.hub_down.shape[1])
        tree_at, hub_at, stride = record_layout(lab.d, hw)
        none = lab.win_down is None
        return (lab.record, lab.level, np.int32(stride), np.int32(tree_at), np.int32(hub_at),
                np.int32(lab.d), np.int32(hw), *((np.uint64(0),) * 3 if none else (
                    lab.win_down, lab.win_up, lab.win_first)),
                np.int32(0 if none else lab.win_down.shape[1]),
                np.int32(0 if none else lab.win_first.shape[0] - 1))

    def release_buffers(self) -> None:
        """Drop this thread's query buffers (its next call makes them anew)."""
        self._local.query = None

    def _buffers(self, nq) -> "_QueryBuffers":
        """This thread's reusable query buffers, large enough for a batch of nq pairs (made
        anew, for a whole number of BUFFER_STEP pairs, when a batch outgrows them)."""
        buf = getattr(self._local, "query", None)
        if buf is None or buf.capacity < nq:
            buf = self._local.query = _QueryBuffers(-(-max(nq, 1) // BUFFER_STEP) * BUFFER_STEP)
        return buf

    def _answer_pairs(self, qi, ks, kt, valid, prune=True, budget=256):
        """One batch on the device: the keys (arrays or tuples of pieces of any key type and
        layout: :mod:`.host.keys`) staged into this thread's pinned buffer and uploaded in one
        copy, the classification and the bounded search queued on the thread's stream, the
        counts and answer bits downloaded in one copy, one sync. A batch of a shape this
        thread has run before replays that work as a captured CUDA graph
        (:meth:`_QueryBuffers.replay`)."""
        nq = pieces_length(ks)
        buf = self._buffers(nq)
        words = (nq + 31) >> 5
        qi.labels = self.query_labels(qi.labels)  # packed here once: never in a captured graph
        narrow_from = {LOOKUP_DENSE: qi.lookup_offset, LOOKUP_RANGE: qi.lookup_offset,
                       LOOKUP_IDS: 0}.get(qi.lookup_mode)
        wide = stage_pairs(ks, kt, buf.host_keys, narrow_from, PARALLEL_LOCK, valid)
        if valid is not None:
            buf.host_valid[:nq] = valid
        shape = (nq, wide, valid is not None, bool(prune), int(budget))
        buf.after_current()
        if not buf.replay(qi, shape, self._enqueue_batch):
            self._enqueue_batch(qi, buf, *shape)
            buf.stream.synchronize()
        counts = buf.host_result[:N_STATUS].astype(np.int64)
        bits = buf.host_result[_COUNTS:_COUNTS + words].view(np.uint8)[:(nq + 7) >> 3].copy()
        nd = int(counts[DEFERRED])
        return PairAnswers(bits, counts, (buf.def_row[:nd], buf.def_u[:nd], buf.def_t[:nd]))

    def _enqueue_batch(self, qi, buf, nq, wide, has_valid, prune, budget):
        """Queue a staged batch's device work on ``buf.stream``: the upload, the
        classification, the bounded search and the download of counts and bits. Nothing
        here allocates or syncs, so it can be captured as a graph."""
        table = qi.lookup_table
        sorted_keys = table if qi.lookup_mode == LOOKUP_SORTED else np.uint64(0)
        dense = table if qi.lookup_mode == LOOKUP_DENSE else np.uint64(0)
        offset = qi.lookup_offset if wide else 0
        stream, rt = buf.stream, cp.cuda.runtime
        with stream:
            rt.memcpyAsync(buf.keys.data.ptr, buf.host_keys.ctypes.data, (16 if wide else 8) * nq,
                           _H2D, stream.ptr)
            valid_arg = np.uint64(0)
            if has_valid:
                rt.memcpyAsync(buf.valid.data.ptr, buf.host_valid.ctypes.data, nq, _H2D,
                               stream.ptr)
                valid_arg = buf.valid
            rt.memsetAsync(buf.result.data.ptr, 0, 4 * _COUNTS, stream.ptr)
            if nq:
                counts = buf.result[:_COUNTS]
                bits = buf.result[_COUNTS:]
                labs = self._label_args(qi.labels)
                fn = self._function("classify_kernel")
                grid = min(self._grid("classify_kernel", fn), -(-nq // BLOCK))
                fn((grid,), (BLOCK,), (
                    np.int32(nq), buf.keys, np.int32(wide), valid_arg, np.int32(qi.lookup_mode),
                    np.int64(offset), np.int64(qi.lookup_size), dense, sorted_keys,
                    np.uint64(0) if qi.comp is None else qi.comp, *labs, np.int32(prune),
                    bits, counts, buf.und_row, buf.und_u, buf.und_t, buf.def_row, buf.def_u,
                    buf.def_t))
                if prune:
                    fn = self._function("probe_kernel")
                    grid = min(self._grid("probe_kernel", fn), -(-nq // BLOCK))
                    fn((grid,), (BLOCK,), (
                        buf.und_row, buf.und_u, buf.und_t, qi.dag.indptr, qi.dag.indices,
                        *labs, np.int32(budget), bits, counts, buf.def_row, buf.def_u,
                        buf.def_t))
            words = (nq + 31) >> 5
            rt.memcpyAsync(buf.host_result.ctypes.data, buf.result.data.ptr,
                           4 * (_COUNTS + words), _D2H, stream.ptr)

    def _search_pairs(self, qi, u, t, prune=True, words=1, checkpoint=None):
        """The deferred pairs, on this thread's stream: with ``prune``, the bidirectional
        search (one warp per pair, rounds of growing scratch within ``search_scratch`` of the
        footprint); without, the plain multi-source bitmask BFS, sorted by source (pairs of one
        source share a pass)."""
        n = int(u.shape[0])
        if n == 0:
            return np.zeros(0, np.bool_)
        with self._buffers(1).after_current():
            if prune:
                with whole_line_fetches():
                    return self._bidir(qi, u, t, checkpoint=checkpoint)
            order = cp.argsort(u)
            found = self.bitmask_search(qi.dag, qi.labels, u[order], t[order], words, False)
            out = cp.empty(n, cp.bool_)
            out[order] = found
            return out.get()

    @staticmethod
    def _bidir_bytes(mode, cap, n):
        """Scratch bytes of one group of the bidirectional search (layout: kernels/bidir.cu)."""
        if mode == 0:
            return 24 * cap
        return ((((n + 15) >> 4) * 4 + 15) & ~15) + 8 * n

    def _bidir(self, qi, u, t, trace=None, checkpoint=None):
        """Rounds of the bidirectional search (``bidir_rounds``, then a dense round): each
        round's groups take the pairs the last one handed back (a sync per round to read how
        many); host bool answers. The few pairs that a large round hands on go to the grid-wide
        search instead (:meth:`_wide`). ``trace``, a list, gets one ``(warps per pair, mode,
        cap, groups, pairs in, pairs left, seconds)`` per round (mode 2: the grid-wide
        search). ``checkpoint(done)`` is called while each round runs (:meth:`_await_round`),
        so that a round of millions of pairs (seconds at billions of edges) reports progress
        and stops when the call is cancelled."""
        npairs, nv = int(u.shape[0]), qi.dag.n
        out = cp.zeros(npairs, cp.uint8)
        budget = max(int(self.settings.search_scratch * qi.footprint),
                     self.settings.min_search_scratch)
        dense = self._bidir_bytes(1, nv, nv)
        lists = cp.empty((2, npairs), cp.int32)
        ctr = cp.zeros(2, cp.int32)
        ids, pending, r = np.uint64(0), npairs, 0
        labs = self._label_args(qi.labels)
        levels = (edge_levels_of(self, qi) if self.settings.edge_levels
                  else (np.uint64(0), np.uint64(0)))
        plan = []  # (warps, mode, cap, bytes per group, groups at most)
        for g, mode, cap in [(g, 0, c) for g, c in self._bidir_rounds(budget)] + [(8, 1, nv)]:
            per = self._bidir_bytes(mode, cap, nv)
            if mode == 0 and per >= dense:
                continue  # the dense set is no larger: go straight to it
            g = self._group_warps(g, min(budget // per, npairs))
            plan.append((g, mode, cap, per, max(1, min(budget // per, self._groups_at_once(g)))))
        # one buffer for the hashed rounds, zeroed before each, so that the pool keeps one
        # block rather than one per round size (the dense round may need a larger one)
        scratch = cp.empty(max((min(most, npairs) * per for g, mode, cap, per, most in plan
                                if mode == 0), default=0), cp.uint8)
        for g, mode, cap, per, most in plan:
            name = f"bidir_g{g}_kernel"
            fn = self._function(name)
            groups_per_block = BLOCK // 32 // g
            groups = min(most, pending)
            t0 = time.perf_counter()
            if scratch.nbytes < groups * per:
                scratch = None  # back to the pool before the larger one is taken
                scratch = cp.empty(groups * per, cp.uint8)
            scratch[:groups * per].fill(0)
            ctr.fill(0)
            over = lists[r % 2]  # the other list holds this round's ids
            r += 1
            fn((-(-groups // groups_per_block),), (BLOCK,), (
                np.int32(pending), ids, u, t, np.int32(nv), qi.dag.indptr, qi.dag.indices,
                qi.rev.indptr, qi.rev.indices, *levels, *labs, np.int32(mode), np.int32(cap),
                scratch, np.int64(per), np.int32(groups), out, ctr[0:1], ctr[1:2], over,
                np.int32(self.settings.pack_survivors)))
            if checkpoint is not None:
                self._await_round(ctr, npairs - pending, pending, groups, checkpoint)
            left = int(ctr[1])
            if trace is not None:
                trace.append((g, mode, cap, groups, pending, left, time.perf_counter() - t0))
            pending = left
            if pending == 0:
                break
            ids = over[:pending]
            if mode == 0 and self._goes_wide(cap, pending, nv):
                self._wide(qi, u, t, ids, out, trace)
                break
        return out.get().astype(np.bool_)

    def _goes_wide(self, cap, pending, n) -> bool:
        """Whether the ``pending`` pairs that a round of capacity ``cap`` handed on go to the
        grid-wide search (``wide_search``) rather than to the next rounds: when few enough,
        and when its scratch for ``n`` components is free on the device (the next rounds keep
        within the search's budget)."""
        after, most = self.settings.wide_search
        if most <= 0 or cap < after or pending > most:
            return False
        words = self.search_words(n, pending, -(-pending // 64), 0)  # as the search takes
        return (WIDE_BYTES + 24 * words) * n <= self._free_device_bytes()

    @staticmethod
    def _free_device_bytes() -> int:
        """Device memory free now: the driver's, and the blocks CuPy's pool holds unused."""
        return cp.cuda.runtime.memGetInfo()[0] + cp.get_default_memory_pool().free_bytes()

    def _wide(self, qi, u, t, ids, out, trace=None):
        """The pairs ``ids`` of (u, t) answered into ``out`` by the label-pruned bitmask search
        on the whole grid (a bit per pair, one pass of 64 * W): the few that outgrow a large
        round each need a search of millions of vertices, which a group of 8 warps runs a
        level at a time while the rest of the device idles."""
        t0 = time.perf_counter()
        cs, ct = u[ids], t[ids]
        order = cp.argsort(cs)
        found = self.bitmask_search(qi.dag, qi.labels, cs[order], ct[order],
                                    -(-int(ids.shape[0]) // 64), True)
        out[ids[order]] = found.astype(cp.uint8)
        if trace is not None:
            trace.append((0, 2, qi.dag.n, 1, int(ids.shape[0]), 0, time.perf_counter() - t0))

    @staticmethod
    def _await_round(ctr, answered, pending, groups, checkpoint):
        """Wait for the search round just queued on the current stream (``ctr``: its work
        counter, the pairs taken so far, and its hand-on counter), calling
        ``checkpoint(done)`` at once and every ``CHECK_EVERY`` seconds with an estimate of the
        pairs answered (``answered`` before the round, plus those of its ``pending`` that the
        round's ``groups`` have taken and left). When the checkpoint raises (the call was
        cancelled), the work counter is set past every pair from another stream: each group
        finishes the pair it holds (leaving its scratch zero) and leaves, the round ends
        within a pair's time, and the exception goes on."""
        finished = cp.cuda.Event(disable_timing=True)
        finished.record()
        side = cp.cuda.Stream(non_blocking=True)
        seen = np.zeros(2, np.int32)
        try:
            checkpoint(answered)
            last = time.perf_counter()
            while not finished.done:
                time.sleep(0.001)
                if time.perf_counter() - last >= CHECK_EVERY:
                    cp.cuda.runtime.memcpyAsync(seen.ctypes.data, ctr.data.ptr, 8, _D2H,
                                                side.ptr)
                    side.synchronize()
                    taken = min(max(int(seen[0]) - groups, 0), pending)
                    checkpoint(answered + max(taken - int(seen[1]), 0))
                    last = time.perf_counter()
        except BaseException:
            cp.cuda.runtime.memsetAsync(ctr.data.ptr, _PAST_EVERY_PAIR, 4, side.ptr)
            finished.synchronize()
            raise

    def _bidir_rounds(self, budget):
        """The rounds of the search (``settings.bidir_rounds``), the first one's capacity
        doubled (``fill_first_round``) while the budget still holds as many of its groups as
        the device runs at once, up to the second round's, whose place it then takes along
        with every round it outgrew. A pair handed on is searched again from scratch, so a
        first round as wide as memory allows wastes the least."""
        rounds = list(self.settings.bidir_rounds)
        if not self.settings.fill_first_round or len(rounds) < 2:
            return rounds
        g, first = rounds[0]
        at_once, cap = self._groups_at_once(g), first
        while cap < rounds[1][1] and self._bidir_bytes(0, 2 * cap, 0) * at_once <= budget:
            cap *= 2
        if cap == first:
            return rounds
        return [(g, cap)] + [r for r in rounds[1:] if r[1] > cap]

    def _groups_at_once(self, g):
        """Groups of g warps per pair that the device runs at once."""
        name = f"bidir_g{g}_kernel"
        return self._grid(name, self._function(name)) * (BLOCK // 32 // g)

    def _group_warps(self, g, fit):
        """The warps per pair of a round asked for ``g``, when it can run ``fit`` groups at
        most (the pairs it may take, and the groups its scratch budget holds): g, doubled (up
        to a block) while ``fit`` is short of the groups the device runs at once at that
        size, so that a round limited by its memory or its pairs (a DuckDB chunk's few)
        gives each more warps rather than leaving warps idle."""
        while g < BLOCK // 32 and fit < self._groups_at_once(g):
            g *= 2
        return g

    def search_words(self, n, nq, words, budget):
        """Words per vertex for the search: as many as the memory budget allows (three arrays
        of n * W 64-bit words), at least ``words``, at most what the queries need."""
        fit = budget // max(24 * n, 1)
        need = -(-nq // 64)
        if self.settings.force_words:
            return int(max(1, min(self.settings.force_words, need)))
        return int(max(1, min(max(words, fit), need, self.settings.max_words)))

    def _bitmask_search(self, dag, lab, cs, ct, words=1, prune=True, budget=None):
        n, nq = dag.n, cs.shape[0]
        ans = cp.zeros(nq, cp.bool_)
        if nq == 0:
            return ans
        if budget is None:
            footprint = dag.nbytes + sum(int(a.nbytes) for a in lab.arrays().values())
            budget = 2 * footprint + (256 << 20)
        W = self.search_words(n, nq, int(words), budget)
        seen = cp.zeros(n * W, cp.uint64)
        pend0 = cp.zeros(n * W, cp.uint64)
        pend1 = cp.zeros(n * W, cp.uint64)
        ints = [cp.zeros(n, cp.int32) for _ in range(2)] + [cp.empty(n, cp.int32)
                                                            for _ in range(4)]
        self._launch("search_kernel", np.int32(n), dag.indptr, dag.indices,
                     *self._label_args(lab), np.int32(nq), cp.asarray(cs, cp.int32),
                     cp.asarray(ct, cp.int32), np.int32(W), np.int32(bool(prune)), ans, seen,
                     pend0, pend1,
                     cp.zeros(W, cp.uint64), *ints, self._ctr(),
                     balance=self.settings.search_balance, frontier=n)
        return ans



class _QueryBuffers:
    """One thread's reusable buffers of the query path, for batches of up to ``capacity``
    pairs: its own non-blocking stream, pinned host staging (keys in, counts and answer bits
    out) and the device buffers the kernels read and write. Only the thread that owns them
    uses them, and each batch syncs before its results are read, so nothing is shared."""

    def __init__(self, capacity: int):
        cap = int(capacity)
        self.capacity = cap
        self.stream = cp.cuda.Stream(non_blocking=True)
        words = (cap + 31) >> 5
        self.host_keys = cupyx.empty_pinned(16 * cap, np.uint8)  # int64 or int32 keys
        self.host_valid = cupyx.empty_pinned(cap, np.uint8)
        self.host_result = cupyx.empty_pinned(_COUNTS + words, np.int32)
        self.keys = cp.empty(16 * cap, cp.uint8)
        self.valid = cp.empty(cap, cp.uint8)
        self.result = cp.empty(_COUNTS + words, cp.int32)
        lists = cp.empty((6, cap), cp.int32)
        self.und_row, self.und_u, self.und_t, self.def_row, self.def_u, self.def_t = lists
        self._graphs: dict = {}  # batch shape -> (weak ref to its QueryIndex, graph or None)

    def after_current(self) -> "cp.cuda.Stream":
        """The thread's stream, made to wait for the work queued so far on the current one
        (the labels a build or their packing made, the caller's uploads): a non-blocking
        stream does not wait for the default stream by itself, and reading arrays whose
        copies are still on their way answered False for every pair of a search."""
        from .gpu_transfers import mark  # (it imports this module)

        self.stream.wait_event(mark())
        return self.stream

    def replay(self, qi, shape, enqueue) -> bool:
        """Run a batch of ``shape`` (its keys staged) from a captured CUDA graph and wait for
        it; False when there is none yet. The first batch of a shape for an index runs
        uncaptured and is remembered; the second captures the stream work into a graph
        (the same pointers: these buffers, the index's arrays), this one and the later
        ones replay it: one launch instead of a copy, a memset, two kernels with 27
        arguments and a copy. At most ``GRAPHS`` shapes are kept per thread. ``enqueue(qi,
        self, *shape)`` queues the work on this thread's stream."""
        if shape[0] == 0:
            return False
        entry = self._graphs.get(shape)
        if entry is not None and entry[0]() is not qi:
            entry = None  # another index (or a new one at a reused address)
        if entry is None:
            if len(self._graphs) >= GRAPHS:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[shape] = (weakref.ref(qi), None)
            return False
        graph = entry[1]
        if graph is False:
            return False  # this shape could not be captured: it runs uncaptured
        if graph is None:
            graph = self._capture(lambda: enqueue(qi, self, *shape))
            self._graphs[shape] = (entry[0], graph)
            if graph is False:
                return False
        graph.launch(self.stream)
        self.stream.synchronize()
        return True

    def _capture(self, enqueue):
        """The work ``enqueue()`` queues on this thread's stream as a graph, or False where
        the stream cannot be captured (the work is then not run: the caller runs it)."""
        try:
            self.stream.begin_capture()
        except Exception:  # noqa: BLE001 - a runtime without stream capture
            return False
        try:
            enqueue()
        except Exception:
            self.stream.end_capture()
            raise
        return self.stream.end_capture()
