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
level down or more), the exact intervals of two spanning trees (positive cuts, below), and its
exact reachability to and from 64 * HUB_WORDS hub components (both cuts): on deep citation
DAGs most reachable pairs meet a hub, which settles them before any search. The pairs left
for the exact search lie a few dozen levels apart, between those hubs' levels, so a second
hub set, many hubs spread over the levels, keeps for each component only a window of them
around its own level (:func:`window_hubs`): a positive cut for pairs close in level. Each set
is made only where it can settle pairs: the hubs not on forests (:func:`hubs_pay`), the
windows only on DAGs deeper than a window (:func:`windows_pay`).

The two spanning trees. The tree of step 1 gives each vertex one *parent*; in its post order
the vertices below u form an interval, so t in u's interval proves u -> t. The mirror image
gives each vertex one *child* (its out-neighbour of smallest level, ties: smallest id) and
numbers the tree of those links the same way, from the deepest level up: u in t's interval
proves that u's chain of chosen children passes t. Either tree alone is exact on a forest of
its own kind: the first on graphs where every vertex has one parent at most, the second where
every vertex has one child at most, such as citeseer.scc and uniprotenc_22m.scc (every vertex
of both cites one other at most), whose reachable pairs no other cut settles cheaply.
"""
from __future__ import annotations

import threading

import numpy as np

from ..growth import roomy, roomy_zeros
from ..kernels.protocol import Kernels, TopoOrder
from ..kernels.shared import HUB_WORDS, WIN_WORDS, WINDOW_LEVELS
from ..model import Labels
from .condensation import Condensation


def grail_labels(k: Kernels, cond: Condensation, d: int, seed: int, timer=None,
                 on_intervals=None) -> Labels:
    """Compute the d label pairs, levels and tree intervals of a condensed DAG.
    ``on_intervals``, if given, is called once the levels, trees and intervals are final,
    before the hub passes, with those arrays (``level``, ``tree``, ``inner``, ``outer``: a
    build that saves writes them to its file meanwhile).

    Memory: each pass's inputs are dropped once no later
    pass reads them, the tree of chosen children is made before the post orders exist (on a
    CPU of few cores, beside them: see :func:`trees_side_by_side`), and the post orders go
    once the intervals and the tree of parents hold what they need."""
    if d < 1:
        raise ValueError(f"labels must be >= 1, got {d}")
    tick = timer or (lambda name: None)
    xp = k.xp
    topo = cond.topo if cond.topo is not None else k.topological_levels(cond.dag,
                                                                          cond.dag_rev)
    tree = roomy(xp, (cond.n_components, 4), xp.int32)  # columns: shared.TREE_COLUMNS
    children = _Call(tree_of_children, k, cond, topo, seed, out=tree[:, 2:])
    apart = trees_side_by_side(k)
    if apart:
        children.start()
    try:
        parent = k.tree_parents(cond.dag_rev, topo.level)
        tick("labels: levels and tree (pass 1)")
        if not apart:
            children.run()
            tick("labels: tree of children")
        size = k.subtree_sizes(parent, topo)
        tick("labels: subtree sizes (pass 2)")
        post = k.post_orders(parent, topo, size, d, seed)
        del parent
        _interval_columns(xp, post[:, 0], size, tree[:, :2])
        del size
        tick("labels: post orders (pass 3)")
        inner, outer = k.interval_bounds(cond.dag, topo, post)
        del post
        tick("labels: intervals (pass 4)")
    except BaseException:
        children.wait(quiet=True)  # it writes into ``tree``: never left running
        raise
    children.wait()
    if apart:
        tick("labels: tree of children")  # what is left of it once the intervals are done
    if on_intervals is not None:
        on_intervals({"level": topo.level, "tree": tree, "inner": inner, "outer": outer})
    down, up, windows = hub_labels(k, cond, topo)
    tick("labels: hubs")
    return k.query_labels(Labels(topo.level, inner, outer, tree, down, up, **windows))


def trees_side_by_side(k: Kernels) -> bool:
    """Whether a build makes the tree of chosen children on a thread of its own, beside the
    tree of parents, its post orders and the intervals: on a CPU whose build sweeps each run
    on one core (``CpuKernels.sweeps_on_one_core``: few cores), so that both cores work
    through the two chains of serial sweeps. Elsewhere each sweep uses every core itself."""
    return k.name == "cpu" and k.sweeps_on_one_core()


class _Call:
    """``fn(*args, **kw)``, run here (:meth:`run`) or on a thread of its own (:meth:`start`);
    :meth:`wait` waits for it and raises what it raised.

    >>> c = _Call(divmod, 7, 2)
    >>> c.start(); c.wait()
    >>> bad = _Call(divmod, 1, 0)
    >>> bad.run(); bad.wait()
    Traceback (most recent call last):
    ZeroDivisionError: integer division or modulo by zero
    """

    def __init__(self, fn, *args, **kw):
        self._call = lambda: fn(*args, **kw)
        self._thread = None
        self._error = None

    def run(self) -> None:
        try:
            self._call()
        except BaseException as exc:  # raised by wait(), in the caller's thread
            self._error = exc

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="grail-tree", daemon=True)
        self._thread.start()

    def wait(self, quiet: bool = False) -> None:
        """Wait for the call; raise what it raised (``quiet``: drop it)."""
        if self._thread is not None:
            self._thread.join()
        error, self._error = self._error, None
        if error is not None and not quiet:
            raise error


def hub_labels(k: Kernels, cond: Condensation, topo: TopoOrder):
    """``(down, up, windows)``: the global hubs' rows and the window hubs' arrays (a dict of
    ``win_down``, ``win_up``, ``win_first``; empty: none), each set made only where it can
    settle pairs that the cuts before it leave (:func:`hubs_pay`, :func:`windows_pay`); the
    global hubs' rows are zero where they cannot (no bit set proves nothing)."""
    xp, dag, dag_rev = k.xp, cond.dag, cond.dag_rev
    if not hubs_pay(xp, dag, dag_rev, k.largest_rows):
        down, up = (roomy_zeros(xp, (dag.n, HUB_WORDS), xp.uint64) for _ in range(2))
        return down, up, {}
    hub_of = hub_slots(xp, dag, dag_rev, 64 * HUB_WORDS, k.largest_rows)
    if not windows_pay(dag.n, topo.levels):
        down, up = k.hub_bits(dag, dag_rev, topo, hub_of, HUB_WORDS)
        return down, up, {}
    win_of, first = window_hubs(xp, dag, topo.level, topo.levels, largest=k.largest_rows)
    down, up, win_down, win_up = k.hub_and_window_bits(dag, dag_rev, topo, hub_of, HUB_WORDS,
                                                       win_of, WIN_WORDS, first)
    return down, up, {"win_down": win_down, "win_up": win_up, "win_first": first}


def hubs_pay(xp, dag, dag_rev, largest=None) -> bool:
    """Whether the global hubs can settle pairs that the cuts before them leave: not in a
    DAG where every component has one parent at most, or one child at most (citeseer.scc,
    uniprotenc_22m.scc): one of the two spanning trees is that DAG, so the tree cut settles
    every reachable pair, and the level and label cuts leave the hubs almost no unreachable
    one (of the bench's 100,000 random pairs, 8 on citeseer.scc, none on uniprotenc_22m.scc;
    the bounded search settles those as cheaply). ``largest``: the backend's
    ``Kernels.largest_rows`` (the longest row in one pass), else NumPy's or CuPy's sort.

    >>> from grail_duckdb.kernels.protocol import CSR
    >>> hubs_pay(np, CSR(np.array([0, 2, 2, 2]), np.array([1, 2])), CSR(np.array([0, 0, 1, 2]), np.array([0, 0])))
    False
    """
    if dag.m >= dag.n:  # a forest has fewer edges than vertices
        return True
    if dag.n == 0:
        return False
    largest = largest or _largest_rows(xp)
    return _longest_row(dag, largest) > 1 and _longest_row(dag_rev, largest) > 1


def _longest_row(g, largest) -> int:
    """The number of entries of ``g``'s longest row (``g`` has one row at least)."""
    v = int(largest(g, 1)[0])
    return int(g.indptr[v + 1]) - int(g.indptr[v])


def window_count(c: int, levels: int, words: int = WIN_WORDS) -> int:
    """How many window hubs a DAG of ``c`` components and ``levels`` levels gets: one per
    ``WINDOW_LEVELS / (64 * words)`` levels on average, at least ``64 * words``, at most
    ``c`` (:func:`window_hubs`)."""
    span = 64 * words
    return min(c, max(span, levels * span // WINDOW_LEVELS))


def windows_pay(c: int, levels: int, words: int = WIN_WORDS) -> bool:
    """Whether a DAG gets window hubs: only when they do not all fit in one window (a DAG
    of more than about ``WINDOW_LEVELS`` levels); those that do are a second set of global
    hubs, components of the largest out-degrees as half the global set is, and settle almost
    no pair that the global set leaves (on gen:random:200000:5, 31 levels, the bench's query
    mixes took as long without them).

    >>> windows_pay(10**6, 31), windows_pay(10**6, 1504)
    (False, True)
    """
    return window_count(c, levels, words) > 64 * words


def window_hubs(xp, dag, level, levels: int, words: int = WIN_WORDS, largest=None):
    """``(hub_of, first)``: the window hubs, numbered by level then id (``hub_of[v]``, or -1),
    and ``first[L]``, the number of them above level L (``levels + 1`` entries).

    They are the components of largest out-degree (ties: smaller id), one per
    ``WINDOW_LEVELS / (64 * words)`` levels on average (at least 64 * ``words``). Each
    component keeps the bits of the 64 * ``words`` of them from its own level down and of as
    many down to its own level (``Kernels.hub_bits`` with ``first``), so ``u``'s down window
    and ``t``'s up window share the hubs between them when u and t are close in level: a
    positive cut for the pairs that the global hubs miss (``largest``: the backend's
    ``Kernels.largest_rows``, else NumPy's or CuPy's sort; on deep citation DAGs about 30%
    fewer random pairs reach the exact search).

    >>> import numpy as np
    >>> from grail_duckdb.kernels.protocol import CSR
    >>> dag = CSR(np.array([0, 2, 3, 3]), np.array([1, 2, 2]))
    >>> hub_of, first = window_hubs(np, dag, np.array([0, 1, 2]), 3, words=1)
    >>> hub_of.tolist(), first.tolist()
    ([0, 1, 2], [0, 1, 2, 3])
    """
    c = int(dag.n)
    count = window_count(c, levels, words)
    hub_of = xp.full(c, -1, dtype=xp.int32)
    if count == 0:
        return hub_of, xp.zeros(levels + 1, xp.int32)
    hubs = (largest or _largest_rows(xp))(dag, count)
    hubs = hubs[xp.argsort(level[hubs].astype(xp.int64) * c + hubs)]
    hub_of[hubs] = xp.arange(count, dtype=xp.int32)
    first = xp.searchsorted(level[hubs], xp.arange(levels + 1, dtype=level.dtype), side="left")
    return hub_of, first.astype(xp.int32)


def tree_of_children(k: Kernels, cond: Condensation, topo: TopoOrder, seed: int, out=None):
    """``(lo, post)``: the interval of each vertex's subtree in the tree of chosen children,
    made with the passes of the tree of parents (subtree sizes, post order with label 0's
    sibling order) over the levels from the deepest up: a chosen child always lies deeper.
    ``out``: two columns to write them into instead (returned)."""
    child = k.tree_children(cond.dag, topo.level)
    up = reversed_levels(k.xp, topo)
    size = k.subtree_sizes(child, up)
    post = k.post_orders(child, up, size, 1, seed)[:, 0]
    if out is None:
        return post - size + 1, post
    _interval_columns(k.xp, post, size, out)
    return out[:, 0], out[:, 1]


def _interval_columns(xp, post, size, out) -> None:
    """``out[:, 0] = post - size + 1`` and ``out[:, 1] = post``: a subtree's interval of post
    ranks, written into the columns without a temporary array.

    >>> out = np.zeros((2, 2), np.int32)
    >>> _interval_columns(np, np.array([3, 1]), np.array([3, 1]), out)
    >>> out.tolist()
    [[1, 3], [1, 1]]
    """
    lo, hi = out[:, 0], out[:, 1]
    xp.add(post, 1, out=lo)
    xp.subtract(lo, size, out=lo)
    hi[...] = post


def reversed_levels(xp, topo: TopoOrder) -> TopoOrder:
    """``topo`` with its levels numbered from the deepest (level ``levels - 1`` becomes 0):
    the order in which the tree of chosen children has every parent before its children.
    Without a ``sweep``: the sweeps over the tree walk ``order`` (a reversed copy of
    ``topo.sweep`` would cost a pass and an array that nothing reads).

    >>> t = reversed_levels(np, TopoOrder(np.array([0, 1, 1]), np.array([0, 2, 1]), np.array([0, 1, 3]), np.array([0, 1, 2])))
    >>> t.level.tolist(), t.order.tolist(), t.offsets.tolist(), t.sweep
    ([1, 0, 0], [1, 2, 0], [0, 2, 3], None)
    """
    n = topo.order.shape[0]
    return TopoOrder(topo.levels - 1 - topo.level, xp.ascontiguousarray(topo.order[::-1]),
                     (n - topo.offsets[::-1]).astype(topo.offsets.dtype))


def hub_slots(xp, dag, dag_rev, count: int, largest=None):
    """``hub_of[v]``: the hub bit of component v, or -1.

    The hubs alternate between the components of largest out-degree and those of largest
    in-degree in the condensed DAG (ties: smaller id first; a component picked twice counts
    once). In a citation graph the first are the papers citing the most others, which reach a
    large share of the graph, so many (new -> old) pairs meet one of them; the second are the
    most cited papers, which many reach (uniprot's single vertex of in-degree 1.5M settles
    almost every reachable pair of that graph). ``largest``: the backend's
    ``Kernels.largest_rows`` (else NumPy's or CuPy's sort).
    """
    c = dag.n
    hub_of = xp.full(c, -1, dtype=xp.int32)
    if c == 0:
        return hub_of
    largest = largest or _largest_rows(xp)
    by_out, by_in = largest(dag, count), largest(dag_rev, count)
    both = xp.stack([by_out, by_in], axis=1).ravel()
    both = both.get() if hasattr(both, "get") else both  # 2 * count ids: pick on the host
    _, first = np.unique(both, return_index=True)
    hubs = both[np.sort(first)][:count]
    hub_of[xp.asarray(hubs)] = xp.arange(hubs.shape[0], dtype=xp.int32)
    return hub_of


def _largest_rows(xp):
    """``Kernels.largest_rows`` by a stable sort of the degrees (the references' way)."""
    return lambda g, count: xp.argsort(-xp.diff(g.indptr), kind="stable")[:count]
