"""CPU twins of the hub kernels of ``kernels/labels.cu``: each component's exact reachability
to and from the hub components, as bit sets, the global hubs' (one numbering for all) and the
window hubs' (each component keeps the window of them around its own level:
:func:`grail_duckdb.engine.labels.window_hubs`).
"""
from __future__ import annotations

import numpy as np

from ...jit import njit

from ..shared import funnel
from .cores import on_cores
from .intrinsics import atomic_add, prefetch
from .sweeps import (AHEAD, LONG_ROW, NONE, PIECES_PER_CORE, claim, piece, pieces,
                     prefetch_along, prefetch_rows, wait_level)

_JIT = dict(cache=True, nogil=True, boundscheck=False)


@njit(inline="always", **_JIT)
def shifted_word(bits, w, k, sh):
    """Word k of row w of ``bits`` shifted ``sh`` bits towards the high end (``sh`` < 0:
    towards the low end), with zeros shifted in: the row rebased from one window to another."""
    words = bits.shape[1]
    q = sh >> 6  # floor division, also for sh < 0
    r = np.uint64(sh & 63)
    a = k - q
    hi = bits[w, a] if 0 <= a < words else np.uint64(0)
    lo = bits[w, a - 1] if 0 <= a - 1 < words else np.uint64(0)
    return funnel(lo, hi, r)


@njit(inline="always", **_JIT)
def window_base(v, level, first, span, up):
    """Hub index of bit 0 of v's window: none (``first`` empty) 0; down (the hubs v may reach,
    from its own level on) ``first[level[v]]``; up (the hubs that may reach v, down to its
    own level) ``first[level[v] + 1] - span``. A level outside the table (an appended
    component's, below every built one: :mod:`grail_duckdb.engine.append`) reads the table's
    nearest end, as many hubs as lie above it: none above a level under 0."""
    if first.shape[0] == 0:
        return 0
    top = first.shape[0] - 1
    at = min(max(level[v] + 1 if up else level[v], 0), top)
    return first[at] - span if up else first[at]


@njit(**_JIT)
def _hub_sweep(ptr, idx, order, hub_of, bits, up, fetch):
    """One side of :func:`hub_bits` for the global hubs (one window for all): each vertex's
    own bit, then the rows of its neighbours ORed in; down (``up`` False) bottom-up over the
    children, up top-down over the parents."""
    n = hub_of.shape[0]
    words = bits.shape[1]
    for k in range(n):
        i = k if up else n - 1 - k
        if fetch:
            prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, bits, words, NONE)
        v = order[i]
        _own_bit(bits, v, hub_of[v], 64 * words)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            for q in range(words):
                bits[v, q] |= bits[w, q]


@njit(inline="always", **_JIT)
def _shifted_pair(lo, hi, sh):
    """A 128-bit row ``hi:lo`` shifted ``sh`` bits towards the high end (``sh`` < 0: towards
    the low end), -128 < sh < 128, zeros shifted in: ``(lo, hi)``."""
    zero = np.uint64(0)
    if sh == 0:
        return lo, hi
    if sh >= 64:
        return zero, lo << np.uint64(sh - 64)
    if sh > 0:
        return lo << np.uint64(sh), funnel(lo, hi, np.uint64(sh))
    if sh <= -64:
        return hi >> np.uint64(-sh - 64), zero
    r = np.uint64(-sh)
    return (lo >> r) | (hi << (np.uint64(64) - r)), hi >> r


@njit(inline="always", **_JIT)
def _own_bit(bits, v, h, span):
    """Set bit ``h`` of row v when it lies in the row (0 <= h < span)."""
    if 0 <= h < span:
        bits[v, h >> 6] |= np.uint64(1) << np.uint64(h & 63)


@njit(inline="always", **_JIT)
def _pull_window(wbits, v, w, sh, span):
    """``wbits[v] |=`` row w rebased by ``sh`` bits (nothing when the windows do not meet)."""
    if -span < sh < span:
        if wbits.shape[1] == 2:
            lo, hi = _shifted_pair(wbits[w, 0], wbits[w, 1], sh)
            wbits[v, 0] |= lo
            wbits[v, 1] |= hi
        else:
            for q in range(wbits.shape[1]):
                wbits[v, q] |= shifted_word(wbits, w, q, sh)


@njit(**_JIT)
def _window_sweep(ptr, idx, order, hub_of, level, first, bits, up, fetch):
    """One side of :func:`hub_bits` for the window hubs: each vertex's own bit in its window,
    then the rows of its neighbours, each rebased into the vertex's window."""
    n = hub_of.shape[0]
    span = 64 * bits.shape[1]
    for k in range(n):
        i = k if up else n - 1 - k
        if fetch:
            prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, bits, bits.shape[1], level)
        v = order[i]
        base = window_base(v, level, first, span, up)
        if hub_of[v] >= 0:
            _own_bit(bits, v, hub_of[v] - base, span)
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            _pull_window(bits, v, w, window_base(w, level, first, span, up) - base, span)


@njit(inline="always", **_JIT)
def _bit_pair(h):
    """The 128-bit row with bit h alone (none when h is outside 0..127): ``(lo, hi)``."""
    one, zero = np.uint64(1), np.uint64(0)
    lo = one << np.uint64(h & 63) if 0 <= h < 64 else zero
    hi = one << np.uint64(h & 63) if 64 <= h < 128 else zero
    return lo, hi


@njit(inline="always", **_JIT)
def _rebased_pair(lo, hi, sh):
    """``_shifted_pair`` without branches, for rows whose shifts vary from edge to edge (a
    mispredicted branch costs more than the few shifts computed for nothing)."""
    s = sh if sh >= 0 else -sh
    r = np.uint64(s & 63)
    wide = s >= 64
    if sh >= 0:
        out_lo = np.uint64(0) if wide else lo << r
        out_hi = lo << r if wide else (hi << r) | ((lo >> np.uint64(1)) >> (np.uint64(63) - r))
    else:
        out_lo = hi >> r if wide else (lo >> r) | ((hi << np.uint64(1)) << (np.uint64(63) - r))
        out_hi = np.uint64(0) if wide else hi >> r
    return out_lo, out_hi


@njit(inline="always", **_JIT)
def _pull_both(w, base, a0, a1, w0, w1, rows, wrows, col, base_of):
    """Neighbour w's hub row (``rows[w, 0:2]``) ORed in, and its window row
    (``wrows[w, col:col + 2]``) rebased from w's window to the vertex's (``base``)."""
    a0 |= rows[w, 0]
    a1 |= rows[w, 1]
    sh = base_of[w] - base
    if -128 < sh < 128:
        x0, x1 = _rebased_pair(wrows[w, col], wrows[w, col + 1], sh)
        w0 |= x0
        w1 |= x1
    return a0, a1, w0, w1


@njit(**_JIT)
def _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec, base_of, bits, wbits,
                up, lo, hi):
    """One side of :func:`hub_and_window_bits` for rows of two words each, over the
    vertices at ``order[lo:hi]`` in the sweep's direction: each vertex's hub row and window
    row made in registers from its own bits and its neighbours', then stored;
    ``base_of[v]``: the hub at bit 0 of v's window. With ``rec`` (C x 4) the two rows are
    also stored side by side and read from there (one cache line per neighbour) and every
    row is prefetched ahead, worth it on graphs of several edges per vertex; without
    (0 x 4), neighbours are read from the outputs, and only the rows of a vertex's long
    edge lists are prefetched."""
    n = hub_of.shape[0]
    records = rec.shape[0] > 0
    for k in range(hi - lo):
        i = lo + k if up else hi - 1 - k
        if records:
            prefetch_rows(i, 1 if up else -1, n, order, ptr, idx, rec, 4, base_of)
        v = order[i]
        a0, a1 = _bit_pair(hub_of[v])
        base = window_base(v, level, first, 128, up)
        base_of[v] = base
        w0, w1 = _bit_pair(win_of[v] - base if win_of[v] >= 0 else -1)
        start, end = ptr[v], ptr[v + 1]
        if records:
            for e in range(start, end):
                prefetch_along(e, end, end - start > LONG_ROW, idx, rec, 4, base_of)
                a0, a1, w0, w1 = _pull_both(idx[e], base, a0, a1, w0, w1, rec, rec, 2,
                                            base_of)
            rec[v, 0], rec[v, 1], rec[v, 2], rec[v, 3] = a0, a1, w0, w1
        elif end - start > LONG_ROW:
            for e in range(start, end):
                if e + AHEAD < end:
                    u = idx[e + AHEAD]
                    prefetch(bits, 2 * u)
                    prefetch(wbits, 2 * u)
                    prefetch(base_of, u)
                a0, a1, w0, w1 = _pull_both(idx[e], base, a0, a1, w0, w1, bits, wbits, 0,
                                            base_of)
        else:
            for e in range(start, end):
                a0, a1, w0, w1 = _pull_both(idx[e], base, a0, a1, w0, w1, bits, wbits, 0,
                                            base_of)
        bits[v, 0], bits[v, 1], wbits[v, 0], wbits[v, 1] = a0, a1, w0, w1


def hub_and_window_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of, win_of,
                        level, first, down, up, win_down, win_up, rec, base_of, parts, fetch):
    """:func:`hub_bits` of the global hubs (``hub_of``) and of the window hubs (``win_of``,
    ``first``) at once. Rows of two words: one walk a side (``rec``: 2 x C x 4, or 2 x 0 x 4
    for none, and ``base_of``: 2 x C of room; the outputs need not be zeroed), level by
    level, each level in up to ``parts`` pieces on every core (``parts`` > 0), else down on
    one core and up on another; other
    widths: a walk for each set, down and up on a core each (the outputs come zeroed).
    ``fetch``: the other widths' walks prefetch the rows ahead."""
    two = down.shape[1] == 2 and win_down.shape[1] == 2
    args = (fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of, win_of, level, first,
            down, up, win_down, win_up, rec, base_of, parts, fetch)
    if two and parts > 0:
        levels = offsets.shape[0] - 1
        on_cores(_both_levels, parts // PIECES_PER_CORE, *args,
                 np.zeros(2 * levels, np.int64), np.zeros(2 * levels, np.int64))
    elif two:
        on_cores(_sides, 2, *args)
    else:
        on_cores(_sides_apart, 2, *args)


@njit(**_JIT)
def _both_levels(task, tasks, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of,
                 win_of, level, first, down, up, win_down, win_up, rec, base_of, parts, fetch,
                 taken, done):
    """:func:`hub_and_window_bits` of rows of two words level by level, down from the
    deepest level and then up, one of ``tasks`` side by side."""
    levels = offsets.shape[0] - 1
    for step in range(2 * levels):
        side = 1 if step >= levels else 0  # down from the deepest level, then up
        at = step - levels if side else levels - 1 - step
        lo, hi = offsets[at], offsets[at + 1]
        ptr, idx = (rev_ptr, rev_idx) if side else (fwd_ptr, fwd_idx)
        bits, wbits = (up, win_up) if side else (down, win_down)
        k = pieces(lo, hi, parts)
        c = claim(taken, step, k)
        while c >= 0:
            a, b = piece(lo, hi, c, k)
            _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec[side],
                        base_of[side], bits, wbits, side == 1, a, b)
            atomic_add(done, step, 1)
            c = claim(taken, step, k)
        wait_level(done, step, k)


@njit(**_JIT)
def _sides(task, tasks, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of, win_of,
           level, first, down, up, win_down, win_up, rec, base_of, parts, fetch):
    """:func:`hub_and_window_bits` of rows of two words on a core a side: task 0 down,
    task 1 up."""
    n = hub_of.shape[0]
    ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
    bits, wbits = (up, win_up) if task else (down, win_down)
    _both_sweep(ptr, idx, order, hub_of, win_of, level, first, rec[task], base_of[task],
                bits, wbits, task == 1, 0, n)


@njit(**_JIT)
def _sides_apart(task, tasks, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, offsets, hub_of,
                 win_of, level, first, down, up, win_down, win_up, rec, base_of, parts, fetch):
    """:func:`hub_and_window_bits` of rows of other widths on a core a side (task 0 down,
    task 1 up): a walk for each set of hubs (a kernel of its own: a build, whose rows are
    two words wide, never compiles these walks)."""
    ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
    bits, wbits = (up, win_up) if task else (down, win_down)
    _hub_sweep(ptr, idx, order, hub_of, bits, task == 1, fetch)
    _window_sweep(ptr, idx, order, win_of, level, first, wbits, task == 1, fetch)


def hub_bits(fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level, first, down, up,
             fetch):
    """Reachability to and from hub vertices, as bit sets (one bit per hub).

    ``down[v]``: the hubs v reaches (v included), bottom-up over every DAG child;
    ``up[v]``: the hubs that reach v, top-down over every DAG parent (one core each). They are
    exact, so ``down[u] & up[t] != 0`` proves u reaches t (through a hub), while a hub t
    reaches that u does not (``down[t] & ~down[u]``), or one that reaches u but not t
    (``up[u] & ~up[t]``), proves it does not.

    ``first`` empty: ``hub_of[v]`` is v's bit, the same for every vertex. Else the hubs are
    numbered by level (``first[L]``: hubs above level L) and each vertex keeps a window of
    64 * ``words`` of them (:func:`window_base`): its down window starts at the first hub of
    its own level, its up window ends at the last one. The windows are exact too: a hub in
    v's down window that v reaches through a child c lies at c's level or below, so in c's
    window (c's starts at or after v's, and ends after v's ends); the same upwards.
    ``down`` and ``up`` (C x words) come zeroed; ``fetch``: prefetch the rows ahead.
    """
    side = _hub_side if first.shape[0] == 0 else _window_side
    on_cores(side, 2, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level, first,
             down, up, fetch)


@njit(**_JIT)
def _hub_side(task, tasks, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level, first,
              down, up, fetch):
    """:func:`hub_bits` of the global hubs on a core a side: task 0 down, task 1 up."""
    ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
    _hub_sweep(ptr, idx, order, hub_of, up if task else down, task == 1, fetch)


@njit(**_JIT)
def _window_side(task, tasks, fwd_ptr, fwd_idx, rev_ptr, rev_idx, order, hub_of, level,
                 first, down, up, fetch):
    """:func:`hub_bits` of window hubs on a core a side (a kernel of its own: a build makes
    its window hubs' rows with :func:`hub_and_window_bits`, and never compiles this one)."""
    ptr, idx = (rev_ptr, rev_idx) if task else (fwd_ptr, fwd_idx)
    _window_sweep(ptr, idx, order, hub_of, level, first, up if task else down, task == 1,
                  fetch)
