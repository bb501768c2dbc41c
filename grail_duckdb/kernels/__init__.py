"""The one interface to the hot loops, implemented by both backends.

:class:`CpuKernels` wraps the Numba twins in :mod:`.cpu`; ``GpuKernels`` (in :mod:`.gpu`) wraps
the CUDA sources in the repository's ``kernels/*.cu``. Pipeline modules (csr, condensation,
labels, search) call only these methods, with arrays of the backend's own array module, so each
algorithm is written once and runs on either backend with identical results.
"""
from __future__ import annotations

import threading

import numpy as np

from . import cpu


class CpuKernels:
    """Kernels over NumPy arrays; see the docstrings of :mod:`grail_duckdb.kernels.cpu`."""

    name = "cpu"
    xp = np

    def __init__(self):
        self._local = threading.local()

    def _search_scratch(self, n, words):
        """Per-thread zeroed scratch for ``bitmask_search`` (which leaves it zeroed)."""
        cached = getattr(self._local, "scratch", None)
        if cached is None or cached[0].shape != (n, words):
            cached = (np.zeros((n, words), np.uint64), np.zeros((n, words), np.uint64),
                      np.zeros(n, np.bool_), np.zeros(n, np.bool_),
                      np.empty(n, np.int32), np.empty(n, np.int32))
            self._local.scratch = cached
        return cached

    # --- CSR -------------------------------------------------------------------------------
    def csr(self, src, dst, n):
        return cpu.csr_from_edges(src, dst, n)

    def dedupe_rows(self, ptr, idx):
        return cpu.dedupe_rows(ptr, idx)

    # --- condensation ----------------------------------------------------------------------
    def trim(self, fwd, rev, alive):
        return int(cpu.trim(fwd.indptr, fwd.indices, rev.indptr, rev.indices, alive))

    def reach_within_colour(self, g, seeds, colour):
        return cpu.reach_within_colour(g.indptr, g.indices, seeds, colour)

    def propagate_max_colour(self, g, colour):
        cpu.propagate_max_colour(g.indptr, g.indices, colour)

    def rank_by_first_occurrence(self, label):
        out, k = cpu.rank_by_first_occurrence(label)
        return out, int(k)

    def condensed_edges(self, g, comp):
        return cpu.condensed_edges(g.indptr, g.indices, comp)

    # --- labels ----------------------------------------------------------------------------
    def topological_levels(self, fwd, rev):
        level, order, seen = cpu.topological_levels(fwd.indptr, fwd.indices, rev.indptr)
        if seen != fwd.n:
            raise AssertionError("condensed graph is not acyclic")  # a bug, never user input
        return level, order

    def tree_parents(self, rev, level):
        return cpu.tree_parents(rev.indptr, rev.indices, level)

    def subtree_sizes(self, parent, order):
        return cpu.subtree_sizes(parent, order)

    def post_orders(self, parent, order, size, d, seed):
        return cpu.post_orders(parent, order, size, d, seed)

    def interval_bounds(self, fwd, order, post):
        return cpu.interval_bounds(fwd.indptr, fwd.indices, order, post)

    def hub_bits(self, fwd, rev, order, hub_of, words):
        return cpu.hub_bits(fwd.indptr, fwd.indices, rev.indptr, rev.indices, order, hub_of,
                            words)

    # --- queries ---------------------------------------------------------------------------
    def query_cuts(self, sid, did, comp, lab, prune=True):
        """Status code per query of vertex ids; ``comp`` None when components are vertices."""
        status = np.empty(sid.shape[0], np.int8)
        cpu.query_cuts(sid, did, _EMPTY_COMP if comp is None else comp, lab.level, lab.inner,
                       lab.outer, lab.tree_lo, lab.tree_post, lab.hub_down, lab.hub_up, prune,
                       status)
        return status

    def bitmask_search(self, dag, lab, cs, ct, words=1, prune=True):
        return cpu.bitmask_search(dag.indptr, dag.indices, lab.level, lab.inner, lab.outer,
                                  lab.tree_lo, lab.tree_post, lab.hub_down, lab.hub_up, cs, ct,
                                  words, prune,
                                  *self._search_scratch(dag.n, words))

    def edge_hash_sum(self, src, dst):
        return int(cpu.edge_hash_sum(src, dst))


_EMPTY_COMP = np.empty(0, np.int32)

#: status codes returned by ``query_cuts`` (the same numbers in kernels/search.cu)
UNDECIDED, SAME_COMPONENT, LEVEL_CUT, LABEL_CUT, TREE_CUT, HUB_CUT, SAME_VERTEX, UNKNOWN = (
    cpu.UNDECIDED, cpu.SAME_COMPONENT, cpu.LEVEL_CUT, cpu.LABEL_CUT, cpu.TREE_CUT, cpu.HUB_CUT,
    cpu.SAME_VERTEX, cpu.UNKNOWN)
SETTLED_TRUE = cpu.SETTLED_TRUE
