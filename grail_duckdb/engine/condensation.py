"""Strongly connected components -> the condensed DAG.

The Multistep algorithm of the manycore paper (graph-analytics-manycore-kokkos, SCC section):

1. **trim**: peel vertices with no live in- or out-edge; each is a singleton component (on a
   DAG this settles every vertex);
2. **forward-backward** from a pivot (the live vertex of largest in*out degree): the vertices
   both reachable from and reaching it form its component, usually the giant one;
3. **trim** again, then **colour propagation** until nothing is live: every live vertex takes
   the largest id among its live ancestors; each vertex that kept its own colour is a root, and
   the vertices of its colour that reach it backwards form its component.

Components are numbered by their smallest vertex id, so the result does not depend on the
backend or on the order in which steps found them.

A graph without cycles (every .gra benchmark graph, every citation graph) skips all three: the
topological sweep that the labels need anyway is run first, and a sweep that visits every
vertex proves each vertex its own component.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..growth import roomy
from ..kernels.protocol import TopoOrder
from .csr import CSR, forward_and_reverse


@dataclass(frozen=True)
class Condensation:
    comp: object  # int32[n]: component id of each vertex
    n_components: int
    dag: CSR  # forward CSR of the condensed DAG, rows sorted, without duplicate targets
    dag_rev: CSR  # reverse CSR of the same DAG
    topo: TopoOrder | None = None  # the DAG's levels, when the condensation found them


def strongly_connected_components(k, fwd: CSR, rev: CSR):
    """Component label of every vertex: ``(comp int32[n], count)`` (Multistep, see module)."""
    xp = k.xp
    n = fwd.n
    alive = xp.ones(n, dtype=bool)
    label = xp.arange(n, dtype=xp.int32)
    k.trim(fwd, rev, alive)
    if bool(alive.any()):
        ids = xp.arange(n, dtype=xp.int32)
        outdeg = xp.diff(fwd.indptr)
        indeg = xp.diff(rev.indptr)
        pivot = int(xp.argmax(xp.where(alive, outdeg * indeg, -1)))
        colour = xp.where(alive, 0, -1).astype(xp.int32)
        seed = xp.zeros(n, dtype=bool)
        seed[pivot] = True
        both = k.reach_within_colour(fwd, seed, colour) & k.reach_within_colour(rev, seed, colour)
        label[both] = pivot
        alive &= ~both
        k.trim(fwd, rev, alive)
        while bool(alive.any()):
            colour = xp.where(alive, ids, -1).astype(xp.int32)
            k.propagate_max_colour(fwd, colour)
            roots = alive & (colour == ids)
            members = k.reach_within_colour(rev, roots, colour)
            label[members] = colour[members]
            alive &= ~members
    return k.rank_by_first_occurrence(label)


def condense(k, graph: list) -> Condensation:
    """Components and the DAG between them (one edge per connected pair of components).

    ``graph`` is the list ``[fwd, rev]`` of the input graph's CSRs; it is emptied as soon as
    they are no longer needed (when the graph has cycles: once every edge is mapped to its
    pair of components), so that their memory is free before the DAG's rows are made.
    """
    fwd, rev = graph
    topo = k.acyclic_levels(fwd, rev)
    if topo is not None:  # already acyclic: each vertex its own component
        comp = roomy(k.xp, (fwd.n,), k.xp.int32)
        comp[:] = k.xp.arange(fwd.n, dtype=k.xp.int32)
        return Condensation(comp, fwd.n, fwd, rev, topo)
    comp, count = strongly_connected_components(k, fwd, rev)
    pairs = k.component_pairs(fwd, comp)
    graph.clear()
    del fwd, rev
    dag, dag_rev = forward_and_reverse(k, pairs, count)
    return Condensation(comp, count, dag, dag_rev)
