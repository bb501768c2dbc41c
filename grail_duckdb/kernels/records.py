"""The GPU backend's query layout of the labels: one record of int32 per component.

The exact search tests every edge it crosses against the labels of a vertex it has never
seen, so each test is a random read of device memory. Kept as separate arrays (levels, the
two trees, the d GRAIL intervals as two matrices, the hub words of either side) the labels of
one component lie in six or more cache lines; the record puts them in one (128 bytes for the
default d = 9 and two hub words; 92, padded to 128, for d = 5), in the order a search tests
them (the level, the GRAIL intervals, which settle most vertices it meets, the trees, the
hubs):

====================== ================================================================
ints                   field
====================== ================================================================
0                      the topological level
1 .. 2d                the GRAIL intervals, ``inner_j, outer_j`` side by side
``tree_at`` .. + 3     the two spanning-tree intervals (``shared.TREE_COLUMNS``, one int4,
                       16-byte aligned)
``hub_at`` ..          the hub words the component reaches, then those that reach it
                       (uint64, ``hw`` each, 8-byte aligned)
====================== ================================================================

A record is padded to a power of two up to a line, so with a line-aligned base (every CuPy
allocation is) no record straddles two lines. The CPU backend reads the label arrays
themselves (their rows sit in the host's caches). On the GPU the record is the labels'
storage: :func:`record_labels` packs them once (after a build, a load, a move to the device)
and hands back ``Labels`` whose arrays are strided views of it, so the device holds the labels
once, but for the levels, which also stay as their own array: the level cut settles most
random pairs before any other label is read, and 4 bytes per vertex stay in a small graph's
L2 where its records would not. The predicates of both backends are the shared ones.

>>> import numpy as np
>>> from grail_duckdb.model import Labels
>>> lab = Labels(np.array([0, 1]), np.array([[1], [2]]), np.array([[5], [6]]),
...              np.array([[0, 3, 1, 2], [4, 4, 0, 0]]), np.array([[7], [8]], np.uint64),
...              np.array([[9], [10]], np.uint64))
>>> record_layout(1, 1)
(4, 8, 16)
>>> r = label_record(np, lab)
>>> r[1, :8].tolist(), r[1, 8:12].view(np.uint64).tolist()
([1, 2, 6, 0, 4, 4, 0, 0], [8, 10])
>>> v = record_labels(np, lab)
>>> v.record is not None and np.shares_memory(v.hub_up, v.record), v.hub_up.tolist()
(True, [[9], [10]])
>>> np.shares_memory(v.level, v.record), v.level.tolist()
(False, [0, 1])
"""
from __future__ import annotations

import dataclasses

#: int32 offsets of the record's fixed fields (the CUDA header defines them too)
RECORD_LEVEL, RECORD_LABELS = 0, 1
#: int32 per 32-byte sector and per 128-byte cache line of device memory
SECTOR_INTS, LINE_INTS = 8, 32


def record_layout(d: int, hub_words: int) -> tuple[int, int, int]:
    """``(tree_at, hub_at, stride)``: the int32 offsets of the trees and of the hub words in
    a record, and the record's length in int32, for d labels and ``hub_words`` words per
    side: a power of two up to a cache line, so that no record straddles two lines (a 96-byte
    record padded to 128 bytes: 10M random pairs 8-11% faster on the 250M- and 2.5B-edge
    citation graphs, H200, with the search's wide L2 fetches), whole lines beyond."""
    tree_at = (RECORD_LABELS + 2 * d + 3) & ~3
    hub_at = tree_at + 4
    end = hub_at + 4 * hub_words
    stride = SECTOR_INTS
    while stride < min(end, LINE_INTS):
        stride *= 2
    return tree_at, hub_at, stride if end <= LINE_INTS else -(-end // LINE_INTS) * LINE_INTS


def label_record(xp, lab):
    """The labels ``lab`` (:class:`grail_duckdb.engine.labels.Labels`) as one int32 matrix
    of a record per component (layout: the module's notes), on the backend of ``xp``."""
    n, d = int(lab.level.shape[0]), int(lab.inner.shape[1])
    hw = int(lab.hub_down.shape[1])
    rec = xp.zeros((n, record_layout(d, hw)[2]), xp.int32)
    rec[:, RECORD_LEVEL] = lab.level
    for name, field in _fields(xp, rec, d, hw).items():
        field[...] = getattr(lab, name)
    return rec


def record_labels(xp, lab):
    """``lab`` packed into one record matrix (:func:`label_record`) and given back as a
    ``Labels`` of the same values whose arrays are views of it (its ``record`` field set),
    but for ``level`` and the window hubs' arrays, kept contiguous beside it (only the
    classification reads those). The caller drops ``lab``'s other arrays:
    the labels then take the device's memory once."""
    d, hw = int(lab.inner.shape[1]), int(lab.hub_down.shape[1])
    rec = label_record(xp, lab)
    windows = {} if lab.win_down is None else {
        name: xp.ascontiguousarray(getattr(lab, name)) for name in ("win_down", "win_up")}
    if windows:
        windows["win_first"] = xp.ascontiguousarray(xp.asarray(lab.win_first, xp.int32))
    return dataclasses.replace(lab, record=rec, level=xp.ascontiguousarray(lab.level),
                               **_fields(xp, rec, d, hw), **windows)


def with_record(xp, lab, rec, **arrays):
    """``lab`` whose arrays but the level and the windows are views of the record matrix
    ``rec`` (:func:`label_record`'s layout), with ``arrays`` (the level, the windows) as
    given: an appended index's labels, whose record grew by the appended rows."""
    d, hw = int(lab.inner.shape[1]), int(lab.hub_down.shape[1])
    return dataclasses.replace(lab, record=rec, **_fields(xp, rec, d, hw), **arrays)


def _fields(xp, rec, d, hw):
    """The record matrix's fields but the level, as views of it named like ``Labels``'s
    arrays: the one place that maps the layout onto the labels."""
    tree_at, hub_at, _ = record_layout(d, hw)
    hubs = _as_u64(xp, rec[:, hub_at:hub_at + 4 * hw])
    return dict(inner=rec[:, RECORD_LABELS:RECORD_LABELS + 2 * d:2],
                outer=rec[:, RECORD_LABELS + 1:RECORD_LABELS + 2 * d:2],
                tree=rec[:, tree_at:tree_at + 4], hub_down=hubs[:, :hw], hub_up=hubs[:, hw:])


def _as_u64(xp, a):
    """The int32 matrix ``a`` (rows of an even number of contiguous ints, 8-byte aligned)
    seen as a uint64 matrix of half its width: a view, no copy."""
    if xp.__name__ == "numpy":
        return a.view(xp.uint64)  # NumPy allows it when the last axis is contiguous
    rows, width = a.shape
    return xp.ndarray((rows, width // 2), xp.uint64, memptr=a.data, strides=(a.strides[0], 8))
