"""CPU twins of ``kernels/graph.cu`` and ``kernels/scc.cu`` (the CSR's rows are in
:mod:`.rows`): the SCC steps (Multistep: trim, forward-backward, colour propagation), the edges
between components, the largest rows and the fingerprints.

Each computes exactly what its CUDA twin computes; only the schedule differs (a worklist in one
pass where the GPU runs level-synchronous frontiers). Every function is ``nogil``.
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from ..shared import EDGE_LEVEL_CAP, mix64
from .cores import cores, on_cores, task_range
from .rows import sort_range

_JIT = dict(cache=True, nogil=True, boundscheck=False)


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


def representatives(comp):
    """The rows that are their component's first, of components numbered by first occurrence:
    exactly the rows where the running maximum grows (NumPy's passes; the GPU's twin takes
    each component's first row with an atomic minimum).

    >>> representatives(np.array([0, 1, 0, 2, 1], np.int32)).tolist()
    [True, True, False, True, False]
    """
    if comp.shape[0] == 0:
        return np.zeros(0, bool)
    running = np.maximum.accumulate(comp)
    return np.concatenate([[True], running[1:] > running[:-1]])


@njit(inline="always", **_JIT)
def _beats(ptr, a, b):
    """Row a ranks before row b: more entries, or as many and a smaller id."""
    da, db = ptr[a + 1] - ptr[a], ptr[b + 1] - ptr[b]
    return da > db or (da == db and a < b)


@njit(**_JIT)
def _sift_down(heap, size, ptr, i):
    """Restore the heap below slot i (the root holds the row that ranks last)."""
    while True:
        worst = i
        for c in (2 * i + 1, 2 * i + 2):
            if c < size and _beats(ptr, heap[worst], heap[c]):
                worst = c
        if worst == i:
            return
        heap[i], heap[worst] = heap[worst], heap[i]
        i = worst


@njit(**_JIT)
def largest_rows(ptr, count):
    """The ``count`` rows of most entries, by entries descending, ties by id ascending
    (``argsort(-degree, stable)[:count]``) in one pass: a heap of the best rows so far,
    whose root, the one that ranks last, a later row must beat (rows come in id order, so
    only one with more entries can)."""
    n = ptr.shape[0] - 1
    count = min(count, n)
    heap = np.empty(count, np.int64)
    for v in range(count):
        heap[v] = v
    for i in range(count // 2 - 1, -1, -1):
        _sift_down(heap, count, ptr, i)
    least = ptr[heap[0] + 1] - ptr[heap[0]] if count else 0
    for v in range(count, n):
        if count and ptr[v + 1] - ptr[v] > least:
            heap[0] = v
            _sift_down(heap, count, ptr, 0)
            least = ptr[heap[0] + 1] - ptr[heap[0]]
    keys = np.empty(count, np.int64)
    for i in range(count):
        keys[i] = -(ptr[heap[i] + 1] - ptr[heap[i]]) * (n + 1) + heap[i]
    sort_range(keys, 0, count)
    for i in range(count):
        heap[i] = keys[i] - (keys[i] // (n + 1)) * (n + 1)  # the id: the key modulo n + 1
    return heap


@njit(**_JIT)
def component_pairs(ptr, idx, comp):
    """Every edge as a packed pair of components, ``comp[v] << 32 | comp[w]`` (edges inside a
    component become self-loops, which :func:`csr_of_pairs` drops)."""
    n = comp.shape[0]
    out = np.empty(idx.shape[0], np.uint64)
    for v in range(n):
        cv = np.uint64(comp[v]) << np.uint64(32)
        for e in range(ptr[v], ptr[v + 1]):
            out[e] = cv | np.uint64(comp[idx[e]])
    return out


@njit(**_JIT)
def edge_levels(idx, level):
    """int16 per edge: the level of its target, saturated at EDGE_LEVEL_CAP
    (edge_levels_kernel): what the exact search reads beside the edges."""
    out = np.empty(idx.shape[0], np.int16)
    for e in range(idx.shape[0]):
        out[e] = min(level[idx[e]], EDGE_LEVEL_CAP)
    return out


#: pieces of a hash sum (several per core)
_HASH_CHUNKS = 64


@njit(read_only=("keys",), **_JIT)
def _key_hash_parts(task, tasks, keys, part):
    """Each chunk's (every ``tasks``-th from ``task``) wrapping sum of mix64 over its keys."""
    n, chunks = keys.shape[0], part.shape[0]
    for c in range(task, chunks, tasks):
        acc = np.uint64(0)
        lo, hi = task_range(n, c, chunks)
        for i in range(lo, hi):
            acc += mix64(np.uint64(keys[i]))
        part[c] = acc


@njit(**_JIT)
def _edge_hash_parts(task, tasks, pairs, part):
    """Each chunk's wrapping sum of mix64 over its packed edges."""
    m, chunks = pairs.shape[0], part.shape[0]
    for c in range(task, chunks, tasks):
        acc = np.uint64(0)
        lo, hi = task_range(m, c, chunks)
        for e in range(lo, hi):
            acc += mix64(pairs[e])
        part[c] = acc


def _hash_sum(kernel, values) -> int:
    """The chunks' sums of ``kernel`` on every core, summed modulo 2**64 (in any order)."""
    part = np.zeros(_HASH_CHUNKS, np.uint64)
    on_cores(kernel, min(cores(), _HASH_CHUNKS), values, part)
    return int(part.sum(dtype=np.uint64))


def key_hash_sum(keys) -> int:
    """Order-independent 64-bit sum of mix64 over integer keys."""
    return _hash_sum(_key_hash_parts, keys)


def edge_hash_sum(pairs) -> int:
    """Order-independent 64-bit sum of mix64(src << 32 | dst) over packed edges (duplicates
    counted)."""
    return _hash_sum(_edge_hash_parts, pairs)
