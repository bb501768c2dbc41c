"""The CPU backend: :class:`CpuKernels`, the kernel interface over NumPy arrays.

The Numba twins of the CUDA sources live beside it, one module per source file:
:mod:`.graph` (``graph.cu`` and ``scc.cu``), :mod:`.labels` (``labels.cu``) and :mod:`.search`
(``search.cu``). All are ``nogil``: DuckDB's worker threads, which call the ``reaches`` UDF
concurrently, are not serialised by the GIL while a kernel runs.
"""
from __future__ import annotations

import threading

import numpy as np

from ..protocol import CSR, TopoOrder
from ..shared import pack_pairs
from . import compiled  # noqa: F401  (one stderr line when Numba compiles the kernels)
from . import graph, labels, search

_EMPTY_COMP = np.empty(0, np.int32)


class CpuKernels:
    """Kernels over NumPy arrays (see :class:`grail_duckdb.kernels.protocol.Kernels`).

    The only state is per-thread scratch for the search (handed back zeroed by every call),
    so concurrent calls from several threads never share memory they write.
    """

    name = "cpu"
    xp = np

    def __init__(self):
        self._local = threading.local()

    def synchronize(self) -> None:
        return None

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
    def csr_of_pairs(self, pairs, n):
        return graph.csr_of_pairs(np.ascontiguousarray(pairs, np.uint64), n)

    def csr(self, src, dst, n):
        return self.csr_of_pairs(pack_pairs(np, src, dst), n)

    # --- condensation ----------------------------------------------------------------------
    def trim(self, fwd: CSR, rev: CSR, alive):
        return int(graph.trim(fwd.indptr, fwd.indices, rev.indptr, rev.indices, alive))

    def reach_within_colour(self, g: CSR, seeds, colour):
        return graph.reach_within_colour(g.indptr, g.indices, seeds, colour)

    def propagate_max_colour(self, g: CSR, colour):
        graph.propagate_max_colour(g.indptr, g.indices, colour)

    def rank_by_first_occurrence(self, label):
        out, k = graph.rank_by_first_occurrence(label)
        return out, int(k)

    def component_pairs(self, g: CSR, comp):
        return graph.component_pairs(g.indptr, g.indices, comp)

    # --- labels ----------------------------------------------------------------------------
    def topological_levels(self, fwd: CSR, rev: CSR) -> TopoOrder:
        level, order, seen = labels.topological_levels(fwd.indptr, fwd.indices, rev.indptr)
        if seen != fwd.n:
            raise AssertionError("condensed graph is not acyclic")  # a bug, never user input
        top = int(level.max()) + 1 if level.shape[0] else 0
        offsets = np.searchsorted(level[order], np.arange(top + 1), side="left")
        return TopoOrder(level, order, offsets.astype(np.int64))

    def tree_parents(self, rev: CSR, level):
        return labels.tree_parents(rev.indptr, rev.indices, level)

    def subtree_sizes(self, parent, topo: TopoOrder):
        return labels.subtree_sizes(parent, topo.order)

    def post_orders(self, parent, topo: TopoOrder, size, d, seed):
        return labels.post_orders(parent, topo.order, size, d, seed)

    def interval_bounds(self, fwd: CSR, topo: TopoOrder, post):
        return labels.interval_bounds(fwd.indptr, fwd.indices, topo.order, post)

    def hub_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of, words):
        return labels.hub_bits(fwd.indptr, fwd.indices, rev.indptr, rev.indices, topo.order,
                               hub_of, words)

    # --- queries ---------------------------------------------------------------------------
    def query_cuts(self, sid, did, comp, lab, prune=True):
        status = np.empty(sid.shape[0], np.int8)
        search.query_cuts(sid, did, _EMPTY_COMP if comp is None else comp, lab.level, lab.inner,
                          lab.outer, lab.tree_lo, lab.tree_post, lab.hub_down, lab.hub_up,
                          prune, status)
        return status

    def bitmask_search(self, dag: CSR, lab, cs, ct, words=1, prune=True):
        return search.bitmask_search(dag.indptr, dag.indices, lab.level, lab.inner, lab.outer,
                                     lab.tree_lo, lab.tree_post, lab.hub_down, lab.hub_up, cs,
                                     ct, words, prune, *self._search_scratch(dag.n, words))

    # --- fingerprints ----------------------------------------------------------------------
    def edge_hash_sum(self, pairs):
        return int(graph.edge_hash_sum(np.ascontiguousarray(pairs, np.uint64)))

    def key_hash_sum(self, keys):
        return int(graph.key_hash_sum(keys))
