"""CPU twins of ``kernels/paths.cu``: hop counts and shortest paths of vertex pairs, bounded
breadth-first sets, and the reach counts of every component (exact bit sets or HyperLogLog
sketches swept over the condensed DAG).

**Pairs** (:func:`pair_block`): a bidirectional breadth-first search on the original graph,
one whole level of one side at a time (the side whose frontier has fewer edges). With the
visited sets of both sides disjoint after every level, the first level that reaches a vertex
of the other side gives the exact distance ``D = DA + DB + 1`` (every such meeting vertex has
the other side's full depth). Vertices that cannot lie on a path of at most ``limit`` edges are
not queued: those with no hop left, and those that cannot reach the target (or be reached
from the source) by the topological levels of the condensation (a DAG edge leads at least one
level down). Each edge's far end has its level beside it (``PathGraph.edge_levels``, as the
exact reachability search reads them), so the edges the level cut settles, most of those a
search crosses, cost no read of their vertex. (The GRAIL labels would cut a fifth of the
vertices more but cost several random reads per edge: five times slower on the deep citation
DAG.) The cuts never drop a vertex of a shortest path, so the distances of the pruned search
are exact.

The path returned is the **lexicographically smallest shortest path** (by vertex id, which
follows the keys' sorted order): the meeting vertices of the last level are every vertex of
their position on any shortest path; marking, layer by layer back to the source, the
source's side's vertices with a successor marked one position further gives every vertex of
that side on a shortest path (out-rows: a hub's thousands of in-edges are never read), and
the walk from the source takes the smallest marked successor at each step (then, on the
target's side, the smallest successor one hop nearer the target). The answer depends on the graph alone, not on
the cuts or the order of the search, so the GPU's search, which cuts and schedules otherwise,
returns the same path.

**Counts** (:func:`count_batch`, :func:`sketch_slice`): over a children-first order of the
condensed DAG, a component's set is its own members joined with its children's sets.

The scratch of the pair search (a state per vertex: its side, its flags and its hops, one
word, so that a vertex the search meets costs one cache line; the source's side's layers and
their bounds, the target's side's two frontiers, the touched vertices and the meeting ones)
belongs to the calling thread and is handed back clean. A search's vertices lie scattered
over the graph, each a cache miss: the expansion of a level prefetches the rows, states and
row starts it will read a few frontier vertices ahead, so that those misses overlap.
"""
from __future__ import annotations

import itertools
import threading
from concurrent.futures import wait

import numpy as np

from ...jit import njit
from ..shared import CHECK_EVERY, EDGE_LEVEL_CAP, mix64, unit_words
from .intrinsics import prefetch

_JIT = dict(cache=True, nogil=True, boundscheck=False)

#: the state of a vertex in the pair search (one int64 per vertex: its flags and, from bit
#: _DEPTH on, its hops from its side's end): forward side (from s), backward side (to t), a
#: vertex of the source's side on a shortest path, a meeting vertex of the last level
_FWD, _BWD, _ON_PATH, _MEET = 1, 2, 4, 8
_DEPTH = 4
#: the top bit of a 64-bit hash
_TOP = np.uint64(1 << 63)
#: ``limit`` of an unbounded search
UNBOUNDED = np.iinfo(np.int32).max
#: the expansion of a level reads the rows of the frontier vertex AHEAD on (and the row start
#: of the one twice as far), and the state of the far end PROBE_AHEAD on
AHEAD = 16
PROBE_AHEAD = 16
#: the marking back of a path's layers prefetches the row of the vertex 2 * MARK_AHEAD on and
#: the states of the first far ends of the one MARK_AHEAD on
MARK_AHEAD = 8
#: far ends that pass the level cut gathered before their states are read (``cand``)
CANDIDATES = 512


@njit(**_JIT)
def _comp_of(v, comp):
    return comp[v] if comp.shape[0] else v


@njit(inline="always", **_JIT)
def _probe(cand, k, fwd, queued, room, p, state, nxt, nn, en, touched, nt, meet, nm,
           all_meets):
    """The far ends ``cand[:k]`` of a level's edges that passed its cuts: a vertex of the
    other side is a meeting vertex, an unmarked one joins the next level (``queued`` its
    state) while the level has met none (the last level's new vertices lie on no shortest
    path). Returns (next size, its edges, touched count, meeting vertices, done: a meeting
    vertex found and one is enough)."""
    other = _BWD if fwd else _FWD
    for j in range(k):
        if j + PROBE_AHEAD < k:
            u = cand[j + PROBE_AHEAD]
            prefetch(state, u)
            prefetch(p, u)
        w = cand[j]
        m = state[w]
        if (m & 3) == other:
            if not (m & _MEET):
                state[w] = m | _MEET
                meet[nm] = w
                nm += 1
                if not all_meets:
                    return nn, en, nt, nm, True
            continue
        if m != 0 or not room or nm:
            continue  # once the level meets the other side, the search ends with it
        state[w] = queued
        touched[nt] = w
        nt += 1
        nxt[nn] = w
        nn += 1
        en += p[w + 1] - p[w]
    return nn, en, nt, nm, False


@njit(**_JIT)
def _expand(fwd, depth, front, nf, nxt, p, x, xl, s, t, limit, comp, level, state, touched,
            nt, meet, all_meets, cand):
    """One level of one side: the frontier ``front[:nf]`` at ``depth`` hops over the rows
    (p, x; ``xl`` the levels of the edges' far ends, saturated) into ``nxt``. Returns (next
    size, its edges, touched count, meeting vertices found).

    Two passes over each piece of the level: the rows' far ends that pass the level cut are
    gathered into ``cand`` without a branch, then their states are read (:func:`_probe`). A
    search's vertices lie scattered over the graph, each a cache miss: the first pass
    prefetches the rows AHEAD frontier vertices on, the second the states PROBE_AHEAD far ends
    on, so that the misses of a level overlap instead of following one another."""
    c_end = _comp_of(t if fwd else s, comp)
    l_end = level[c_end]
    sign = 1 if fwd else -1  # forward keeps the far ends above t's level, backward below s's
    room = depth + 1 < limit  # a vertex queued now has a hop left to reach the other end
    queued = (_FWD if fwd else _BWD) | ((depth + 1) << _DEPTH)
    cap = cand.shape[0]
    nn = 0
    en = 0
    nm = 0
    k = 0
    for i in range(nf):
        if i + 2 * AHEAD < nf:
            prefetch(p, front[i + 2 * AHEAD])
        if i + AHEAD < nf:
            a = p[front[i + AHEAD]]
            prefetch(x, a)
            prefetch(xl, a)
        v = front[i]
        for e in range(p[v], p[v + 1]):
            w = x[e]
            lw = np.int64(xl[e])
            if lw == EDGE_LEVEL_CAP:  # saturated: the far end's own level decides
                lw = level[_comp_of(w, comp)]
            keep = (lw - l_end) * sign < 0
            if lw == l_end:  # on the other end's level: inside its component only
                keep = _comp_of(w, comp) == c_end
            cand[k] = w
            k += keep
            if k == cap:
                nn, en, nt, nm, done = _probe(cand, k, fwd, queued, room, p, state, nxt, nn,
                                              en, touched, nt, meet, nm, all_meets)
                if done:
                    return nn, en, nt, nm
                k = 0
    nn, en, nt, nm, done = _probe(cand, k, fwd, queued, room, p, state, nxt, nn, en, touched,
                                  nt, meet, nm, all_meets)
    return nn, en, nt, nm


@njit(**_JIT)
def _search(s, t, limit, ptr, idx, lvl, rptr, ridx, rlvl, comp, level, all_meets, state,
            hist, bounds, ba, bb, touched, meet, cand):
    """Shortest distance s -> t (s != t) within ``limit`` edges, or -1. Returns (distance,
    position of the meeting vertices on the path, how many, touched count, forward levels).
    The source's side is kept level by level, ``hist[bounds[j]:bounds[j + 1]]`` at j hops
    (its frontier is the last of them); the states stay set for :func:`_walk` (cleared by the
    caller)."""
    state[s] = _FWD
    state[t] = _BWD
    touched[0] = s
    touched[1] = t
    nt = 2
    hist[0] = s
    bounds[0] = 0
    bounds[1] = 1
    ba[0] = t
    nf = 1
    nb = 1
    ef = ptr[s + 1] - ptr[s]
    eb = rptr[t + 1] - rptr[t]
    da = 0
    db = 0
    while nf > 0 and nb > 0 and da + db < limit:
        if ef <= eb:
            at = bounds[da]
            nf, ef, nt, nm = _expand(True, da, hist[at:at + nf], nf, hist[at + nf:], ptr, idx,
                                     lvl, s, t, limit, comp, level, state, touched, nt, meet,
                                     all_meets, cand)
            bounds[da + 2] = bounds[da + 1] + nf
            if nm:
                return da + db + 1, da + 1, nm, nt
            da += 1
        else:
            nb, eb, nt, nm = _expand(False, db, ba, nb, bb, rptr, ridx, rlvl, s, t, limit, comp,
                                     level, state, touched, nt, meet, all_meets, cand)
            ba, bb = bb, ba
            if nm:
                return da + db + 1, da, nm, nt
            db += 1
    return -1, 0, 0, nt


@njit(**_JIT)
def _on_path(m, j, at, d):
    """Whether a vertex of state ``m`` lies at position j of a shortest path of ``d`` edges
    whose meeting vertices are at position ``at`` (the source's side marked already from
    ``at`` down to j)."""
    if j < at:
        return (m & 3) == _FWD and (m & _ON_PATH) != 0 and (m >> _DEPTH) == j
    if j == at:
        return (m & _MEET) != 0
    return (m & 3) == _BWD and (m >> _DEPTH) == d - j


@njit(**_JIT)
def _walk(s, d, at, ptr, idx, state, hist, bounds, out, pos):
    """Write the lexicographically smallest shortest path (``d`` edges, meeting vertices at
    position ``at``) into ``out[pos:pos + d + 1]`` (see the module notes): first the source's
    side is marked back from the meeting vertices, layer by layer, over the out-rows of each
    layer's vertices (a shortest path's vertex has a successor on one one position further)."""
    for j in range(at - 1, 0, -1):
        hi = bounds[j + 1]
        for i in range(bounds[j], hi):
            if i + 2 * MARK_AHEAD < hi:
                prefetch(idx, ptr[hist[i + 2 * MARK_AHEAD]])
            if i + MARK_AHEAD < hi:
                u = hist[i + MARK_AHEAD]
                for e in range(ptr[u], min(ptr[u + 1], ptr[u] + MARK_AHEAD)):
                    prefetch(state, idx[e])
            u = hist[i]
            for e in range(ptr[u], ptr[u + 1]):
                if _on_path(state[idx[e]], j + 1, at, d):
                    state[u] |= _ON_PATH
                    break
    out[pos] = s
    v = s
    for i in range(d):
        best = -1
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            if _on_path(state[w], i + 1, at, d) and (best < 0 or w < best):
                best = w
        out[pos + i + 1] = best
        v = best


@njit(**_JIT)
def pair_block(us, ts, limits, ptr, idx, lvl, rptr, ridx, rlvl, comp, level, want_paths, state,
               hist, bounds, ba, bb, touched, meet, cand, hops, pbuf, pos):
    """Distances of the pairs us[i] -> ts[i] (vertex ids, us[i] != ts[i]) within limits[i]
    edges into ``hops`` (-1: none), and with ``want_paths`` each found path appended to
    ``pbuf`` from ``pos``. Returns (pairs done, next free position): fewer than all when
    ``pbuf`` has no room for the next path (the caller grows it and goes on)."""
    for i in range(us.shape[0]):
        s = us[i]
        t = ts[i]
        d, at, nm, nt = _search(s, t, limits[i], ptr, idx, lvl, rptr, ridx, rlvl, comp, level,
                                want_paths, state, hist, bounds, ba, bb, touched, meet, cand)
        if want_paths and d >= 0:
            if pos + d + 1 > pbuf.shape[0]:
                for j in range(nt):
                    state[touched[j]] = 0
                return i, pos
            _walk(s, d, at, ptr, idx, state, hist, bounds, pbuf, pos)
            pos += d + 1
        hops[i] = d
        for j in range(nt):
            state[touched[j]] = 0
    return us.shape[0], pos


@njit(**_JIT)
def bounded_bfs(ptr, idx, source, max_hops):
    """Breadth-first search from ``source`` up to ``max_hops`` edges: ``(vertices, hops)``,
    int32, in the order found (by hops, then as the rows list them)."""
    n = ptr.shape[0] - 1
    dist = np.full(n, -1, np.int32)
    queue = np.empty(n, np.int32)
    dist[source] = 0
    queue[0] = source
    head = 0
    tail = 1
    while head < tail:
        v = queue[head]
        head += 1
        dv = dist[v]
        if dv >= max_hops:
            continue
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            if dist[w] < 0:
                dist[w] = dv + 1
                queue[tail] = w
                tail += 1
    found = queue[:tail].copy()
    return found, dist[found]


@njit(**_JIT)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(**_JIT)
def count_batch(ptr, idx, order, pos_of, start, words, unit, heavy, bits, counts):
    """One batch of the exact reach counts: the components ``order[start:start + 64 *
    words]`` each get a bit, and every component at or after ``start`` in the children-first
    ``order`` takes its own bit and its children's (rows of ``bits``, indexed by position -
    start; ``pos_of`` the position of each component; a component before ``start`` reaches
    no member). Adds to ``counts[c]`` the vertices of the members that c's set holds:
    ``unit[k]`` has bit i set where member 64 k + i is one vertex, ``heavy[position]`` the
    size of the others."""
    nc = order.shape[0]
    members = min(64 * words, nc - start)
    for p in range(start, nc):
        c = order[p]
        row = p - start
        for k in range(words):
            bits[row, k] = 0
        if row < members:
            bits[row, row >> 6] = np.uint64(1) << np.uint64(row & 63)
        for e in range(ptr[c], ptr[c + 1]):
            q = pos_of[idx[e]] - start
            if q >= 0:
                for k in range(words):
                    bits[row, k] |= bits[q, k]
        total = 0
        for k in range(words):
            x = bits[row, k]
            if x:
                total += _popcount(x & unit[k])
                rest = x & ~unit[k]
                while rest:
                    low = rest & (~rest + np.uint64(1))
                    b = _popcount(low - np.uint64(1))
                    total += heavy[start + 64 * k + b]
                    rest ^= low
        counts[c] += total


@njit(**_JIT)
def sketch_init(comp, p, first, regs, lo, hi):
    """Every vertex's own HyperLogLog register (of ``2**p`` per component; column i of
    ``regs`` is register ``first + i``) into its component's row of ``regs``, for the
    columns lo..hi-1 only (one thread's share)."""
    cap = 64 - p
    for v in range(comp.shape[0] if comp.shape[0] else regs.shape[0]):
        c = _comp_of(v, comp)
        h = mix64(np.uint64(v))
        j = np.int64(h >> np.uint64(64 - p)) - first
        if j < lo or j >= hi:
            continue
        rest = h << np.uint64(p)
        rank = 1
        while rank < cap and not (rest & _TOP):
            rest <<= np.uint64(1)
            rank += 1
        if rank > regs[c, j]:
            regs[c, j] = rank


@njit(**_JIT)
def sketch_slice(ptr, idx, order, regs, lo, hi):
    """The union of each component's sketch with its children's (register-wise maximum),
    over the children-first ``order``, registers lo..hi-1 only."""
    for p in range(order.shape[0]):
        c = order[p]
        for e in range(ptr[c], ptr[c + 1]):
            w = idx[e]
            for j in range(lo, hi):
                if regs[w, j] > regs[c, j]:
                    regs[c, j] = regs[w, j]


@njit(**_JIT)
def sketch_sums(regs, p, s1, zeros, lo, hi):
    """Per component: ``s1`` = sum of 2**(64 - p - r) over its nonzero registers r and
    ``zeros`` = its empty registers (exact integers: the estimate is made from them on the
    host, the same on both backends), rows lo..hi-1."""
    base = 64 - p
    for c in range(lo, hi):
        s = np.uint64(0)
        z = 0
        for j in range(regs.shape[1]):
            r = regs[c, j]
            if r == 0:
                z += 1
            else:
                s += np.uint64(1) << np.uint64(base - r)
        s1[c] = s
        zeros[c] = z



#: pairs per block of the threaded pair search (a thread takes one block at a time), at least:
#: a call's pairs make 16 blocks per thread up to MAX_PAIR_BLOCK pairs a block (fewer trips
#: through the interpreter between the compiled blocks)
PAIR_BLOCK = 16
MAX_PAIR_BLOCK = 1024
#: vertices of path room a thread's buffer starts with (it grows when a block needs more)
PATH_ROOM = 1 << 16


class CpuPaths:
    """The path and count operations of :class:`~grail_duckdb.kernels.protocol.Kernels` on
    the CPU, inherited by :class:`~grail_duckdb.kernels.cpu.CpuKernels` (which provides
    ``threads``, ``_executor()`` and the per-thread ``_local``)."""

    def _path_scratch(self, n):
        """This thread's scratch of the pair search (``state`` handed back zeroed)."""
        cached = getattr(self._local, "paths", None)
        if cached is None or cached[0].shape[0] != n:
            cached = ((np.zeros(n, np.int64),) + tuple(np.empty(n + 2, np.int32)
                                                       for _ in range(6))
                      + (np.empty(CANDIDATES, np.int32),))
            self._local.paths = cached
        return cached

    def pair_hops(self, g, s, t, limits, want_paths=False, checkpoint=None):
        n = int(s.shape[0])
        hops = np.full(n, -1, np.int32)
        if n == 0:
            return hops, (np.zeros(1, np.int64), np.zeros(0, np.int32)) if want_paths else None
        comp = np.zeros(0, np.int32) if g.comp is None else g.comp
        lvl, rlvl = g.edge_levels
        args = (g.fwd.indptr, g.fwd.indices, lvl, g.rev.indptr, g.rev.indices, rlvl, comp,
                g.level, bool(want_paths))
        s = np.ascontiguousarray(s, np.int32)
        t = np.ascontiguousarray(t, np.int32)
        limits = np.ascontiguousarray(limits, np.int32)
        size = min(MAX_PAIR_BLOCK, max(PAIR_BLOCK, n // (16 * self.threads)))
        blocks = -(-n // size)
        pieces: dict = {}

        def block(b, scratch, room):
            lo, hi = b * size, min(n, (b + 1) * size)
            done, pos, parts = lo, 0, []
            while True:
                k, pos = pair_block(s[done:hi], t[done:hi], limits[done:hi], *args, *scratch,
                                    hops[done:hi], room[0], pos)
                done += k
                if done == hi:
                    break
                parts.append(room[0][:pos].copy())  # the next path did not fit: grow
                room[0] = np.empty(max(2 * room[0].shape[0], g.fwd.n + 1), np.int32)
                pos = 0
            if want_paths:
                parts.append(room[0][:pos].copy())
                pieces[b] = parts

        _run_blocks(self, blocks, size, g.fwd.n, block, checkpoint)
        if not want_paths:
            return hops, None
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.where(hops >= 0, hops.astype(np.int64) + 1, 0), out=offsets[1:])
        flat = [a for b in range(blocks) for a in pieces[b]]
        return hops, (offsets, np.concatenate(flat) if flat else np.zeros(0, np.int32))

    def bounded_bfs(self, g, source, max_hops):
        return bounded_bfs(g.indptr, g.indices, int(source), int(min(max_hops, UNBOUNDED)))

    def count_reached(self, g, order, offsets, sizes, words):
        nc = int(order.shape[0])
        counts = np.zeros(nc, np.int64)
        if nc == 0:
            return counts
        order = np.ascontiguousarray(order, np.int32)
        pos_of = np.empty(nc, np.int32)
        pos_of[order] = np.arange(nc, dtype=np.int32)
        by_pos = np.asarray(sizes, np.int64)[order]
        heavy = np.zeros(nc + 64 * words, np.int64)
        heavy[:nc] = by_pos
        unit = unit_words(by_pos == 1, nc + 64 * words)
        starts = iter(range(0, nc, 64 * words))
        lock = threading.Lock()
        shares = []

        def work(_):
            bits, mine = np.empty((nc, words), np.uint64), np.zeros(nc, np.int64)
            shares.append(mine)
            while True:
                with lock:
                    start = next(starts, None)
                if start is None:
                    return
                count_batch(g.indptr, g.indices, order, pos_of, start, words,
                            unit[start >> 6:(start >> 6) + words], heavy, bits, mine)

        _run_workers(self, min(self.threads, -(-nc // (64 * words))), work)
        for part in shares:
            counts += part
        return counts

    def sketch_reached(self, g, order, offsets, comp, n_components, precision,
                       registers=None):
        first, count = registers or (0, 1 << precision)
        regs = np.zeros((n_components, count), np.uint8)
        comp = np.zeros(0, np.int32) if comp is None else np.asarray(comp, np.int32)
        order = np.ascontiguousarray(order, np.int32)
        cols = _slices(count, self.threads)

        def sweep(i):
            sketch_init(comp, precision, first, regs, *cols[i])
            sketch_slice(g.indptr, g.indices, order, regs, *cols[i])

        _run_workers(self, len(cols), sweep)
        s1 = np.zeros(n_components, np.uint64)
        zeros = np.zeros(n_components, np.int32)
        rows = _slices(n_components, self.threads)
        _run_workers(self, len(rows), lambda i: sketch_sums(regs, precision, s1, zeros, *rows[i]))
        return s1, zeros


def _slices(total: int, parts: int) -> list:
    """At most ``parts`` contiguous, non-empty ranges ``(lo, hi)`` covering 0..total-1."""
    cuts = np.linspace(0, total, max(1, min(parts, total)) + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _run_workers(kernels, workers: int, work) -> None:
    """``work(i)`` for i in 0..workers-1 on the kernels' thread pool (on the calling thread
    when there is one)."""
    if workers <= 1:
        if workers == 1:
            work(0)
        return
    for f in [kernels._executor().submit(work, i) for i in range(workers)]:
        f.result()


def _run_blocks(kernels, blocks: int, size: int, n: int, block, checkpoint) -> None:
    """``block(b, scratch, room)`` for every block b (of ``size`` pairs), taken from a shared
    counter by the kernels' threads, each with its own scratch and path room (a one-element
    list: the block may grow it); ``checkpoint(pairs done)``, if given, is called from the
    calling thread in between, and an exception it raises stops the work."""
    counter = itertools.count()
    stop = threading.Event()
    done = [0]

    def worker():
        scratch = kernels._path_scratch(n)
        room = [np.empty(PATH_ROOM, np.int32)]
        while not stop.is_set():
            b = next(counter)
            if b >= blocks:
                return
            block(b, scratch, room)
            done[0] += 1  # read for progress only

    workers = min(kernels.threads, blocks)
    if workers <= 1:
        scratch, room = kernels._path_scratch(n), [np.empty(PATH_ROOM, np.int32)]
        for b in range(blocks):
            block(b, scratch, room)
            if checkpoint is not None:
                checkpoint((b + 1) * size)
        return
    futures = [kernels._executor().submit(worker) for _ in range(workers)]
    try:
        while wait(futures, timeout=CHECK_EVERY).not_done:
            if checkpoint is not None:
                checkpoint(done[0] * size)
    except BaseException:
        stop.set()
        wait(futures)
        raise
    for f in futures:
        f.result()
