"""CPU twins of the CSR part of ``kernels/graph.cu``: rows of packed edges and reversed rows, by
a two-level counting sort on every core.

The edges are first spread over buckets of ``2**ROW_BITS`` consecutive rows (each chunk of the
input counts its edges per bucket, then writes them at its place in each bucket: a stable
pass whose writes go to a few hundred streams), then each bucket is sorted by its rows on its
own (its counts fit a core's L2 cache) and written at its final place. The result does not
depend on the number of threads: the rows of packed edges are sorted and compacted, and the
reversed rows list their sources in order because every step is stable.
"""
from __future__ import annotations

import numpy as np

from ...growth import roomy
from ...jit import njit
from .cores import cores, on_cores, task_range

_JIT = dict(cache=True, nogil=True, boundscheck=False)

#: rows per bucket of the second level: 32K rows' counts and cursors (256 KiB) fit in L2
ROW_BITS = 15
#: a row longer than this is sorted by NumPy's sort, shorter ones by insertion
INSERTION_MAX = 24
_LOW = np.uint64(0xFFFFFFFF)


@njit(**_JIT)
def _bucket_starts(hist):
    """Bucket-major running sums of ``hist[chunk, bucket]``, in place (each chunk's start in
    each bucket); returns ``start[bucket]`` (``buckets + 1`` entries)."""
    chunks, buckets = hist.shape
    start = np.empty(buckets + 1, np.int64)
    acc = 0
    for b in range(buckets):
        start[b] = acc
        for c in range(chunks):
            count = hist[c, b]
            hist[c, b] = acc
            acc += count
    start[buckets] = acc
    return start


@njit(**_JIT)
def _count_pairs(task, tasks, pairs, shift, hist):
    """Each chunk's count of packed edges per bucket ``pairs >> shift`` (``hist[chunk]``;
    a task takes every ``tasks``-th chunk)."""
    chunks, m = hist.shape[0], pairs.shape[0]
    for c in range(task, chunks, tasks):
        lo, hi = task_range(m, c, chunks)
        for e in range(lo, hi):
            hist[c, np.int64(pairs[e] >> shift)] += 1


@njit(**_JIT)
def _place_pairs(task, tasks, pairs, shift, hist, out):
    """Each chunk's packed edges written at its place in each bucket (``hist[chunk]``: its
    starts, advanced as it writes)."""
    chunks, m = hist.shape[0], pairs.shape[0]
    for c in range(task, chunks, tasks):
        lo, hi = task_range(m, c, chunks)
        cursor = hist[c]
        for e in range(lo, hi):
            b = np.int64(pairs[e] >> shift)
            out[cursor[b]] = pairs[e]
            cursor[b] += 1


def _spread_pairs(pairs, shift, buckets, chunks, out):
    """Packed edges into ``out`` grouped by bucket ``pairs >> shift``, stably; returns the
    buckets' starts."""
    hist = np.zeros((chunks, buckets), np.int64)
    tasks = min(cores(), chunks)
    on_cores(_count_pairs, tasks, pairs, shift, hist)
    start = _bucket_starts(hist)
    on_cores(_place_pairs, tasks, pairs, shift, hist, out)
    return start


@njit(**_JIT)
def _sift(a, lo, i, n):
    """Move ``a[lo + i]`` down the max-heap ``a[lo:lo + n]`` to its place."""
    x = a[lo + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and a[lo + c + 1] > a[lo + c]:
            c += 1
        if a[lo + c] <= x:
            break
        a[lo + i] = a[lo + c]
        i = c
    a[lo + i] = x


@njit(**_JIT)
def sort_range(a, lo, hi):
    """Sort ``a[lo:hi]`` ascending in place: a heapsort (no recursion, no allocation; it
    compiles in a tenth of the time of NumPy's sort, which costs a first run seconds)."""
    n = hi - lo
    for i in range(n // 2 - 1, -1, -1):
        _sift(a, lo, i, n)
    for end in range(n - 1, 0, -1):
        x = a[lo + end]
        a[lo + end] = a[lo]
        a[lo] = x
        _sift(a, lo, 0, end)


@njit(inline="always", **_JIT)
def _sort_row(a, lo, hi):
    """Sort ``a[lo:hi]`` in place (insertion for short rows)."""
    if hi - lo > INSERTION_MAX:
        sort_range(a, lo, hi)
        return
    for i in range(lo + 1, hi):
        x = a[i]
        j = i - 1
        while j >= lo and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@njit(**_JIT)
def _bucket_rows(spread, lo, hi, r0, rows, count, kept):
    """One bucket of packed edges ``spread[lo:hi]`` (rows r0 .. r0 + rows - 1) sorted by row
    into ``kept`` (int32 targets), each row sorted, self-loops and duplicates dropped;
    ``count[i]``: the kept targets of row r0 + i. Returns how many were kept."""
    count[:rows + 1] = 0
    for e in range(lo, hi):
        count[np.int64(spread[e] >> np.uint64(32)) - r0 + 1] += 1
    for i in range(rows):
        count[i + 1] += count[i]
    for e in range(lo, hi):
        i = np.int64(spread[e] >> np.uint64(32)) - r0
        kept[count[i]] = np.int32(spread[e] & _LOW)
        count[i] += 1
    out = 0
    start = 0
    for i in range(rows):
        end = count[i]
        _sort_row(kept, start, end)
        v = r0 + i
        prev = -1
        first = out
        for e in range(start, end):
            w = kept[e]
            if w != v and w != prev:
                kept[out] = w
                out += 1
            prev = w
        count[i] = out - first
        start = end
    return out


@njit(**_JIT)
def _kept_rows(task, tasks, spread, start, n, indptr, kept_of):
    """Each bucket of packed edges (grouped by :func:`_spread_pairs`) sorted into rows and
    compacted: its kept targets written over its own edges (as int32, from the bucket's
    start), each row's count of them in ``indptr[row + 1]``, the bucket's count of them in
    ``kept_of[bucket + 1]`` (a task takes every ``tasks``-th bucket)."""
    buckets = start.shape[0] - 1
    size = 1 << ROW_BITS
    targets = spread.view(np.int32)
    for b in range(task, buckets, tasks):
        r0 = b * size
        rows = min(size, n - r0)
        lo, hi = start[b], start[b + 1]
        count = np.empty(rows + 1, np.int64)
        kept = np.empty(hi - lo, np.int32)
        k = _bucket_rows(spread, lo, hi, r0, rows, count, kept)
        for i in range(k):
            targets[2 * lo + i] = kept[i]
        for i in range(rows):
            indptr[r0 + 1 + i] = count[i]
        kept_of[b + 1] = k


@njit(**_JIT)
def _gather_rows(task, tasks, spread, start, kept_of, n, indptr, indices):
    """The kept targets of every bucket moved to their final place, the counts in
    ``indptr`` turned into row starts (``indptr[0]`` is set by the caller)."""
    buckets = start.shape[0] - 1
    size = 1 << ROW_BITS
    targets = spread.view(np.int32)
    for b in range(task, buckets, tasks):
        r0 = b * size
        lo, k0 = start[b], kept_of[b]
        for i in range(kept_of[b + 1] - k0):
            indices[k0 + i] = targets[2 * lo + i]
        acc = k0
        for v in range(r0, r0 + min(size, n - r0)):
            acc += indptr[v + 1]
            indptr[v + 1] = acc


def buckets_of(n: int) -> int:
    """Buckets of ``2**ROW_BITS`` rows covering ``n`` rows (one at least)."""
    return max(1, -(-n // (1 << ROW_BITS)))


#: what :func:`grouped_by_source` finds: edges in no order of sources; grouped by source in
#: source order; and, besides, each source's targets increasing and none the source itself
#: (the packed edges strictly increasing, without self-loops: a CSR's rows already)
UNGROUPED, GROUPED, ROWS = 0, 1, 2


@njit(**_JIT)
def _grouped_part(task, tasks, pairs, out):
    """``out[task]``: what :func:`grouped_by_source` finds of task ``task``'s share of the
    packed edges (and the edge before it)."""
    lo, hi = task_range(pairs.shape[0], task, tasks)
    rows = 1
    if lo < hi and (pairs[lo] >> np.uint64(32)) == (pairs[lo] & _LOW):
        rows = 0
    for e in range(max(lo, 1), hi):
        if (pairs[e] >> np.uint64(32)) < (pairs[e - 1] >> np.uint64(32)):
            out[task] = UNGROUPED
            return
        if pairs[e] <= pairs[e - 1] or (pairs[e] >> np.uint64(32)) == (pairs[e] & _LOW):
            rows = 0
    out[task] = GROUPED + rows


def grouped_by_source(pairs) -> int:
    """Whether packed edges come grouped by source in source order (an edge list read
    from rows, a generator's output: then each row is a run of the input already), and
    whether those runs are rows of a CSR already: ``UNGROUPED``, ``GROUPED`` or ``ROWS``."""
    tasks = max(1, min(cores(), pairs.shape[0] // 4096))
    out = np.zeros(tasks, np.int64)
    on_cores(_grouped_part, tasks, pairs, out)
    return int(out.min())


@njit(**_JIT)
def _run_bounds(pairs, n, bounds):
    """``bounds[task]``: the first edge and the first row of each task's share of edges
    grouped by source (``bounds.shape[0] - 1`` tasks, the last entry the ends): each share
    starts at a row's first edge, so that no row is split."""
    m = pairs.shape[0]
    tasks = bounds.shape[0] - 1
    for t in range(tasks):
        e = task_range(m, t, tasks)[0]
        while 0 < e < m and (pairs[e] >> np.uint64(32)) == (pairs[e - 1] >> np.uint64(32)):
            e += 1
        bounds[t, 0] = e
        bounds[t, 1] = 0 if t == 0 else (np.int64(pairs[e] >> np.uint64(32)) if e < m else n)
    bounds[tasks, 0] = m
    bounds[tasks, 1] = n


@njit(**_JIT)
def _runs_kept(task, tasks, pairs, bounds, indptr, kept_of):
    """Task ``task``'s rows of edges grouped by source (``bounds``): each run's targets
    written as int32 over the task's edges from its first (``2 * lo`` in the int32 view: a
    write never reaches an edge not read yet), sorted, self-loops and duplicates dropped;
    each row's count of them in ``indptr[row + 1]`` (every row of the task's, empty ones
    too), the task's count in ``kept_of[task + 1]``."""
    lo, hi = bounds[task, 0], bounds[task + 1, 0]
    targets = pairs.view(np.int32)
    base = 2 * lo
    out = 0
    v_next = bounds[task, 1]
    e = lo
    while e < hi:
        v = np.int64(pairs[e] >> np.uint64(32))
        for r in range(v_next, v):
            indptr[r + 1] = 0
        start = out
        while e < hi and np.int64(pairs[e] >> np.uint64(32)) == v:
            targets[base + out] = np.int32(pairs[e] & _LOW)
            out += 1
            e += 1
        _sort_row(targets, base + start, base + out)
        kept = start
        prev = -1
        for i in range(base + start, base + out):
            w = targets[i]
            if w != v and w != prev:
                targets[base + kept] = w
                kept += 1
            prev = w
        out = kept
        indptr[v + 1] = kept - start
        v_next = v + 1
    for r in range(v_next, bounds[task + 1, 1]):
        indptr[r + 1] = 0
    kept_of[task + 1] = out


@njit(**_JIT)
def _runs_gathered(task, tasks, pairs, bounds, kept_of, indptr, indices):
    """Task ``task``'s kept targets moved to their place, its rows' counts in ``indptr``
    turned into row starts (``indptr[0]`` is set by the caller)."""
    targets = pairs.view(np.int32)
    lo, k0 = bounds[task, 0], kept_of[task]
    for i in range(kept_of[task + 1] - k0):
        indices[k0 + i] = targets[2 * lo + i]
    acc = k0
    for v in range(bounds[task, 1], bounds[task + 1, 1]):
        acc += indptr[v + 1]
        indptr[v + 1] = acc


@njit(**_JIT)
def _rows_as_they_are(task, tasks, pairs, bounds, indptr, indices):
    """Task ``task``'s rows (``bounds``) of packed edges that are rows already
    (:data:`ROWS`): each target at its own edge's place, each row's start in ``indptr``
    (``indptr[n]`` is set by the caller)."""
    lo, hi = bounds[task, 0], bounds[task + 1, 0]
    v_next = bounds[task, 1]
    for e in range(lo, hi):
        v = np.int64(pairs[e] >> np.uint64(32))
        while v_next <= v:
            indptr[v_next] = e
            v_next += 1
        indices[e] = np.int32(pairs[e] & _LOW)
    for r in range(v_next, bounds[task + 1, 1]):
        indptr[r] = hi


def csr_of_runs(pairs, n: int, rows: bool = False):
    """:func:`csr_of_pairs` of packed edges grouped by source in source order, each
    row made from its run in place (no buckets); ``pairs`` is overwritten. ``rows``: the
    runs are rows already (:data:`ROWS`): their targets are copied to their places."""
    m = pairs.shape[0]
    tasks = max(1, min(cores(), m // 4096))
    bounds = np.empty((tasks + 1, 2), np.int64)
    _run_bounds(pairs, n, bounds)
    indptr = roomy(np, (n + 1,), np.int64)  # the index's rows: room for appended ones
    if rows:
        indices = roomy(np, (m,), np.int32)
        on_cores(_rows_as_they_are, tasks, pairs, bounds, indptr, indices)
        indptr[n] = m
        return indptr, indices
    kept_of = np.zeros(tasks + 1, np.int64)
    on_cores(_runs_kept, tasks, pairs, bounds, indptr, kept_of)
    np.cumsum(kept_of, out=kept_of)
    indices = roomy(np, (int(kept_of[-1]),), np.int32)
    indptr[0] = 0
    on_cores(_runs_gathered, tasks, pairs, bounds, kept_of, indptr, indices)
    return indptr, indices


def csr_of_pairs(pairs, n: int, chunks: int, scratch=None):
    """Rows of packed edges (``src << 32 | dst``): ``(indptr[n+1] int64, indices int32)``,
    each row's targets sorted, self-loops and duplicate targets dropped; ``pairs`` is left as
    it is. ``chunks``: pieces of the input counted at once (a few per core); ``scratch``: a
    uint64 array as long as ``pairs`` to use as the buckets' room (else one is made)."""
    m = pairs.shape[0]
    spread = np.empty(m, np.uint64) if scratch is None else scratch[:m]
    buckets = buckets_of(n)
    start = _spread_pairs(pairs, np.uint64(32 + ROW_BITS), buckets, chunks, spread)
    indptr = roomy(np, (n + 1,), np.int64)  # the index's rows: room for appended ones
    kept_of = np.zeros(buckets + 1, np.int64)
    tasks = min(cores(), buckets)
    on_cores(_kept_rows, tasks, spread, start, n, indptr, kept_of)
    np.cumsum(kept_of, out=kept_of)
    indices = roomy(np, (int(kept_of[-1]),), np.int32)
    indptr[0] = 0
    on_cores(_gather_rows, tasks, spread, start, kept_of, n, indptr, indices)
    return indptr, indices


@njit(**_JIT)
def _count_reversed(task, tasks, ptr, idx, cut, hist):
    """Each chunk of rows' (``cut``) count of edges per bucket of their targets."""
    for c in range(task, hist.shape[0], tasks):
        for e in range(ptr[cut[c]], ptr[cut[c + 1]]):
            hist[c, idx[e] >> ROW_BITS] += 1


@njit(**_JIT)
def _place_reversed(task, tasks, ptr, idx, cut, hist, out):
    """Each chunk of rows' edges v -> w written as ``w << 32 | v`` at its place in the
    bucket of w (``hist[chunk]``: its starts, advanced as it writes)."""
    for c in range(task, hist.shape[0], tasks):
        cursor = hist[c]
        for v in range(cut[c], cut[c + 1]):
            for e in range(ptr[v], ptr[v + 1]):
                w = idx[e]
                b = w >> ROW_BITS
                out[cursor[b]] = (np.uint64(w) << np.uint64(32)) | np.uint64(v)
                cursor[b] += 1


def _spread_reversed(ptr, idx, buckets, chunks, out):
    """Every edge v -> w of the rows as ``w << 32 | v`` in ``out``, grouped by the bucket of
    w, each bucket in order of v; returns the buckets' starts."""
    n, m = ptr.shape[0] - 1, idx.shape[0]
    cut = np.searchsorted(ptr, np.arange(chunks + 1) * m // chunks)  # rows by their edges
    cut[0], cut[chunks] = 0, n
    hist = np.zeros((chunks, buckets), np.int64)
    tasks = min(cores(), chunks)
    on_cores(_count_reversed, tasks, ptr, idx, cut, hist)
    start = _bucket_starts(hist)
    on_cores(_place_reversed, tasks, ptr, idx, cut, hist, out)
    return start


@njit(**_JIT)
def _reversed_of_spread(task, tasks, spread, start, n, rptr, ridx):
    """Each bucket of reversed edges written at its place, stably by row (``rptr[0]`` is
    set by the caller)."""
    buckets = start.shape[0] - 1
    size = 1 << ROW_BITS
    for b in range(task, buckets, tasks):
        r0 = b * size
        rows = min(size, n - r0)
        lo, hi = start[b], start[b + 1]
        cursor = np.zeros(rows + 1, np.int64)
        for e in range(lo, hi):
            cursor[np.int64(spread[e] >> np.uint64(32)) - r0 + 1] += 1
        cursor[0] = lo
        for i in range(rows):
            cursor[i + 1] += cursor[i]
            rptr[r0 + 1 + i] = cursor[i + 1]
        for e in range(lo, hi):
            i = np.int64(spread[e] >> np.uint64(32)) - r0
            ridx[cursor[i]] = np.int32(spread[e] & _LOW)
            cursor[i] += 1


def reverse_rows(ptr, idx, chunks: int, scratch=None):
    """``(indptr, indices)`` of the rows with every edge reversed (duplicates kept); the
    sources are taken in order, so each reversed row comes out sorted. ``scratch``: a uint64
    array at least as long as ``idx`` (else one is made)."""
    n, m = ptr.shape[0] - 1, idx.shape[0]
    spread = np.empty(m, np.uint64) if scratch is None else scratch[:m]
    start = _spread_reversed(ptr, idx, buckets_of(n), chunks, spread)
    rptr = np.empty(n + 1, np.int64)
    ridx = np.empty(m, np.int32)
    rptr[0] = 0
    on_cores(_reversed_of_spread, min(cores(), start.shape[0] - 1), spread, start, n, rptr,
             ridx)
    return rptr, ridx
