"""GRAIL interval labels over the condensed DAG, with four breadth-first passes.

GRAIL GPU paper (grail-gpu-reachability-computation2020), Section 4, Algorithms 2-6:

1. DAG -> directed tree: one parent per vertex (here: the smallest-id in-neighbour one
   topological level above, so the tree is the same on every backend);
2. subtree sizes, bottom-up;
3. post-order ranks, top-down, for d sibling orders (d randomized label pairs);
4. intervals, bottom-up over **every** DAG child: the smallest and the largest post rank
   among a vertex and its descendants (the paper's tree is a DFS tree, whose own rank is
   always the largest; ours is not, so the upper bound is propagated as well).

Per component we also keep its topological level (a negative cut: an edge always goes one
level down or more) and the exact interval of its spanning-tree descendants (a positive cut).
"""
from __future__ import annotations

from dataclasses import dataclass

from .condensation import Condensation


@dataclass(frozen=True)
class Labels:
    level: object  # int32[C]: longest path from a root
    inner: object  # int32[C, d]: min post rank over the vertex and its DAG descendants
    outer: object  # int32[C, d]: max post rank over the vertex and its DAG descendants
    tree_post: object  # int32[C]: post rank in the spanning tree (label 0's sibling order)
    tree_lo: object  # int32[C]: smallest tree_post in the vertex's tree subtree

    @property
    def d(self) -> int:
        return int(self.inner.shape[1])

    def arrays(self) -> dict:
        return {"level": self.level, "inner": self.inner, "outer": self.outer,
                "tree_post": self.tree_post, "tree_lo": self.tree_lo}


def grail_labels(k, cond: Condensation, d: int, seed: int, timer=None) -> Labels:
    """Compute the d label pairs, levels and tree intervals of a condensed DAG."""
    if d < 1:
        raise ValueError(f"labels must be >= 1, got {d}")
    tick = timer or (lambda name: None)
    level, order = k.topological_levels(cond.dag, cond.dag_rev)
    parent = k.tree_parents(cond.dag_rev, level)
    tick("labels: levels and tree (pass 1)")
    size = k.subtree_sizes(parent, order)
    tick("labels: subtree sizes (pass 2)")
    post = k.post_orders(parent, order, size, d, seed)
    tick("labels: post orders (pass 3)")
    inner, outer = k.interval_bounds(cond.dag, order, post)
    tick("labels: intervals (pass 4)")
    tree_post = post[:, 0].copy()
    tree_lo = (tree_post - size + 1).astype(post.dtype)
    return Labels(level, inner, outer, tree_post, tree_lo)
