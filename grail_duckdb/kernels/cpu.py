"""CPU twins of the CUDA kernels in ``kernels/*.cu``, compiled with Numba.

Every function here computes exactly what its CUDA twin computes (same inputs, same outputs,
same answers); only the schedule differs: a CPU core walks a worklist in one pass where the
GPU runs level-synchronous frontiers. The pipeline modules never call these directly: they go
through :class:`grail_duckdb.kernels.CpuKernels`, the one interface both backends implement.

All functions are ``nogil`` so that DuckDB's worker threads, which call the ``reaches`` UDF
concurrently, are not serialised by the GIL while a kernel runs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_JIT = dict(cache=True, nogil=True, boundscheck=False)

# splitmix64 constants (Steele et al.): a cheap, well-mixed 64-bit hash used to pick sibling
# orders and fingerprints identically on every backend.
_SM_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SM_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SM_M2 = np.uint64(0x94D049BB133111EB)


@njit(**_JIT)
def mix64(x):
    """splitmix64 finaliser of a uint64 (the same function as ``mix64`` in kernels/common.cuh)."""
    x = x + _SM_GAMMA
    x = (x ^ (x >> np.uint64(30))) * _SM_M1
    x = (x ^ (x >> np.uint64(27))) * _SM_M2
    return x ^ (x >> np.uint64(31))


# --------------------------------------------------------------------------------------------
# CSR
# --------------------------------------------------------------------------------------------
@njit(**_JIT)
def csr_from_edges(src, dst, n):
    """Counting sort of the edge list by source: ``(indptr[n+1] int64, indices[m] int32)``.

    Self-loops are dropped (they never change reachability). Within a row the targets keep
    their input order, so the CSR is a deterministic function of the edge list.
    """
    m = src.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    for e in range(m):
        if src[e] != dst[e]:
            indptr[src[e] + 1] += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[n], np.int32)
    for e in range(m):
        s = src[e]
        if s != dst[e]:
            indices[fill[s]] = dst[e]
            fill[s] += 1
    return indptr, indices


# --------------------------------------------------------------------------------------------
# SCC condensation (Multistep: trim, forward-backward, colour propagation)
# --------------------------------------------------------------------------------------------
@njit(**_JIT)
def trim(fwd_ptr, fwd_idx, rev_ptr, rev_idx, alive):
    """Repeatedly remove live vertices whose live in-degree or live out-degree is zero.

    Each removed vertex is a singleton strong component. ``alive`` is updated in place; the
    number removed is returned. A worklist makes the whole fixpoint one O(n + m) pass.
    """
    n = alive.shape[0]
    indeg = np.zeros(n, np.int64)
    outdeg = np.zeros(n, np.int64)
    for v in range(n):
        if alive[v]:
            for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
                w = fwd_idx[e]
                if alive[w]:
                    outdeg[v] += 1
                    indeg[w] += 1
    queue = np.empty(n, np.int32)
    head = 0
    tail = 0
    for v in range(n):
        if alive[v] and (indeg[v] == 0 or outdeg[v] == 0):
            alive[v] = False
            queue[tail] = v
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            if alive[w]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    alive[w] = False
                    queue[tail] = w
                    tail += 1
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            u = rev_idx[e]
            if alive[u]:
                outdeg[u] -= 1
                if outdeg[u] == 0:
                    alive[u] = False
                    queue[tail] = u
                    tail += 1
    return tail


@njit(**_JIT)
def reach_within_colour(ptr, idx, seeds, colour):
    """Vertices reachable from a seed through vertices of the seed's colour (negative = dead).

    Used for the forward and backward sweeps from the pivot (all live vertices share colour 0)
    and for the backward sweep from every colour root (the manycore paper's colouring step).
    """
    n = colour.shape[0]
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int32)
    top = 0
    for s in range(n):
        if seeds[s] and colour[s] >= 0:
            seen[s] = True
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        v = stack[top]
        c = colour[v]
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            if not seen[w] and colour[w] == c:
                seen[w] = True
                stack[top] = w
                top += 1
    return seen


@njit(**_JIT)
def propagate_max_colour(ptr, idx, colour):
    """Fixpoint of colour[w] = max(colour[w], colour[v]) over edges v -> w between live vertices.

    Afterwards every live vertex holds the largest vertex id among its live ancestors.
    """
    n = colour.shape[0]
    queued = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int32)
    head = 0
    size = 0
    for v in range(n):
        if colour[v] >= 0:
            queued[v] = True
            queue[size] = v
            size += 1
    tail = size % n if n > 0 else 0
    count = size
    while count > 0:
        v = queue[head]
        head = head + 1 if head + 1 < n else 0
        count -= 1
        queued[v] = False
        c = colour[v]
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            if colour[w] >= 0 and colour[w] < c:
                colour[w] = c
                if not queued[w]:
                    queued[w] = True
                    queue[tail] = w
                    tail = tail + 1 if tail + 1 < n else 0
                    count += 1


@njit(**_JIT)
def rank_by_first_occurrence(label):
    """Renumber arbitrary labels 0..k-1 in order of their first occurrence (lowest vertex id)."""
    n = label.shape[0]
    remap = np.full(n, -1, np.int32)
    out = np.empty(n, np.int32)
    k = 0
    for v in range(n):
        lab = label[v]
        if remap[lab] < 0:
            remap[lab] = k
            k += 1
        out[v] = remap[lab]
    return out, k


@njit(**_JIT)
def condensed_edges(ptr, idx, comp):
    """Edges between different components, as (src_comp, dst_comp) arrays (duplicates kept)."""
    n = comp.shape[0]
    m = 0
    for v in range(n):
        cv = comp[v]
        for e in range(ptr[v], ptr[v + 1]):
            if comp[idx[e]] != cv:
                m += 1
    s = np.empty(m, np.int32)
    d = np.empty(m, np.int32)
    k = 0
    for v in range(n):
        cv = comp[v]
        for e in range(ptr[v], ptr[v + 1]):
            cw = comp[idx[e]]
            if cw != cv:
                s[k] = cv
                d[k] = cw
                k += 1
    return s, d


@njit(**_JIT)
def dedupe_rows(ptr, idx):
    """Remove duplicate targets inside each CSR row (keeps first occurrences, in order)."""
    n = ptr.shape[0] - 1
    mark = np.full(n, -1, np.int64)
    out_ptr = np.zeros(n + 1, np.int64)
    out_idx = np.empty(idx.shape[0], np.int32)
    k = 0
    for v in range(n):
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            if mark[w] != v:
                mark[w] = v
                out_idx[k] = w
                k += 1
        out_ptr[v + 1] = k
    return out_ptr, out_idx[:k].copy()


# --------------------------------------------------------------------------------------------
# GRAIL labels: the four breadth-first passes (GRAIL GPU paper, Section 4, Algorithms 2-6)
# --------------------------------------------------------------------------------------------
@njit(**_JIT)
def topological_levels(fwd_ptr, fwd_idx, rev_ptr):
    """Kahn's sweep: level[v] = length of the longest path from a root to v; ``order`` lists
    the vertices by non-decreasing level. Returns (level, order, n_visited)."""
    n = rev_ptr.shape[0] - 1
    pending = np.empty(n, np.int64)
    level = np.zeros(n, np.int32)
    order = np.empty(n, np.int32)
    tail = 0
    for v in range(n):
        pending[v] = rev_ptr[v + 1] - rev_ptr[v]
        if pending[v] == 0:
            order[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = order[head]
        head += 1
        lv = level[v] + 1
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            if level[w] < lv:
                level[w] = lv
            pending[w] -= 1
            if pending[w] == 0:
                order[tail] = w
                tail += 1
    return level, order, tail


@njit(**_JIT)
def tree_parents(rev_ptr, rev_idx, level):
    """Step 1 (DAG -> directed tree): each vertex keeps, as its tree parent, the smallest-id
    in-neighbour one level above it; roots get -1. Deterministic on every backend."""
    n = level.shape[0]
    parent = np.full(n, -1, np.int32)
    for v in range(n):
        want = level[v] - 1
        best = -1
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            u = rev_idx[e]
            if level[u] == want and (best < 0 or u < best):
                best = u
        parent[v] = best
    return parent


@njit(**_JIT)
def subtree_sizes(parent, order):
    """Step 2 (Algorithm 4): size[v] = number of tree descendants of v, v included."""
    n = parent.shape[0]
    size = np.ones(n, np.int32)
    for i in range(n - 1, -1, -1):
        v = order[i]
        p = parent[v]
        if p >= 0:
            size[p] += size[v]
    return size


@njit(**_JIT)
def order_params(n_blocks, label, seed):
    """Parameters of label ``label``'s vertex order: (mask, a1, c, a2, shift, xor), uint64."""
    bits = 1
    while (np.uint64(1) << np.uint64(bits)) < np.uint64(max(n_blocks, 2)):
        bits += 1
    mask = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    h = mix64(np.uint64(seed) * np.uint64(64) + np.uint64(label))
    a1 = (mix64(h) & mask) | np.uint64(1)
    c = mix64(h + np.uint64(1)) & mask
    a2 = (mix64(h + np.uint64(2)) & mask) | np.uint64(1)
    xor = mix64(h + np.uint64(3)) & np.uint64(ORDER_BLOCK - 1)
    return mask, a1, c, a2, np.uint64(max(bits // 2, 1)), xor


#: vertices are permuted in blocks of this many consecutive ids (cache lines stay whole)
ORDER_BLOCK = 64


@njit(**_JIT)
def permuted_block(b, n_blocks, mask, a1, c, a2, shift):
    """The block at rank b of a pseudo-random permutation of 0..n_blocks-1.

    A bijection of the k-bit integers (multiply by an odd number, add, xor-shift, multiply,
    xor-shift), cycle-walked until it lands below n_blocks: a permutation that needs no table
    and no sort, computed identically by the CUDA twin.
    """
    x = np.uint64(b)
    while True:
        x = (x * a1 + c) & mask
        x ^= x >> shift
        x = (x * a2) & mask
        x ^= x >> shift
        if x < np.uint64(n_blocks):
            return np.int64(x)


@njit(**_JIT)
def post_orders(parent, order, size, d, seed):
    """Step 3 (Algorithm 5): post-order ranks (1-based) of the tree for d sibling orders.

    In label j, siblings (children of one tree parent; roots are the children of a virtual
    root) are ordered as they appear in label j's pseudo-random vertex order: blocks of
    ORDER_BLOCK consecutive ids in the order ``permuted_block``, and inside a block ids xored
    with a per-label constant. A vertex's post rank is the number of vertices finished before
    its subtree starts (the sizes of earlier siblings along its root path) plus its own size.
    Returns post[C, d] int32.
    """
    n = parent.shape[0]
    post = np.empty((n, d), np.int32)
    start = np.zeros(n, np.int64)  # vertices finished before v's subtree begins
    excl = np.empty(n, np.int64)  # sizes of v's earlier siblings
    acc = np.empty(n + 1, np.int64)
    n_blocks = (n + ORDER_BLOCK - 1) // ORDER_BLOCK
    for j in range(d):
        mask, a1, c, a2, shift, xor = order_params(n_blocks, j, seed)
        acc[:] = 0
        for b in range(n_blocks):
            base = permuted_block(b, n_blocks, mask, a1, c, a2, shift) * ORDER_BLOCK
            for o in range(ORDER_BLOCK):
                v = base + np.int64(np.uint64(o) ^ xor)
                if v >= n:
                    continue
                p = parent[v] + 1
                excl[v] = acc[p]
                acc[p] += size[v]
        for i in range(n):
            v = order[i]
            p = parent[v]
            s = excl[v] + (start[p] if p >= 0 else 0)
            start[v] = s
            post[v, j] = s + size[v]
    return post


@njit(**_JIT)
def interval_bounds(fwd_ptr, fwd_idx, order, post):
    """Step 4 (Algorithm 6): per label, the smallest and the largest post rank over v and
    every DAG descendant of v: the interval [inner, outer].

    The bounds run over all DAG children, not only tree children. The paper's tree is a DFS
    tree, where the largest is always v's own rank; ours comes from breadth-first levels, so a
    non-tree edge may lead to a larger rank and the outer bound is propagated too. Either way
    u reaches w only if [inner(w), outer(w)] lies inside [inner(u), outer(u)].
    """
    n, d = post.shape
    inner = post.copy()
    outer = post.copy()
    for i in range(n - 1, -1, -1):
        v = order[i]
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            for j in range(d):
                if inner[w, j] < inner[v, j]:
                    inner[v, j] = inner[w, j]
                if outer[w, j] > outer[v, j]:
                    outer[v, j] = outer[w, j]
    return inner, outer


@njit(**_JIT)
def hub_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, words):
    """Reachability to and from a few hub vertices, as bit sets (one bit per hub).

    ``down[v]``: the hubs v reaches (v included), bottom-up over every DAG child;
    ``up[v]``: the hubs that reach v, top-down over every DAG parent. They are exact, so
    ``down[u] & up[t] != 0`` proves u reaches t (through a hub), while a hub t reaches that u
    does not (``down[t] & ~down[u]``), or one that reaches u but not t (``up[u] & ~up[t]``),
    proves it does not.
    """
    n = hub_of.shape[0]
    down = np.zeros((n, words), np.uint64)
    up = np.zeros((n, words), np.uint64)
    one = np.uint64(1)
    for i in range(n - 1, -1, -1):
        v = order[i]
        h = hub_of[v]
        if h >= 0:
            down[v, h >> 6] |= one << np.uint64(h & 63)
        for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
            w = fwd_idx[e]
            for k in range(words):
                down[v, k] |= down[w, k]
    for i in range(n):
        v = order[i]
        h = hub_of[v]
        if h >= 0:
            up[v, h >> 6] |= one << np.uint64(h & 63)
        for e in range(rev_ptr[v], rev_ptr[v + 1]):
            u = rev_idx[e]
            for k in range(words):
                up[v, k] |= up[u, k]
    return down, up


# --------------------------------------------------------------------------------------------
# Queries: cuts, then the label-pruned multi-query bitmask search (Section 5, Algorithm 7)
# --------------------------------------------------------------------------------------------
UNDECIDED, SAME_COMPONENT, LEVEL_CUT, LABEL_CUT, TREE_CUT, HUB_CUT, SAME_VERTEX, UNKNOWN = range(8)
#: status codes whose answer is true
SETTLED_TRUE = (SAME_COMPONENT, TREE_CUT, HUB_CUT, SAME_VERTEX)


@njit(**_JIT)
def _may_reach(u, t, level, inner, outer, down, up):
    """The negative cuts: False when u certainly does not reach t (u != t): levels, the d
    GRAIL intervals, and the hub sets."""
    if level[u] >= level[t]:
        return False
    for j in range(inner.shape[1]):
        if inner[t, j] < inner[u, j] or outer[t, j] > outer[u, j]:
            return False
    for k in range(down.shape[1]):
        if (down[t, k] & ~down[u, k]) != 0 or (up[u, k] & ~up[t, k]) != 0:
            return False
    return True


@njit(**_JIT)
def _tree_reaches(u, t, tree_lo, tree_post):
    """Positive cut: t lies in u's spanning-tree interval (label 0's post order)."""
    return tree_lo[u] <= tree_post[t] and tree_post[t] <= tree_post[u]


@njit(**_JIT)
def _hub_reaches(u, t, down, up):
    """Positive cut: u reaches a hub that reaches t."""
    for k in range(down.shape[1]):
        if (down[u, k] & up[t, k]) != 0:
            return True
    return False


@njit(**_JIT)
def query_cuts(sid, did, comp, level, inner, outer, tree_lo, tree_post, down, up, prune, status):
    """Classify each query of vertex ids (negative: NULL or not a vertex) in one pass: the
    component lookup and every cut, one status code per query (see the module's constants).

    ``comp`` may be empty: the components are then the vertices (an acyclic input). With
    ``prune`` off only the identity cuts (unknown, same vertex, same component) apply.

    Two sweeps: the first does only the lookups every query needs (components, levels) with
    no unpredictable branch, so the processor keeps many cache misses in flight; the second
    runs the rest for the queries the level cut left: the positive cuts first (cheap, and a
    reachable pair would pass every negative test), then the labels and hub sets.
    """
    identity = comp.shape[0] == 0
    nq = sid.shape[0]
    cu = np.empty(nq, np.int32)
    cv = np.empty(nq, np.int32)
    for q in range(nq):
        a = sid[q]
        b = did[q]
        ok = (a >= 0) & (b >= 0)
        a = a if ok else 0
        b = b if ok else 0
        u = a if identity else comp[a]
        t = b if identity else comp[b]
        cu[q] = u
        cv[q] = t
        code = UNDECIDED
        code = LEVEL_CUT if prune & (level[u] >= level[t]) else code
        code = SAME_COMPONENT if u == t else code
        code = SAME_VERTEX if a == b else code
        status[q] = code if ok else UNKNOWN
    if not prune:
        return
    for q in range(nq):
        if status[q] != UNDECIDED:
            continue
        u = cu[q]
        t = cv[q]
        if _tree_reaches(u, t, tree_lo, tree_post):
            status[q] = TREE_CUT
        elif _hub_reaches(u, t, down, up):
            status[q] = HUB_CUT
        elif not _may_reach(u, t, level, inner, outer, down, up):
            status[q] = LABEL_CUT


@njit(**_JIT)
def bitmask_search(fwd_ptr, fwd_idx, level, inner, outer, tree_lo, tree_post, down, up, cs, ct,
                   words, prune, seen, pend, queued, marked, touched, stack):
    """Answer queries cs[i] ->? ct[i] with one bit per query, 64 * ``words`` queries a pass.

    Every vertex carries ``words`` 64-bit words: bit i of ``seen`` says query i has reached it,
    bit i of ``pend`` that it still has to expand it. A bit enters a child only when the child
    passes the level and label cuts for that query's target; a query stops (its bit is dropped
    everywhere) once it is answered, either by meeting its target or by entering a vertex
    whose tree interval holds the target or that reaches a hub reaching the target. ``prune=False`` turns every cut off (a plain
    multi-source BFS, the baseline the cuts are measured against). Returns bool answers.

    The scratch arrays (``seen``/``pend`` uint64[n, words] and ``queued``/``marked`` bool[n]
    all zero, ``touched``/``stack`` int32[n]) are handed back all zero again, so one set per
    thread serves every call without clearing n-sized memory each time.
    """
    nq = cs.shape[0]
    ans = np.zeros(nq, np.bool_)
    per = 64 * words
    done = np.zeros(words, np.uint64)
    one = np.uint64(1)
    for base in range(0, nq, per):
        nb = min(per, nq - base)
        ntouched = 0
        top = 0
        for wd in range(words):
            done[wd] = np.uint64(0)
        for i in range(nb):
            u = cs[base + i]
            wd = i >> 6
            b = one << np.uint64(i & 63)
            if not marked[u]:
                marked[u] = True
                touched[ntouched] = u
                ntouched += 1
            seen[u, wd] |= b
            pend[u, wd] |= b
            if not queued[u]:
                queued[u] = True
                stack[top] = u
                top += 1
        remaining = nb
        while top > 0 and remaining > 0:
            top -= 1
            v = stack[top]
            queued[v] = False
            for e in range(fwd_ptr[v], fwd_ptr[v + 1]):
                w = fwd_idx[e]
                for wd in range(words):
                    new = pend[v, wd] & ~done[wd] & ~seen[w, wd]
                    if new == 0:
                        continue
                    if not marked[w]:
                        marked[w] = True
                        touched[ntouched] = w
                        ntouched += 1
                    seen[w, wd] |= new
                    keep = np.uint64(0)
                    bits = new
                    while bits != 0:
                        low = bits & (~bits + one)
                        bits ^= low
                        i = wd * 64 + _ctz(low)
                        t = ct[base + i]
                        if w == t or (prune and (_tree_reaches(w, t, tree_lo, tree_post)
                                                 or _hub_reaches(w, t, down, up))):
                            ans[base + i] = True
                            done[wd] |= low
                            remaining -= 1
                        elif not prune or _may_reach(w, t, level, inner, outer, down, up):
                            keep |= low
                    if keep != 0:
                        pend[w, wd] |= keep
                        if not queued[w]:
                            queued[w] = True
                            stack[top] = w
                            top += 1
            for wd in range(words):
                pend[v, wd] = np.uint64(0)
        for k in range(ntouched):
            u = touched[k]
            marked[u] = False
            queued[u] = False
            for wd in range(words):
                seen[u, wd] = np.uint64(0)
                pend[u, wd] = np.uint64(0)
    return ans


@njit(**_JIT)
def _ctz(low):
    """Index of the single set bit of a power of two."""
    i = 0
    if low & np.uint64(0xFFFFFFFF) == 0:
        i += 32
        low >>= np.uint64(32)
    if low & np.uint64(0xFFFF) == 0:
        i += 16
        low >>= np.uint64(16)
    if low & np.uint64(0xFF) == 0:
        i += 8
        low >>= np.uint64(8)
    if low & np.uint64(0xF) == 0:
        i += 4
        low >>= np.uint64(4)
    if low & np.uint64(0x3) == 0:
        i += 2
        low >>= np.uint64(2)
    if low & np.uint64(0x1) == 0:
        i += 1
    return i


@njit(**_JIT)
def key_hash_sum(keys):
    """Order-independent 64-bit sum of mix64 over integer keys."""
    acc = np.uint64(0)
    for i in range(keys.shape[0]):
        acc += mix64(np.uint64(keys[i]))
    return acc


@njit(**_JIT)
def edge_hash_sum(src, dst):
    """Order-independent 64-bit sum of mix64(src, dst) over the edges (duplicates counted)."""
    acc = np.uint64(0)
    for e in range(src.shape[0]):
        acc += mix64((np.uint64(src[e]) << np.uint64(32)) ^ np.uint64(dst[e]))
    return acc
