"""GPU twins of the kernels: CUDA sources in ``kernels/*.cu``, loaded with ``cupy.RawModule``.

:class:`GpuKernels` implements every method of :class:`grail_duckdb.kernels.CpuKernels` over
CuPy arrays with identical results. Each traversal (trim, reach within a colour, colour
propagation, topological levels, the label passes, the query search) is the level-synchronous
frontier form of its CPU twin and runs as one persistent cooperative kernel: the grid walks every
level itself and meets at ``grid.sync()``, so a DAG with thousands of levels costs one launch.
Whole-array steps (sorting edges into rows, removing duplicate targets, prefix sums) are CuPy
calls.

Running out of device memory raises :class:`grail_duckdb.errors.BackendError` with the size that
was needed; it never takes the process down.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import cupy as cp
import cupyx
import numpy as np

from ..errors import BackendError
from .cpu import ORDER_BLOCK, order_params  # the vertex order of each label, on the host

#: source files of the module, in the order they are concatenated
_SOURCES = ("graph.cu", "scc.cu", "labels.cu", "search.cu")
_BLOCK = 256
_INT_MAX = np.iinfo(np.int32).max
#: upper bound on the search's words per vertex (64 * W queries per pass)
MAX_WORDS = 64
#: load balance of the build's traversals: "binned" (thread / warp / grid by degree) or
#: "edges" (edge-balanced: prefix sum + binary search). Measured on the device (README, GPU
#: backend): binned wins the build's many narrow levels, edge-balanced the query search.
BALANCE = "binned"
#: load balance of the query search (same choices)
SEARCH_BALANCE = "edges"
#: cooperative blocks per SM (None: as many as the registers allow, at most 8); fewer blocks
#: make grid.sync() cheaper on deep, narrow level sweeps
BLOCKS_PER_SM: int | None = None
#: blocks per SM of the deep, narrow level sweeps (the label passes and trim): fewer blocks,
#: cheaper grid.sync(); 1 measured best on the device (README, GPU backend). None: no cap.
NARROW_BLOCKS_PER_SM: int | None = 1
_NARROW = frozenset({"trim_kernel", "levels_kernel", "parents_kernel", "sizes_kernel",
                     "post_kernel", "bounds_kernel", "hubs_kernel"})
#: fixes the search's words per vertex (for tuning); None: chosen from the memory budget
FORCE_WORDS: int | None = None


def kernel_dir() -> Path:
    """The folder of the CUDA sources: ``<repo>/kernels`` in a checkout, else the installed
    ``grail_duckdb/_cuda`` (pyproject force-includes the folder there)."""
    pkg = Path(__file__).resolve().parent.parent
    for cand in (pkg.parent / "kernels", pkg / "_cuda"):
        if (cand / "common.cuh").is_file():
            return cand
    raise BackendError(f"CUDA sources not found next to {pkg} (kernels/ or _cuda/)")


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


class GpuKernels:
    """Kernels over CuPy arrays; same methods, same results as ``CpuKernels``."""

    name = "gpu"
    xp = cp

    def __init__(self):
        d = kernel_dir()
        code = "\n".join((d / f).read_text() for f in _SOURCES)
        self._module = cp.RawModule(code=code, options=("-std=c++17", f"-I{d}"),
                                    enable_cooperative_groups=True)
        self._grids: dict[str, int] = {}
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._levels: dict[int, tuple] = {}  # order's pointer -> (order, offs on device, levels)
        self._balance = None
        self._scan = cp.empty(0, cp.int64)

    def _set_balance(self, args, grid, balance):
        """Point the kernels at the chosen load balance (and, edge-balanced, its scratch)."""
        mode = 1 if balance == "edges" else 0
        if mode != self._balance:
            flag = cp.ndarray((1,), cp.int32, self._module.get_global("g_balance"))
            flag[0] = mode
            self._balance = mode
        if mode == 1:
            need = max([int(a.size) for a in args if isinstance(a, cp.ndarray)] + [0]) + 2 + grid
            if self._scan.size < need:
                self._scan = cp.empty(need, cp.int64)
                ptr = cp.ndarray((1,), cp.uint64, self._module.get_global("g_scan"))
                ptr[0] = self._scan.data.ptr

    # --- launching -------------------------------------------------------------------------
    def _launch(self, name, *args, balance=None):
        """Launch a kernel cooperatively with as many blocks as fit on the device at once."""
        fn = self._module.get_function(name)
        grid = self._grids.get(name)
        if grid is None:
            regs = max(int(fn.num_regs), 16)
            per_sm = min(2048 // _BLOCK, 65536 // (((regs + 7) // 8) * 8 * _BLOCK), 8)
            if BLOCKS_PER_SM:
                per_sm = min(per_sm, BLOCKS_PER_SM)
            elif NARROW_BLOCKS_PER_SM and name in _NARROW:
                per_sm = min(per_sm, NARROW_BLOCKS_PER_SM)
            grid = max(1, per_sm) * self._sms
        self._set_balance(args, grid, balance or BALANCE)
        while True:
            try:
                fn((grid,), (_BLOCK,), args)
                self._grids[name] = grid
                return
            except cp.cuda.driver.CUDADriverError as exc:
                if "COOPERATIVE_LAUNCH_TOO_LARGE" not in str(exc) or grid <= self._sms:
                    raise
                grid //= 2

    @staticmethod
    def _ctr():
        return cp.zeros(8, cp.int32)

    def synchronize(self):
        """Wait for queued device work (the engine's phase timer calls this)."""
        cp.cuda.get_current_stream().synchronize()

    # --- CSR -------------------------------------------------------------------------------
    @_out_of_memory
    def csr(self, src, dst, n):
        """Stable sort of the edges by source (self-loops dropped, row order = input order)."""
        src = cp.asarray(src, cp.int32)
        dst = cp.asarray(dst, cp.int32)
        keep = src != dst
        if not bool(keep.all()):
            src, dst = src[keep], dst[keep]
        order = cp.argsort(src)  # stable: targets keep their input order inside a row
        return self._row_starts(src[order], n), dst[order]

    @staticmethod
    def _row_starts(sorted_rows, n):
        """indptr (int64[n + 1]) of a sorted row-id column, by binary search. (cupy.bincount's
        histogram needed 3 GiB of scratch for one row of 1.5M entries.)"""
        bounds = cp.arange(n + 1, dtype=sorted_rows.dtype)
        return cp.searchsorted(sorted_rows, bounds, side="left").astype(cp.int64)

    @staticmethod
    def _rows(ptr, m):
        """Row id of every CSR slot (int32[m]), from the row starts by one scatter and a scan."""
        n = ptr.shape[0] - 1
        row = cp.zeros(m, cp.int32)
        if m == 0 or n <= 1:
            return row
        starts = ptr[1:n]
        starts = starts[starts < m]
        cupyx.scatter_add(row, starts, 1)
        return cp.cumsum(row, dtype=cp.int32)

    @_out_of_memory
    def dedupe_rows(self, ptr, idx):
        """Keep the first occurrence of each target in each row: stable sort of (row, target)."""
        n, m = ptr.shape[0] - 1, idx.shape[0]
        if m == 0:
            return ptr.copy(), idx.copy()
        row = self._rows(ptr, m)
        key = (row.astype(cp.uint64) << np.uint64(32)) | idx.astype(cp.uint64)
        order = cp.argsort(key)
        sk = key[order]
        first = cp.empty(m, cp.bool_)
        first[0] = True
        cp.not_equal(sk[1:], sk[:-1], out=first[1:])
        del sk, key
        keep = cp.zeros(m, cp.bool_)
        keep[order[first]] = True
        del order, first
        return self._row_starts(row[keep], n), idx[keep]

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
                     rev.indptr, rev.indices, alive, indeg, outdeg, state, queue, huge, ctr)
        return int(ctr[6])

    @_out_of_memory
    def reach_within_colour(self, g, seeds, colour):
        n = colour.shape[0]
        state = cp.zeros(n, cp.int32)
        if n:
            self._launch("reach_kernel", np.int32(n), g.indptr, g.indices,
                         cp.asarray(seeds, cp.bool_), cp.asarray(colour, cp.int32), state,
                         cp.empty(n, cp.int32), cp.empty(n, cp.int32), self._ctr())
        return state != 0

    @_out_of_memory
    def propagate_max_colour(self, g, colour):
        n = colour.shape[0]
        if n:
            self._launch("propagate_kernel", np.int32(n), g.indptr, g.indices, colour,
                         cp.zeros(n, cp.int32), cp.empty(n, cp.int32), cp.empty(n, cp.int32),
                         cp.empty(n, cp.int32), self._ctr())

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

    @_out_of_memory
    def condensed_edges(self, g, comp):
        row = self._rows(g.indptr, g.m)
        cs = comp[row]
        cw = comp[g.indices]
        cross = cs != cw
        return cs[cross].astype(cp.int32), cw[cross].astype(cp.int32)

    # --- labels ----------------------------------------------------------------------------
    @_out_of_memory
    def topological_levels(self, fwd, rev):
        n = fwd.n
        level = cp.zeros(n, cp.int32)
        order = cp.empty(n, cp.int32)
        offs = cp.zeros(n + 2, cp.int32)
        ctr = self._ctr()
        if n:
            self._launch("levels_kernel", np.int32(n), fwd.indptr, fwd.indices, rev.indptr,
                         cp.empty(n, cp.int32), level, order, offs, cp.empty(n, cp.int32), ctr)
        levels, seen = (int(x) for x in ctr[6:8].get())
        if seen != n:
            raise AssertionError("condensed graph is not acyclic")  # a bug, never user input
        if len(self._levels) >= 4:
            self._levels.pop(next(iter(self._levels)))
        self._levels[order.data.ptr] = (order, offs[: levels + 1].copy(), levels)
        return level, order

    def _level_offsets(self, order):
        """Level starts of an ``order`` returned by :meth:`topological_levels`."""
        hit = self._levels.get(order.data.ptr)
        if hit is None or hit[0] is not order:
            raise AssertionError("order must come from GpuKernels.topological_levels")
        return hit[1], hit[2]

    @_out_of_memory
    def tree_parents(self, rev, level):
        n = level.shape[0]
        parent = cp.full(n, _INT_MAX, cp.int32)
        if n:
            self._launch("parents_kernel", np.int32(n), rev.indptr, rev.indices, level, parent,
                         cp.empty(n, cp.int32), self._ctr())
        parent[parent == _INT_MAX] = -1
        return parent

    @_out_of_memory
    def subtree_sizes(self, parent, order):
        size = cp.ones(parent.shape[0], cp.int32)
        offs, levels = self._level_offsets(order)
        if levels > 1:
            self._launch("sizes_kernel", np.int32(levels), order, offs, parent, size)
        return size

    @_out_of_memory
    def post_orders(self, parent, order, size, d, seed):
        n = parent.shape[0]
        offs, levels = self._level_offsets(order)
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
    def interval_bounds(self, fwd, order, post):
        n, d = post.shape
        inner = post.copy()
        outer = post.copy()
        offs, levels = self._level_offsets(order)
        if levels:
            self._launch("bounds_kernel", np.int32(levels), np.int32(d), fwd.indptr,
                         fwd.indices, order, offs, inner, outer, cp.empty(n, cp.int32),
                         self._ctr())
        return inner, outer

    @_out_of_memory
    def hub_bits(self, fwd, rev, order, hub_of, words):
        n = hub_of.shape[0]
        down = cp.zeros((n, words), cp.uint64)
        up = cp.zeros((n, words), cp.uint64)
        offs, levels = self._level_offsets(order)
        if n and words:
            self._launch("hubs_kernel", np.int32(n), np.int32(levels), np.int32(words),
                         fwd.indptr, fwd.indices, rev.indptr, rev.indices, order, offs,
                         cp.asarray(hub_of, cp.int32), down, up, cp.empty(n, cp.int32),
                         self._ctr())
        return down, up

    # --- queries ---------------------------------------------------------------------------
    @staticmethod
    def _hubs(lab):
        """(down, up, words) of the labels' hub bits."""
        return lab.hub_down, lab.hub_up, int(lab.hub_down.shape[1])

    @_out_of_memory
    def query_cuts(self, sid, did, comp, lab, prune=True):
        """Status code per query of vertex ids; ``comp`` None when components are vertices."""
        nq = sid.shape[0]
        status = cp.empty(nq, cp.int8)
        if nq:
            down, up, hw = self._hubs(lab)
            self._launch("cuts_kernel", np.int32(nq), cp.asarray(sid, cp.int32),
                         cp.asarray(did, cp.int32),
                         np.uint64(0) if comp is None else cp.asarray(comp, cp.int32), lab.level,
                         lab.inner, lab.outer, lab.tree_lo, lab.tree_post, np.int32(lab.d),
                         down, up, np.int32(hw), np.int32(bool(prune)), status)
        return status

    @staticmethod
    def search_words(n, nq, words, budget):
        """Words per vertex for the search: as many as the memory budget allows (three arrays
        of n * W 64-bit words), at least ``words``, at most what the queries need."""
        fit = budget // max(24 * n, 1)
        need = -(-nq // 64)
        if FORCE_WORDS:
            return int(max(1, min(FORCE_WORDS, need)))
        return int(max(1, min(max(words, fit), need, MAX_WORDS)))

    @_out_of_memory
    def bitmask_search(self, dag, lab, cs, ct, words=1, prune=True):
        n, nq = dag.n, cs.shape[0]
        ans = cp.zeros(nq, cp.bool_)
        if nq == 0:
            return ans
        footprint = dag.nbytes + sum(int(a.nbytes) for a in lab.arrays().values())
        W = self.search_words(n, nq, int(words), 2 * footprint + (256 << 20))
        seen = cp.zeros(n * W, cp.uint64)
        pend0 = cp.zeros(n * W, cp.uint64)
        pend1 = cp.zeros(n * W, cp.uint64)
        ints = [cp.zeros(n, cp.int32) for _ in range(2)] + [cp.empty(n, cp.int32)
                                                            for _ in range(4)]
        down, up, hw = self._hubs(lab)
        self._launch("search_kernel", np.int32(n), dag.indptr, dag.indices, lab.level,
                     lab.inner, lab.outer, lab.tree_lo, lab.tree_post, np.int32(lab.d),
                     down, up, np.int32(hw), np.int32(nq), cp.asarray(cs, cp.int32), cp.asarray(ct, cp.int32),
                     np.int32(W), np.int32(bool(prune)), ans, seen, pend0, pend1,
                     cp.zeros(W, cp.uint64), *ints, self._ctr(), balance=SEARCH_BALANCE)
        return ans

    @_out_of_memory
    def edge_hash_sum(self, src, dst):
        out = cp.zeros(1, cp.uint64)
        m = src.shape[0]
        if m:
            self._launch("hash_sum_kernel", np.int64(m), cp.asarray(src, cp.int32),
                         cp.asarray(dst, cp.int32), out)
        return int(out.get()[0])
