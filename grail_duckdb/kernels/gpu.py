"""The GPU backend: :class:`GpuKernels`, the kernel interface over CuPy arrays, with the CUDA
sources in the repository's ``kernels/*.cu`` loaded as one ``cupy.RawModule``.

Each traversal of the build (trim, reach within a colour, colour propagation, topological
levels, the label passes) and the plain multi-query search is the level-synchronous frontier
form of its CPU twin and runs as one persistent cooperative kernel: the grid walks every level
itself and meets at ``grid.sync()``, so a DAG with thousands of levels costs one launch.
Whole-array steps (sorting the packed edges, prefix sums) are CuPy calls; the compaction of
sorted edges into rows is two plain launches. The constants and small functions shared with the
CPU twins come from :mod:`.shared` as a generated header. The query operations (the fused
classification, the bounded and the bidirectional search, with no grid barrier) live in
:mod:`.gpu_queries`, which this class inherits.

Thread safety: a launch's scratch (frontiers, counters, the edge-balanced scan) is allocated for
that launch; the instance keeps only the compiled module, its settings and the grid size of each
kernel (written under a lock). Launches from several host threads queue on the current stream;
query calls use a stream and reusable buffers of their own thread.

Running out of device memory raises :class:`grail_duckdb.errors.BackendError` with the size that
was needed; it never takes the process down.
"""
from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass

import cupy as cp
import numpy as np

from ..errors import BackendError
from ..resources import cuda_dir
from .gpu_paths import PATH_GROUPS, GpuPaths
from .gpu_queries import BLOCK as _BLOCK
from .gpu_append import GpuAppend
from .gpu_queries import BIDIR_GROUPS, GpuQueries
from .protocol import CSR, TopoOrder
from .shared import WINDOW as _ENCODE_WARP
from .shared import ORDER_BLOCK, cuda_header, order_params, pack_pairs, swap_pairs

#: source files of the module, in the order they are concatenated
_SOURCES = ("graph.cu", "scc.cu", "labels.cu", "search.cu", "classify.cu", "bidir.cu",
            "append.cu")
#: the source of the module launched plainly (not cooperatively): the load's page decoding
_PLAIN_SOURCE = "pages.cu"


_INT_MAX = np.iinfo(np.int32).max
_U64_MAX = np.uint64(np.iinfo(np.uint64).max)
#: the deep, narrow level sweeps (the label passes and trim)
_NARROW = frozenset({"trim_kernel", "levels_kernel", "parents_kernel", "sizes_kernel",
                     "post_kernel", "bounds_kernel", "hubs_kernel"})
_BALANCE_MODES = {"binned": 0, "edges": 1}
#: threads per block of ``pages_kernel`` (a block decodes a page at a time), and its
#: blocks at most
_PAGE_THREADS, _PAGE_GRID = 256, 4096
#: blocks of the page encoder's kernels at most (a warp each, with 8 KiB of hash slots)
_ENCODE_GRID = 1 << 14
#: packed edges per tile of the CSR compaction (PAIR_TILE in graph.cu)
_PAIR_TILE = 256 * 16


@dataclass(frozen=True)
class GpuSettings:
    """Tuning knobs of one :class:`GpuKernels` instance (the defaults measured best on an H200:
    docs/architecture.md, "GPU backend").

    ``balance`` / ``search_balance``: load balance of the build's traversals / of the query
    search, "binned" (thread / warp / grid by degree) or "edges" (prefix sum + binary search);
    ``blocks_per_sm``: cooperative blocks per SM for every kernel (None: as many as the
    device fits at once, at most 8); ``narrow_blocks_per_sm``: the cap for the deep, narrow level
    sweeps (fewer blocks, cheaper ``grid.sync()``; None: no cap); ``force_words``: fixes the
    search's words per vertex; ``max_words``: upper bound on them (64 * W queries per pass);
    ``query_batch``: pairs per batch of a query call (the reusable buffers of a thread hold
    its largest batch so far: about 42 bytes per pair on the device, 17 pinned on the host);
    ``search_scratch``: the device memory the exact search of deferred pairs may take, as a
    fraction of the index's footprint, and at least ``min_search_scratch`` bytes (taken only
    while such pairs are searched);
    ``bidir_rounds``: the rounds of the bidirectional search, ``(warps per pair, frontier
    capacity per side)``; the warps are the fewest a round takes (one whose scratch budget
    holds too few groups to fill the device takes more); a round's groups each take a hash
    set of 24 bytes per unit of capacity; a last round, one block per pair with a dense set
    of about 8.3 bytes per vertex, never overflows; ``wide_search``: ``(capacity, pairs)``, the
    pairs that a round of at least that capacity hands on, when at most that many, go to the
    label-pruned bitmask search on the whole grid instead of the later rounds (0 pairs: never);
    ``fill_first_round``: the first round's
    capacity grows (in powers of two, up to the second round's) while the scratch budget
    holds as many of its groups as the device runs at once; ``edge_levels``: the exact search
    reads the level of each edge's far end beside the edge (``QueryIndex.edge_levels``) and
    settles the edges the level cut excludes without reading their vertices' records;
    ``pack_survivors``: each warp of the exact search packs the edges the level cut leaves
    into shared memory and tests them against their records 32 at a time (kernels/bidir.cu),
    rather than where they lie among the excluded ones; ``host_below``: a query call of
    fewer pairs runs on the index's host copy (a launch and two copies cost more than the
    CPU kernels spend on a DuckDB chunk of 2,048 rows); ``path_rounds``: the rounds of the pair
    search of hops and paths, ``(warps per pair, set slots as a power of two)``
    (:mod:`.gpu_paths`), within ``path_scratch`` bytes of scratch; ``paths_settle_first``:
    hops and paths settle the pairs the cuts leave open by the index's exact search, and
    search only the reachable ones for their paths (else every open pair goes to the pair
    search, as on the CPU: :mod:`grail_duckdb.engine.paths`).
    """

    balance: str = "binned"
    search_balance: str = "edges"
    blocks_per_sm: int | None = None
    narrow_blocks_per_sm: int | None = 1
    force_words: int | None = None
    max_words: int = 64
    query_batch: int = 1 << 21
    search_scratch: float = 0.1
    min_search_scratch: int = 256 << 20
    bidir_rounds: tuple = ((1, 1 << 11), (4, 1 << 15), (8, 1 << 18), (8, 1 << 21))
    wide_search: tuple = (1 << 18, 64)
    fill_first_round: bool = True
    edge_levels: bool = True
    pack_survivors: bool = True
    host_below: int = 32_768
    path_rounds: tuple = ((1, 13), (8, 18), (8, 22))
    path_scratch: int = 2 << 30
    paths_settle_first: bool = True

    def __post_init__(self):
        if any(g not in BIDIR_GROUPS or c < 32 or c & (c - 1) for g, c in self.bidir_rounds):
            raise ValueError(f"bidir_rounds: (warps per pair in {BIDIR_GROUPS}, a power of "
                             f"two >= 32) each, got {self.bidir_rounds}")
        if not self.path_rounds or any(g not in PATH_GROUPS or not 4 <= b <= 26
                                       for g, b in self.path_rounds):
            raise ValueError(f"path_rounds: (warps per pair in {PATH_GROUPS}, set slots as a "
                             f"power of two 4..26) each, got {self.path_rounds}")
        for knob in (self.balance, self.search_balance):
            if knob not in _BALANCE_MODES:
                raise ValueError(f"load balance must be one of {sorted(_BALANCE_MODES)}, "
                                 f"got {knob!r}")


def _out_of_memory(fn):
    """Turn a CuPy out-of-memory error into a BackendError that says how much was needed."""

    @functools.wraps(fn)
    def wrapper(*args, **kw):
        try:
            return fn(*args, **kw)
        except cp.cuda.memory.OutOfMemoryError as exc:
            m = re.search(r"allocating ([\d,]+) bytes", str(exc))
            need = m.group(1) if m else "?"
            pool = cp.get_default_memory_pool()
            pool.free_all_blocks()
            raise BackendError(
                f"GPU out of memory in {fn.__name__}: {need} more bytes were needed "
                f"({exc}); free device memory or build with backend='cpu'") from exc
    return wrapper


class GpuKernels(GpuQueries, GpuPaths, GpuAppend):
    """Kernels over CuPy arrays; same methods, same results as ``CpuKernels``."""

    name = "gpu"
    xp = cp

    def __init__(self, settings: GpuSettings | None = None):
        self.settings = settings or GpuSettings()
        d = cuda_dir()
        code = cuda_header() + "\n".join((d / f).read_text() for f in _SOURCES)
        self._module = cp.RawModule(code=code, options=("-std=c++17", f"-I{d}"),
                                    enable_cooperative_groups=True)
        self._plain = cp.RawModule(code=cuda_header() + (d / _PLAIN_SOURCE).read_text(),
                                   options=("-std=c++17", f"-I{d}"))
        self._grids: dict[str, int] = {}
        self._grid_lock = threading.Lock()
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._functions: dict[str, object] = {}
        self._local = threading.local()

    def _function(self, name):
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = self._module.get_function(name)
        return fn

    # --- launching -------------------------------------------------------------------------
    def _grid(self, name, fn) -> int:
        """Blocks of a cooperative launch of ``name``: as many as fit on the device at once
        (within the settings' caps), or what a launch found to fit."""
        grid = self._grids.get(name)
        if grid is None:
            # the driver's count weighs every limit (registers, shared memory, barriers)
            per_sm = min(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                fn.kernel.ptr, _BLOCK, 0), 8)
            if self.settings.blocks_per_sm:
                per_sm = min(per_sm, self.settings.blocks_per_sm)
            elif self.settings.narrow_blocks_per_sm and name in _NARROW:
                per_sm = min(per_sm, self.settings.narrow_blocks_per_sm)
            grid = max(1, per_sm) * self._sms
        return grid

    def _launch(self, name, *args, balance=None, frontier=0):
        """Launch a kernel cooperatively. With ``balance`` ("binned" or "edges") the kernel
        advances frontiers of up to ``frontier`` vertices and gets the mode and, edge-balanced,
        its own scan scratch as its last two arguments."""
        fn = self._module.get_function(name)
        grid = self._grid(name, fn)
        while True:
            extra = ()
            if balance is not None:
                mode = _BALANCE_MODES[balance]
                scan = cp.empty(frontier + 2 + grid if mode else 1, cp.int64)
                extra = (np.int32(mode), scan)
            try:
                fn((grid,), (_BLOCK,), args + extra)
                if self._grids.get(name) != grid:
                    with self._grid_lock:
                        self._grids[name] = grid
                return
            except cp.cuda.driver.CUDADriverError as exc:
                if "COOPERATIVE_LAUNCH_TOO_LARGE" not in str(exc) or grid <= self._sms:
                    raise
                grid //= 2

    @staticmethod
    def _ctr():
        return cp.zeros(8, cp.int32)

    def _read_back(self, a) -> np.ndarray:
        """A small device array on the host, the wait for the kernels queued before it spent
        in a stream synchronization rather than in the copy: while a copy to pageable
        memory waited for the first label pass, the other threads' copies (a build's
        children written to its file) would wait too."""
        self.synchronize()
        return a.get()

    def synchronize(self):
        """Wait for queued device work (the engine's phase timer calls this)."""
        cp.cuda.get_current_stream().synchronize()

    # --- CSR -------------------------------------------------------------------------------
    @_out_of_memory
    def csr_of_pairs(self, pairs, n):
        """Sort the packed edges in place (CuPy's radix sort: the edges plus one buffer of
        scratch), then compact them in two launches over tiles of 4,096 pairs (kept edges per
        tile, then each kept target written at its rank, with the row starts)."""
        m = int(pairs.shape[0])
        indptr = cp.zeros(n + 1, cp.int64)
        if m == 0:
            return indptr, cp.empty(0, cp.int32)
        pairs.sort()
        tiles = -(-m // _PAIR_TILE)
        counts = cp.empty(tiles, cp.int64)
        self._launch("pairs_count_kernel", np.int64(m), pairs, counts)
        base = cp.cumsum(counts)
        total = int(base[-1])
        base -= counts
        del counts
        indices = cp.empty(total, cp.int32)
        self._launch("pairs_write_kernel", np.int64(m), pairs, base, np.int32(n), indptr,
                     indices)
        return indptr, indices

    def csr(self, src, dst, n):
        return self.csr_of_pairs(pack_pairs(cp, src, dst), n)

    def csr_both_ways(self, pairs, n):
        """The rows, then the halves swapped in place and the rows again: the one copy of
        the edges serves both sorts."""
        fwd = CSR(*self.csr_of_pairs(pairs, n))
        swap_pairs(cp, pairs)
        return fwd, CSR(*self.csr_of_pairs(pairs, n))

    @_out_of_memory
    def reverse(self, g: CSR):
        """Counts of in-edges, their running sum as row starts, then every edge written at its
        target's cursor: the output and 4 bytes per row of scratch (the packed edges and the
        sort of :meth:`csr_of_pairs` would take 16 bytes per edge)."""
        n, m = g.n, g.m
        indptr = cp.zeros(n + 1, cp.int64)
        indices = cp.empty(m, cp.int32)
        if m:
            self._launch("reverse_count_kernel", np.int64(m), g.indices, indptr)
            cp.cumsum(indptr, out=indptr)
            cursor = cp.zeros(n, cp.int32)
            self._launch("reverse_write_kernel", np.int32(n), g.indptr, g.indices, indptr,
                         cursor, indices)
        return indptr, indices

    @_out_of_memory
    def edge_levels(self, g: CSR, level):
        out = cp.empty(g.m, cp.int16)
        if g.m:
            self._launch("edge_levels_kernel", np.int64(g.m), g.indices, level, out)
        return out

    # --- condensation ----------------------------------------------------------------------
    @_out_of_memory
    def trim(self, fwd, rev, alive):
        n = alive.shape[0]
        if n == 0:
            return 0
        all_alive = int(bool(alive.all()))
        indeg = cp.zeros(n, cp.int32)
        outdeg = cp.zeros(n, cp.int32)
        state = cp.empty(n, cp.int32)
        queue = cp.empty(n, cp.int32)
        huge = cp.empty(2 * n, cp.int32)
        ctr = self._ctr()
        self._launch("trim_kernel", np.int32(n), np.int32(all_alive), fwd.indptr, fwd.indices,
                     rev.indptr, rev.indices, alive, indeg, outdeg, state, queue, huge, ctr,
                     balance=self.settings.balance, frontier=n)
        return int(ctr[6])

    @_out_of_memory
    def reach_within_colour(self, g, seeds, colour):
        n = colour.shape[0]
        state = cp.zeros(n, cp.int32)
        if n:
            self._launch("reach_kernel", np.int32(n), g.indptr, g.indices,
                         cp.asarray(seeds, cp.bool_), cp.asarray(colour, cp.int32), state,
                         cp.empty(n, cp.int32), cp.empty(n, cp.int32), self._ctr(),
                         balance=self.settings.balance, frontier=n)
        return state != 0

    @_out_of_memory
    def propagate_max_colour(self, g, colour):
        n = colour.shape[0]
        if n:
            self._launch("propagate_kernel", np.int32(n), g.indptr, g.indices, colour,
                         cp.zeros(n, cp.int32), cp.empty(n, cp.int32), cp.empty(n, cp.int32),
                         cp.empty(n, cp.int32), self._ctr(), balance=self.settings.balance, frontier=n)

    @_out_of_memory
    def rank_by_first_occurrence(self, label):
        n = label.shape[0]
        if n == 0:
            return cp.empty(0, cp.int32), 0
        first = cp.full(n, _INT_MAX, cp.int32)
        self._launch("first_kernel", np.int32(n), label, first)
        is_first = first[label] == cp.arange(n, dtype=cp.int32)
        rank = cp.cumsum(is_first, dtype=cp.int32) - 1
        out = rank[first[label]]
        return out.astype(cp.int32), int(rank[-1]) + 1

    def representatives(self, comp):
        # an atomic minimum per row (not a cooperative launch: a save runs this while the
        # build's label passes fill the device)
        n = comp.shape[0]
        rows = cp.arange(n, dtype=cp.int32)
        first = cp.full(n, _INT_MAX, cp.int32)  # components number fewer than rows
        cp.minimum.at(first, comp, rows)
        return first[comp] == rows

    @_out_of_memory
    def component_pairs(self, g, comp):
        out = cp.empty(g.m, cp.uint64)
        if g.m:
            self._launch("component_pairs_kernel", np.int32(g.n), np.int64(g.m), g.indptr,
                         g.indices, cp.asarray(comp, cp.int32), out)
        return out

    # --- labels ----------------------------------------------------------------------------
    def topological_levels(self, fwd: CSR, rev: CSR) -> TopoOrder:
        topo = self.acyclic_levels(fwd, rev)
        if topo is None:
            raise AssertionError("condensed graph is not acyclic")  # a bug, never user input
        return topo

    @_out_of_memory
    def acyclic_levels(self, fwd: CSR, rev: CSR) -> TopoOrder | None:
        n = fwd.n
        level = cp.zeros(n, cp.int32)
        order = cp.empty(n, cp.int32)
        offs = cp.zeros(n + 2, cp.int32)
        ctr = self._ctr()
        if n:
            self._launch("levels_kernel", np.int32(n), fwd.indptr, fwd.indices, rev.indptr,
                         cp.empty(n, cp.int32), level, order, offs, cp.empty(n, cp.int32), ctr,
                         balance=self.settings.balance, frontier=n)
        levels, seen = (int(x) for x in self._read_back(ctr[6:8]))
        if seen != n:
            return None
        return TopoOrder(level, order, offs[: levels + 1].copy())

    def largest_rows(self, g: CSR, count: int):
        return cp.argsort(-cp.diff(g.indptr), kind="stable")[:count]

    def _pick(self, kernel, rows, level, best):
        """One advance of ``kernel`` over every row of ``rows``, keeping each vertex's best
        neighbour (the smallest value) in ``best`` (its initial values: none yet)."""
        n = level.shape[0]
        if n:
            self._launch(kernel, np.int32(n), rows.indptr, rows.indices, level, best,
                         cp.empty(n, cp.int32), self._ctr(), balance=self.settings.balance,
                         frontier=n)
        return best

    @_out_of_memory
    def tree_parents(self, rev, level):
        parent = self._pick("parents_kernel", rev, level, cp.full(level.shape[0], _INT_MAX,
                                                                  cp.int32))
        parent[parent == _INT_MAX] = -1
        return parent

    @_out_of_memory
    def tree_children(self, fwd, level):
        best = self._pick("children_kernel", fwd, level, cp.full(level.shape[0], _U64_MAX,
                                                                 cp.uint64))
        child = (best & np.uint64(0xFFFFFFFF)).astype(cp.int32)
        child[best == _U64_MAX] = -1
        return child

    @_out_of_memory
    def subtree_sizes(self, parent, topo: TopoOrder):
        size = cp.ones(parent.shape[0], cp.int32)
        order, offs, levels = topo.order, topo.offsets, topo.levels
        if levels > 1:
            self._launch("sizes_kernel", np.int32(levels), order, offs, parent, size)
        return size

    @_out_of_memory
    def post_orders(self, parent, topo: TopoOrder, size, d, seed):
        n = parent.shape[0]
        order, offs, levels = topo.order, topo.offsets, topo.levels
        excl = cp.empty((n, d), cp.int32)
        key = cp.empty(n, cp.uint64)
        size64 = size.astype(cp.int64)
        n_blocks = (n + ORDER_BLOCK - 1) // ORDER_BLOCK
        inv = cp.empty(max(n_blocks, 1), cp.int64)
        for j in range(d):
            mask, a1, c, a2, shift, xr = order_params(n_blocks, j, seed)
            self._launch("block_rank_kernel", np.int64(n_blocks), *(np.uint64(x) for x in
                                                                   (mask, a1, c, a2, shift)),
                         inv)
            self._launch("sibling_keys_kernel", np.int32(n), parent, inv, np.uint64(xr), key)
            srt = cp.argsort(key)  # children grouped by parent, in label j's vertex order
            s = size64[srt]
            incl = cp.cumsum(s)
            par = key[srt] >> np.uint64(32)
            head = cp.searchsorted(par, par, side="left")
            excl[srt, j] = (incl - s - (incl[head] - s[head])).astype(cp.int32)
        post = cp.empty((n, d), cp.int32)
        if levels:
            self._launch("post_kernel", np.int32(levels), np.int32(d), order, offs, parent,
                         size, excl, post)
        return post

    @_out_of_memory
    def interval_bounds(self, fwd: CSR, topo: TopoOrder, post):
        n, d = post.shape
        inner = post.copy()
        outer = post.copy()
        order, offs, levels = topo.order, topo.offsets, topo.levels
        if levels:
            self._launch("bounds_kernel", np.int32(levels), np.int32(d), fwd.indptr,
                         fwd.indices, order, offs, inner, outer, cp.empty(n, cp.int32),
                         self._ctr())
        return inner, outer

    @_out_of_memory
    def hub_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of, words, first=None):
        n = hub_of.shape[0]
        down = cp.zeros((n, words), cp.uint64)
        up = cp.zeros((n, words), cp.uint64)
        order, offs, levels = topo.order, topo.offsets, topo.levels
        if n and words:
            self._launch("hubs_kernel", np.int32(n), np.int32(levels), np.int32(words),
                         fwd.indptr, fwd.indices, rev.indptr, rev.indices, order, offs,
                         cp.asarray(hub_of, cp.int32), cp.asarray(topo.level, cp.int32),
                         np.uint64(0) if first is None else cp.asarray(first, cp.int32),
                         down, up, cp.empty(n, cp.int32), self._ctr())
        return down, up

    def hub_and_window_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of, words, win_of,
                            win_words, first):
        return (*self.hub_bits(fwd, rev, topo, hub_of, words),
                *self.hub_bits(fwd, rev, topo, win_of, win_words, first))

    # --- queries (implemented in .gpu_queries; here they get the out-of-memory error) -------
    @_out_of_memory
    def answer_pairs(self, qi, ks, kt, valid, prune=True, budget=256):
        return self._answer_pairs(qi, ks, kt, valid, prune, budget)

    @_out_of_memory
    def search_pairs(self, qi, u, t, prune=True, words=1, checkpoint=None):
        return self._search_pairs(qi, u, t, prune, words, checkpoint)

    @_out_of_memory
    def bitmask_search(self, dag, lab, cs, ct, words=1, prune=True, budget=None):
        return self._bitmask_search(dag, lab, cs, ct, words, prune, budget)

    def place_pages(self, src, table, n_pages: int, kept: int, scratch, err) -> None:
        """Decode a row group's label pages and place their values, on the current stream
        (``pages_kernel`` in ``kernels/pages.cu``, one block per page; the CPU twin is
        :func:`.cpu.pages.page_values`): ``src`` the pages' bytes as they lie in the file,
        ``table`` one row per page (:data:`.shared.PAGE_COLUMNS`, the destination's device
        address last), ``kept`` the rows written (row r to element r, for r < kept),
        ``scratch`` room for the decompressed pages. A page that does not hold its values
        sets ``err[0]`` (read it once the stream is done)."""
        if n_pages:
            self._plain.get_function("pages_kernel")(
                (min(n_pages, _PAGE_GRID),), (_PAGE_THREADS,),
                (src, table, np.int32(n_pages), np.int64(kept), scratch, err))

    def parse_chunks(self, src, chunks, rest, records) -> None:
        """The LZ4 sequences of each chunk of pages, on the current stream
        (``parse_chunks_kernel`` in ``kernels/pages.cu``, a warp per chunk with its hash
        slots in shared memory; the CPU twin is :func:`.cpu.pages.parse_chunks`, whose
        arguments these are)."""
        n = int(chunks.shape[0])
        if n:
            self._plain.get_function("parse_chunks_kernel")(
                (min(n, _ENCODE_GRID),), (_ENCODE_WARP,), (src, chunks, np.int32(n), rest,
                                                           records))

    def emit_chunks(self, src, chunks, rest, records, places, out) -> None:
        """Each chunk's bytes at its place in its page's LZ4 block (``emit_chunks_kernel``,
        a warp per chunk; the CPU twin is :func:`.cpu.pages.emit_chunks`)."""
        n = int(chunks.shape[0])
        if n:
            self._plain.get_function("emit_chunks_kernel")(
                (min(n, _ENCODE_GRID),), (_ENCODE_WARP,), (src, chunks, np.int32(n), rest,
                                                           records, places, out))

    @_out_of_memory
    def edge_hash_sum(self, pairs):
        return self._hash_sum("hash_sum_kernel", cp.asarray(pairs, cp.uint64))

    @_out_of_memory
    def key_hash_sum(self, keys):
        return self._hash_sum("key_hash_sum_kernel", cp.asarray(keys, cp.int64))

    def _hash_sum(self, kernel: str, values) -> int:
        """The wrapping sum of mix64 over ``values`` (one launch, one uint64 back)."""
        out = cp.zeros(1, cp.uint64)
        if values.shape[0]:
            self._launch(kernel, np.int64(values.shape[0]), values, out)
        return int(self._read_back(out)[0])
