"""The GPU side of hop counts, shortest paths and reach counts: :class:`GpuPaths`, which
:class:`~grail_duckdb.kernels.gpu.GpuKernels` inherits, over ``kernels/paths.cu`` (its own
``cupy.RawModule``, compiled on first use).

* ``pair_hops``: rounds of the pair search, each round's groups of warps (one group per pair)
  with scratch of ``2 ** tbits`` set slots (``GpuSettings.path_rounds``) within
  ``GpuSettings.path_scratch`` bytes; the pairs a round hands back (their search outgrew the
  scratch, or the path buffer its room) go to the next round, and those the last round hands
  back to the CPU twin over a host copy of the graph: the same answers. The first round's
  groups are single warps (most searches are small); the later rounds' few large searches
  each run on a group of several warps, as each is a critical path of its own. Paths are
  written by each group where a counter gives it room and gathered into the pairs' order at
  the end.
* ``bounded_bfs``: a level-synchronous search in CuPy array steps (one key, a few levels).
* ``count_reached`` / ``sketch_reached``: one launch per level of the DAG, children first.
"""
from __future__ import annotations

import threading

import cupy as cp
import numpy as np

from ..resources import cuda_dir
from .protocol import CSR, PathGraph
from .shared import cuda_header, unit_words

#: threads per block of every launch of the module (kernels/paths.cu: PW_WARPS warps)
BLOCK = 256
_WARPS_PER_BLOCK = BLOCK // 32
#: warps per pair of the pair search's kernels (pair_hops_g*_kernel)
PATH_GROUPS = (1, 2, 4, 8)
_NULL = np.uint64(0)


def _scratch_bytes(tbits: int) -> int:
    """One group's scratch: 2**tbits 8-byte slots, five lists of 2**(tbits - 1) ints and two
    more ints (kernels/paths.cu)."""
    return (8 << tbits) + 4 * (5 * (1 << (tbits - 1)) + 2)


class GpuPaths:
    """The path and count operations of the kernel interface on the GPU. Needs from its
    subclass ``settings`` (``path_rounds``, ``path_scratch``) and ``_sms``."""

    _paths_lock = threading.Lock()

    def _paths_fn(self, name: str):
        """A kernel of ``kernels/paths.cu`` (the module compiled once per instance)."""
        mod = self.__dict__.get("_paths_module")
        if mod is None:
            with self._paths_lock:
                mod = self.__dict__.get("_paths_module")
                if mod is None:
                    d = cuda_dir()
                    mod = cp.RawModule(code=cuda_header() + (d / "paths.cu").read_text(),
                                       options=("-std=c++17", f"-I{d}"))
                    self.__dict__["_paths_module"] = mod
        return mod.get_function(name)

    def _flat_grid(self, n: int) -> int:
        return max(1, min(-(-n // BLOCK), 32 * self._sms))

    # --- pairs -------------------------------------------------------------------------------
    def pair_hops(self, g: PathGraph, s, t, limits, want_paths=False, checkpoint=None):
        n = int(s.shape[0])
        if n == 0:
            return np.zeros(0, np.int32), ((np.zeros(1, np.int64), np.zeros(0, np.int32))
                                           if want_paths else None)
        ds, dt = cp.asarray(s, cp.int32), cp.asarray(t, cp.int32)
        dl = cp.asarray(limits, cp.int32)
        hops = cp.full(n, -1, cp.int32)
        path_at = cp.zeros(n if want_paths else 1, cp.int64)
        buf = cp.empty(16 * n + 1024 if want_paths else 1, cp.int32)
        ctr = cp.zeros(4, cp.int32)
        lists = cp.empty((2, n), cp.int32)
        lvl, rlvl = g.edge_levels
        comp = _NULL if g.comp is None else g.comp
        ids, pending = _NULL, n
        for r, (warps, tbits) in enumerate(self.settings.path_rounds):
            fn = self._paths_fn(f"pair_hops_g{warps}_kernel")
            per_block = _WARPS_PER_BLOCK // warps
            resident = max(1, cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                fn.kernel.ptr, BLOCK, 0)) * self._sms * per_block
            per = _scratch_bytes(tbits)
            groups = max(1, min(pending, resident, self.settings.path_scratch // per))
            scratch = cp.zeros(groups * per, cp.uint8)
            ctr[:2] = 0
            over = lists[r % 2]
            if checkpoint is not None:
                checkpoint(n - pending)
            fn((-(-groups // per_block),), (BLOCK,), (
                np.int32(pending), ids, ds, dt, dl, g.fwd.indptr, g.fwd.indices, lvl,
                g.rev.indptr, g.rev.indices, rlvl, comp, g.level, np.int32(bool(want_paths)),
                np.int32(tbits), scratch, np.int64(per), np.int32(groups), hops, ctr, over, buf,
                np.int64(buf.shape[0]), path_at))
            del scratch
            pending = int(ctr[1])
            if pending == 0:
                break
            ids = over[:pending]
            if want_paths:  # room for what was written and the pairs handed back, grown
                used = int(ctr[2:4].view(cp.int64)[0])
                grown = cp.empty(max(2 * buf.shape[0], used + 64 * pending), cp.int32)
                grown[:min(used, buf.shape[0])] = buf[:min(used, buf.shape[0])]
                buf = grown
        host_ids = None if pending == 0 else cp.asnumpy(ids)
        out = cp.asnumpy(hops)
        cpu = None
        if host_ids is not None:  # what the last round handed back: the CPU twin
            from . import kernels_for

            cpu = kernels_for("cpu").pair_hops(_host_graph(g), np.asarray(s)[host_ids],
                                               np.asarray(t)[host_ids],
                                               np.asarray(limits)[host_ids], want_paths)
            out[host_ids] = cpu[0]
        if not want_paths:
            return out, None
        return out, _gather_paths(out, path_at, buf, host_ids, cpu)

    # --- one key -------------------------------------------------------------------------------
    #: a breadth-first step expands its frontier's edges this many at a time (a step of a
    #: billion edges took temporaries of 9 GB each)
    BFS_STEP = 1 << 26

    def bounded_bfs(self, g: CSR, source, max_hops):
        dist = cp.full(g.n, -1, cp.int32)
        dist[int(source)] = 0
        frontier = cp.asarray([int(source)], cp.int32)
        found, depth = [frontier], 0
        while frontier.shape[0] and depth < max_hops:
            starts = g.indptr[frontier]
            counts = g.indptr[frontier + 1] - starts
            ends = cp.cumsum(counts)
            total = int(ends[-1])
            if total == 0:
                break
            depth += 1
            fresh = []
            for lo in range(0, total, self.BFS_STEP):  # the frontier's edges, a slice at a time
                slot = cp.arange(lo, min(total, lo + self.BFS_STEP), dtype=cp.int64)
                owner = cp.searchsorted(ends, slot, side="right")
                nb = g.indices[starts[owner] + slot - (ends[owner] - counts[owner])]
                nb = nb[dist[nb] < 0]
                dist[nb] = depth
                fresh.append(nb)
            frontier = cp.unique(cp.concatenate(fresh)).astype(cp.int32)
            found.append(frontier)
        ids = cp.concatenate(found)
        return cp.asnumpy(ids), cp.asnumpy(dist[ids])

    # --- counts ----------------------------------------------------------------------------------
    def count_reached(self, g: CSR, order, offsets, sizes, words):
        nc = int(order.shape[0])
        counts = cp.zeros(nc, cp.int64)
        if nc == 0:
            return counts
        fn = self._paths_fn("count_level_kernel")
        order = cp.asarray(order, cp.int32)
        pos_of = cp.empty(nc, cp.int32)
        pos_of[order] = cp.arange(nc, dtype=cp.int32)
        by_pos = cp.asarray(sizes, cp.int64)[order]
        heavy = cp.zeros(nc + 64 * words, cp.int64)
        heavy[:nc] = by_pos
        unit = cp.asarray(unit_words(cp.asnumpy(by_pos == 1), nc + 64 * words))
        bits = cp.empty((nc, words), cp.uint64)
        offsets = np.asarray(offsets, np.int64)
        for start in range(0, nc, 64 * words):
            members = min(64 * words, nc - start)
            for lo, hi in zip(offsets[:-1], offsets[1:]):
                lo = max(int(lo), start)
                if hi <= lo:
                    continue
                fn((self._flat_grid((int(hi) - lo) * words),), (BLOCK,), (
                    np.int32(lo), np.int32(hi), np.int32(start), np.int32(members), order,
                    pos_of, g.indptr, g.indices, np.int32(words), bits, unit[start >> 6:],
                    heavy, counts))
        return counts

    def sketch_reached(self, g: CSR, order, offsets, comp, n_components, precision,
                       registers=None):
        first, count = registers or (0, 1 << precision)
        words = count // 4
        regs = cp.zeros((n_components, words), cp.uint32)
        n = n_components if comp is None else int(comp.shape[0])
        self._paths_fn("sketch_init_kernel")((self._flat_grid(n),), (BLOCK,), (
            np.int32(n), _NULL if comp is None else comp, np.int32(precision), np.int32(first),
            np.int32(words), regs))
        level = self._paths_fn("sketch_level_kernel")
        order = cp.asarray(order, cp.int32)
        for lo, hi in zip(np.asarray(offsets)[:-1], np.asarray(offsets)[1:]):
            if hi > lo:
                level((self._flat_grid((int(hi) - int(lo)) * words),), (BLOCK,), (
                    np.int32(lo), np.int32(hi), order, g.indptr, g.indices, np.int32(words),
                    regs))
        s1 = cp.empty(n_components, cp.uint64)
        zeros = cp.empty(n_components, cp.int32)
        self._paths_fn("sketch_sums_kernel")((self._flat_grid(n_components),), (BLOCK,), (
            np.int32(n_components), np.int32(precision), np.int32(words), regs, s1, zeros))
        return s1, zeros


def _host_graph(g: PathGraph) -> PathGraph:
    """``g`` with its arrays on the host (the CPU twin's input)."""
    def host(a):
        return None if a is None else cp.asnumpy(a)
    return PathGraph(CSR(host(g.fwd.indptr), host(g.fwd.indices)),
                     CSR(host(g.rev.indptr), host(g.rev.indices)), host(g.comp), host(g.level),
                     tuple(host(a) for a in g.edge_levels))


def _gather_paths(hops: np.ndarray, path_at, buf, host_ids, cpu) -> tuple:
    """``(offsets, vertices)`` of every pair's path in pair order: those the device wrote
    (at ``path_at`` in ``buf``) gathered on the device, those of the CPU twin (``host_ids``,
    its ``cpu`` answer) put in their places."""
    lengths = np.where(hops >= 0, hops.astype(np.int64) + 1, 0)
    offsets = np.zeros(hops.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    vertices = np.empty(int(offsets[-1]), np.int32)
    on_device = lengths.copy()
    if host_ids is not None:
        on_device[host_ids] = 0
    total = int(on_device.sum())
    if total:
        d_len = cp.asarray(on_device)
        d_ends = cp.cumsum(d_len)
        slot = cp.arange(total, dtype=cp.int64)
        owner = cp.searchsorted(d_ends, slot, side="right")
        step = slot - (d_ends[owner] - d_len[owner])
        values = buf[path_at[owner] + step]
        if host_ids is None:  # every path the device's: already in the pairs' order
            vertices = cp.asnumpy(values)
        else:
            where = cp.asarray(offsets[:-1])[owner] + step
            vertices[cp.asnumpy(where)] = cp.asnumpy(values)
    if host_ids is not None:
        c_off, c_vert = cpu[1]
        for i, pair in enumerate(host_ids):
            vertices[offsets[pair]:offsets[pair + 1]] = c_vert[c_off[i]:c_off[i + 1]]
    return offsets, vertices
