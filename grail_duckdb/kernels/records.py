"""The GPU backend's query layout of the labels: one record of int32 per component.

The exact search tests every edge it crosses against the labels of a vertex it has never
seen, so each test is a random read of device memory, paid per 32-byte sector. Kept as
separate arrays (levels, the two trees, the d GRAIL intervals as two matrices, the hub words
of either side) the labels of one component lie in six or more sectors; the record puts them
in ``stride / 8`` consecutive ones (three for d = 5 and two hub words), the fields a test
reads first in the first sector:

====================== ================================================================
ints                   field
====================== ================================================================
0 .. 3                 the two spanning-tree intervals (``shared.TREE_COLUMNS``, one int4)
4                      the topological level
5 .. 5 + 2d - 1        the GRAIL intervals, ``inner_j, outer_j`` side by side
``hub_at`` ..          the hub words the component reaches, then those that reach it
                       (uint64, ``hw`` each, 8-byte aligned)
====================== ================================================================

A record is padded to whole sectors, so with a 32-byte aligned base (every CuPy allocation
is) no record straddles more sectors than it fills. The CPU backend reads the label arrays
themselves (their rows sit in the host's caches); the record is built from them once per
index by the GPU backend, on the device, and the predicates of both are the shared ones.

>>> import numpy as np
>>> from grail_duckdb.engine.labels import Labels
>>> lab = Labels(np.array([0, 1]), np.array([[1], [2]]), np.array([[5], [6]]),
...              np.array([[0, 3, 1, 2], [4, 4, 0, 0]]), np.array([[7], [8]], np.uint64),
...              np.array([[9], [10]], np.uint64))
>>> record_layout(1, 1)
(8, 16)
>>> r = label_record(np, lab)
>>> r[1, :8].tolist(), r[1, 8:12].view(np.uint64).tolist()
([4, 4, 0, 0, 1, 2, 6, 0], [8, 10])
"""
from __future__ import annotations

#: int32 offsets of the record's fixed fields (the CUDA header defines them too)
RECORD_TREE, RECORD_LEVEL, RECORD_LABELS = 0, 4, 5
#: int32 per 32-byte sector of device memory
SECTOR_INTS = 8


def record_layout(d: int, hub_words: int) -> tuple[int, int]:
    """``(hub_at, stride)``: the int32 offset of the hub words in a record and the record's
    length in int32 (whole sectors) for d labels and ``hub_words`` words per side."""
    hub_at = (RECORD_LABELS + 2 * d + 1) & ~1
    end = hub_at + 4 * hub_words
    return hub_at, -(-end // SECTOR_INTS) * SECTOR_INTS


def label_record(xp, lab):
    """The labels ``lab`` (:class:`grail_duckdb.engine.labels.Labels`) as one int32 matrix
    of a record per component (layout: the module's notes), on the backend of ``xp``."""
    n, d = int(lab.level.shape[0]), int(lab.inner.shape[1])
    hw = int(lab.hub_down.shape[1])
    hub_at, stride = record_layout(d, hw)
    rec = xp.zeros((n, stride), xp.int32)
    rec[:, RECORD_TREE:RECORD_TREE + 4] = lab.tree
    rec[:, RECORD_LEVEL] = lab.level
    rec[:, RECORD_LABELS:RECORD_LABELS + 2 * d:2] = lab.inner
    rec[:, RECORD_LABELS + 1:RECORD_LABELS + 2 * d:2] = lab.outer
    hubs = rec[:, hub_at:hub_at + 4 * hw]
    hubs[:, :2 * hw] = xp.ascontiguousarray(lab.hub_down).view(xp.int32)
    hubs[:, 2 * hw:] = xp.ascontiguousarray(lab.hub_up).view(xp.int32)
    return rec
