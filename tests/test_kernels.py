"""Every operation of the kernel interface against its reference (``tests/references.py``), with
the same test bodies on every backend present (the ``backend`` fixture): hypothesis graphs and
the adversarial graphs of ``tests/strategies.py``. Inputs go to the backend with
``k.xp.asarray`` and answers come back with ``to_host``.

Each ``check_*`` takes the kernels, a :class:`Case` (one graph and its host-side inputs,
computed once) and a random generator, and asserts one operation's result; the label kernels
read DAGs (the graph's edges oriented along a random order), the query kernels an index built
by the references alone (:func:`references.reference_index`).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import references as ref
from grail_duckdb.engine.labels import hub_slots, reversed_levels, window_hubs
from grail_duckdb.model import Labels
from grail_duckdb.errors import BackendError
from grail_duckdb.kernels import CSR, CpuKernels, gpu_available, shared, to_host
from grail_duckdb.kernels.cpu import CpuSettings
from grail_duckdb.kernels.cpu import rows as rows_module
from grail_duckdb.kernels.protocol import QueryIndex
from oracle import reaches_by_dfs
from strategies import ADVERSARIAL, CUT_DEFEATING_PAIRS, Graph, adversarial, dagify, graphs

D, SEED = 3, 11  # label pairs and seed of the reference index


def put(k, a):
    """A host array on the backend of ``k``."""
    return k.xp.asarray(a)


def csr_on(k, rows) -> CSR:
    return CSR(put(k, rows[0]), put(k, rows[1]))


def labels_on(k, lab: Labels) -> Labels:
    return Labels(**{name: put(k, a) for name, a in lab.arrays().items()})


def host(*arrays):
    return [to_host(a) for a in arrays]


class Case:
    """One graph and the host inputs of each kernel, each computed on first use."""

    def __init__(self, g: Graph):
        self.g, self.n = g, g.n
        self.src32, self.dst32 = g.src.astype(np.int32), g.dst.astype(np.int32)

    @functools.cached_property
    def fwd(self):
        return ref.csr(self.g.src, self.g.dst, self.n)

    @functools.cached_property
    def rev(self):
        return ref.csr(self.g.dst, self.g.src, self.n)

    @functools.cached_property
    def dag(self):
        """(fwd, rev) rows of the graph's edges as a DAG (duplicates dropped, as in every CSR)."""
        d = dagify(self.g, seed=5)
        return ref.csr(d.src, d.dst, self.n), ref.csr(d.dst, d.src, self.n)

    @functools.cached_property
    def level(self):
        return ref.levels(*self.dag[0], self.n)

    @functools.cached_property
    def parent(self):
        return ref.tree_parents(*self.dag[1], self.level)

    @functools.cached_property
    def size(self):
        return ref.subtree_sizes(self.parent)

    @functools.cached_property
    def index(self) -> ref.ReferenceIndex:
        return ref.reference_index(self.g.src, self.g.dst, self.n, D, SEED)

    def topo(self, k):
        """The backend's own topological order of the DAG (checked by its own test)."""
        return k.topological_levels(csr_on(k, self.dag[0]), csr_on(k, self.dag[1]))

    def pairs(self, rng, count=3000):
        """Query pairs of vertex ids: every pair of a small graph, else random pairs and the
        edges; a few unknown ids (-1)."""
        n = self.n
        if n <= 40:
            a, b = np.meshgrid(np.arange(-1, n), np.arange(-1, n), indexing="ij")
            return a.ravel().astype(np.int32), b.ravel().astype(np.int32)
        a = np.concatenate([rng.integers(-1, n, count), self.g.src[:count]])
        b = np.concatenate([rng.integers(-1, n, count), self.g.dst[:count]])
        return a.astype(np.int32), b.astype(np.int32)


@functools.lru_cache(maxsize=None)
def case_named(name: str) -> Case:
    return Case(adversarial(name))


# --- CSR -----------------------------------------------------------------------------------------
def check_csr(k, c, rng):
    for s, d in ((c.src32, c.dst32), (c.dst32, c.src32)):
        indptr, indices = host(*k.csr(put(k, s), put(k, d), c.n))
        want = ref.csr(s, d, c.n)
        assert indptr.dtype == np.int64 and indices.dtype == np.int32
        np.testing.assert_array_equal(indptr, want[0])
        np.testing.assert_array_equal(indices, want[1])


def check_csr_of_pairs(k, c, rng):
    order = rng.permutation(c.src32.shape[0])   # any order of the packed edges: the same rows
    pairs = ref.pack(c.src32[order], c.dst32[order])
    indptr, indices = host(*k.csr_of_pairs(put(k, pairs), c.n))
    want = ref.csr(c.src32, c.dst32, c.n)
    np.testing.assert_array_equal(indptr, want[0])
    np.testing.assert_array_equal(indices, want[1])


def check_csr_both_ways(k, c, rng):
    """Both directions of packed edges in any order, each as :meth:`csr_of_pairs` makes it;
    also of edges grouped by source (each row's targets in any order), which the CPU makes
    rows of in place."""
    shuffled = rng.permutation(c.src32.shape[0])
    for order in (shuffled, shuffled[np.argsort(c.src32[shuffled], kind="stable")]):
        fwd, rev = k.csr_both_ways(put(k, ref.pack(c.src32[order], c.dst32[order])), c.n)
        for got, (s, d) in ((fwd, (c.src32, c.dst32)), (rev, (c.dst32, c.src32))):
            indptr, indices = host(got.indptr, got.indices)
            want = ref.csr(s, d, c.n)
            assert indptr.dtype == np.int64 and indices.dtype == np.int32
            np.testing.assert_array_equal(indptr, want[0])
            np.testing.assert_array_equal(indices, want[1])


def check_reverse(k, c, rng):
    """The reversed rows hold every edge once per copy (duplicates and self-loops of the input
    kept); the order within a row is free, so rows are compared sorted."""
    g = CSR(*ref.raw_csr(c.src32, c.dst32, c.n))
    indptr, indices = host(*k.reverse(csr_on(k, (g.indptr, g.indices))))
    want_ptr, want_idx = ref.raw_csr(c.dst32, c.src32, c.n)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    np.testing.assert_array_equal(indptr, want_ptr)
    rows = [np.sort(indices[a:b]) for a, b in zip(indptr[:-1], indptr[1:])]
    np.testing.assert_array_equal(np.concatenate(rows or [indices]), want_idx)


def check_edge_levels(k, c, rng):
    """The level of each edge's target beside it, int16, saturated at EDGE_LEVEL_CAP (levels
    moved across the cap saturate there, those below it stay)."""
    fwd = c.dag[0]
    for shift in (0, shared.EDGE_LEVEL_CAP - 2):
        level = (c.level + shift).astype(np.int32)
        got = to_host(k.edge_levels(csr_on(k, fwd), put(k, level)))
        assert got.dtype == np.int16 and got.shape == fwd[1].shape
        np.testing.assert_array_equal(got, np.minimum(level[fwd[1]], shared.EDGE_LEVEL_CAP))


# --- condensation --------------------------------------------------------------------------------
def check_trim(k, c, rng):
    for alive in (np.ones(c.n, bool), rng.random(c.n) < 0.8):
        dev = put(k, alive.copy())
        removed = k.trim(csr_on(k, c.fwd), csr_on(k, c.rev), dev)
        want_alive, want_removed = ref.trim(*c.fwd, alive)
        assert removed == want_removed
        np.testing.assert_array_equal(to_host(dev), want_alive)


def check_reach_within_colour(k, c, rng):
    n = c.n
    pivot = np.zeros(n, bool)
    if n:
        pivot[np.argmax(np.diff(c.fwd[0]) * np.diff(c.rev[0]))] = True
    cases = [(pivot, np.zeros(n, np.int32)),  # the forward-backward sweep from a pivot
             (rng.random(n) < 0.05, rng.integers(-1, 3, n).astype(np.int32))]  # colour roots
    for seeds, colour in cases:
        for rows in (c.fwd, c.rev):
            got = to_host(k.reach_within_colour(csr_on(k, rows), put(k, seeds), put(k, colour)))
            np.testing.assert_array_equal(got, ref.reach_within_colour(*rows, seeds, colour))


def check_propagate_max_colour(k, c, rng):
    colour = np.where(rng.random(c.n) < 0.85, np.arange(c.n), -1).astype(np.int32)
    dev = put(k, colour.copy())
    k.propagate_max_colour(csr_on(k, c.fwd), dev)
    np.testing.assert_array_equal(to_host(dev), ref.propagate_max_colour(*c.fwd, colour))


def check_rank_by_first_occurrence(k, c, rng):
    for label in (rng.integers(0, c.n // 3 + 1, c.n), ref.strong_components(c.g.src, c.g.dst,
                                                                             c.n)):
        label = label.astype(np.int32)
        got, count = k.rank_by_first_occurrence(put(k, label))
        want, want_count = ref.rank_by_first_occurrence(label)
        assert count == want_count
        np.testing.assert_array_equal(to_host(got), want)


def check_representatives(k, c, rng):
    for label in (rng.integers(0, c.n // 3 + 1, c.n), ref.strong_components(c.g.src, c.g.dst,
                                                                             c.n)):
        comp, _ = ref.rank_by_first_occurrence(label.astype(np.int32))
        got = to_host(k.representatives(put(k, comp)))
        np.testing.assert_array_equal(got, ref.representatives(comp))


def check_component_pairs(k, c, rng):
    for comp in (ref.strong_components(c.g.src, c.g.dst, c.n),
                 rng.integers(0, c.n // 4 + 1, c.n).astype(np.int32)):
        got = to_host(k.component_pairs(csr_on(k, c.fwd), put(k, comp)))
        np.testing.assert_array_equal(got, ref.component_pairs(*c.fwd, comp))


# --- labels --------------------------------------------------------------------------------------
def check_topological_levels(k, c, rng):
    topo = c.topo(k)
    ref.check_topo_order(*host(topo.level, topo.order, topo.offsets), c.level)
    assert topo.levels == (int(c.level.max()) + 1 if c.n else 0)


def check_acyclic_levels(k, c, rng):
    """The levels of a DAG, as :meth:`topological_levels` gives them; None for the graph
    itself exactly when it has a cycle (a component of two vertices or more)."""
    topo = k.acyclic_levels(csr_on(k, c.dag[0]), csr_on(k, c.dag[1]))
    ref.check_topo_order(*host(topo.level, topo.order, topo.offsets), c.level)
    comp = ref.strong_components(c.g.src, c.g.dst, c.n)
    cyclic = bool(c.n) and np.unique(comp).shape[0] < c.n
    assert (k.acyclic_levels(csr_on(k, c.fwd), csr_on(k, c.rev)) is None) == cyclic
    hi, lo = np.maximum(c.g.src, c.g.dst), np.minimum(c.g.src, c.g.dst)
    for s, d in ((hi, lo), (lo, hi)):  # every edge to a smaller id, then to a larger one
        fwd, rev = ref.csr(s, d, c.n), ref.csr(d, s, c.n)
        topo = k.acyclic_levels(csr_on(k, fwd), csr_on(k, rev))
        ref.check_topo_order(*host(topo.level, topo.order, topo.offsets), ref.levels(*fwd, c.n))
        walk = to_host(topo.walk)  # the ids' own order, where the backend walks it
        at = np.empty(c.n, np.int64)
        at[walk] = np.arange(c.n)
        np.testing.assert_array_equal(np.sort(walk), np.arange(c.n))
        src, dst = ref.edges(*fwd)
        assert (at[src] < at[dst]).all()
        post = rng.integers(1, c.n + 1, (c.n, D)).astype(np.int32)
        got = host(*k.interval_bounds(csr_on(k, fwd), topo, put(k, post.copy())))
        for a, b in zip(got, ref.interval_bounds(*fwd, post)):
            np.testing.assert_array_equal(a, b)


def check_largest_rows(k, c, rng):
    """The rows of most entries, ties by id, for counts below, at and above the row count."""
    for rows in (c.fwd, c.rev):
        degree = np.diff(rows[0])
        for count in (0, 1, 7, 128, c.n, c.n + 3):
            got = to_host(k.largest_rows(csr_on(k, rows), count))
            np.testing.assert_array_equal(got, np.argsort(-degree, kind="stable")[:count])


def check_tree_parents(k, c, rng):
    got = to_host(k.tree_parents(csr_on(k, c.dag[1]), put(k, c.level)))
    np.testing.assert_array_equal(got, c.parent)


def check_tree_children(k, c, rng):
    got = to_host(k.tree_children(csr_on(k, c.dag[0]), put(k, c.level)))
    np.testing.assert_array_equal(got, ref.tree_children(*c.dag[0], c.level))


def check_subtree_sizes(k, c, rng):
    got = to_host(k.subtree_sizes(put(k, c.parent), c.topo(k)))
    np.testing.assert_array_equal(got, c.size)
    # the tree of chosen children, over the levels from the deepest up
    child = ref.tree_children(*c.dag[0], c.level)
    up = reversed_levels(k.xp, c.topo(k))
    np.testing.assert_array_equal(to_host(k.subtree_sizes(put(k, child), up)),
                                  ref.subtree_sizes(child))


def check_post_orders(k, c, rng):
    seed = int(rng.integers(0, 2**31))
    got = to_host(k.post_orders(put(k, c.parent), c.topo(k), put(k, c.size), D, seed))
    ref.check_post_orders(got, c.parent, c.size)
    np.testing.assert_array_equal(got, ref.post_orders(c.parent, D, seed))
    child = ref.tree_children(*c.dag[0], c.level)
    size = ref.subtree_sizes(child)
    got = to_host(k.post_orders(put(k, child), reversed_levels(k.xp, c.topo(k)), put(k, size),
                                1, seed))
    ref.check_post_orders(got, child, size)
    np.testing.assert_array_equal(got, ref.post_orders(child, 1, seed))


def check_interval_bounds(k, c, rng):
    for d in (D, 2):  # the CPU's rows of three labels have a path of their own
        post = rng.integers(1, c.n + 1, (c.n, d)).astype(np.int32)  # any values will do
        got = host(*k.interval_bounds(csr_on(k, c.dag[0]), c.topo(k), put(k, post.copy())))
        want = ref.interval_bounds(*c.dag[0], post)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def check_hub_bits(k, c, rng):
    degree = np.diff(c.dag[0][0]) + np.diff(c.dag[1][0])
    for words in (1, 2):
        hubs = np.argsort(-degree, kind="stable")[:8]  # the big rows, and random others
        others = rng.permutation(c.n)[:64 * words - 8]
        hubs = np.unique(np.concatenate([hubs, others]))
        hub_of = np.full(c.n, -1, np.int32)
        hub_of[hubs] = rng.permutation(64 * words)[:hubs.shape[0]]
        got = host(*k.hub_bits(csr_on(k, c.dag[0]), csr_on(k, c.dag[1]), c.topo(k),
                               put(k, hub_of), words))
        want = ref.hub_bits(c.dag[0], c.dag[1], hub_of, words)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def check_window_bits(k, c, rng):
    """Windows of 64 or 128 of many hubs (a random third of the vertices, or all of them: more
    hubs on a level than a window holds), numbered by level as ``window_hubs`` numbers them."""
    level = ref.levels(*c.dag[0], c.n) if c.n else np.zeros(0, np.int64)
    levels = int(level.max()) + 1 if c.n else 0
    for words, share in ((1, 1.0), (2, 0.3)):
        hubs = np.flatnonzero(rng.random(c.n) < share)
        hubs = hubs[np.lexsort((hubs, level[hubs]))]
        hub_of = np.full(c.n, -1, np.int32)
        hub_of[hubs] = np.arange(hubs.shape[0])
        first = np.searchsorted(level[hubs], np.arange(levels + 1)).astype(np.int32)
        got = host(*k.hub_bits(csr_on(k, c.dag[0]), csr_on(k, c.dag[1]), c.topo(k),
                               put(k, hub_of), words, put(k, first)))
        want = ref.window_bits(c.dag[0], c.dag[1], hub_of, first, level, words)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def check_hub_and_window_bits(k, c, rng):
    """The global hubs and the window hubs of the engine's choice in one call, each as its
    reference gives it (windows of one word and of two)."""
    dag, rev = CSR(*c.dag[0]), CSR(*c.dag[1])
    level = ref.levels(*c.dag[0], c.n) if c.n else np.zeros(0, np.int64)
    hub_of = hub_slots(np, dag, rev, 64 * shared.HUB_WORDS)
    for words in (1, 2):
        win_of, first = window_hubs(np, dag, level, int(level.max()) + 1 if c.n else 0,
                                    words=words)
        got = host(*k.hub_and_window_bits(csr_on(k, c.dag[0]), csr_on(k, c.dag[1]),
                                          c.topo(k), put(k, hub_of), shared.HUB_WORDS,
                                          put(k, win_of), words, put(k, first)))
        want = (*ref.hub_bits(c.dag[0], c.dag[1], hub_of, shared.HUB_WORDS),
                *ref.window_bits(c.dag[0], c.dag[1], win_of, first, level, words))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


# --- queries -------------------------------------------------------------------------------------
def answer_ids(k, sid, did, comp, lab, dag, rev=None, prune=True, budget=0):
    """``answer_pairs`` on vertex ids (the ids lookup; each unknown id -1 a distinct unknown key):
    ``(counts, answer bits as bools, sorted deferred rows, the PairAnswers, the QueryIndex)``."""
    n = sid.shape[0]
    ks = np.where(sid < 0, -2 - np.arange(n), sid).astype(np.int64)
    kt = np.where(did < 0, -2 - n - np.arange(n), did).astype(np.int64)
    qi = QueryIndex(shared.LOOKUP_IDS, 0, 0, k.xp.empty(0, k.xp.int32),
                    None if comp is None else put(k, comp), csr_on(k, dag), lab,
                    None if rev is None else csr_on(k, rev))
    part = k.answer_pairs(qi, ks, kt, None, prune, budget)
    bits = np.unpackbits(part.bits, bitorder="little")[:n].astype(bool)
    return part.counts, bits, np.sort(to_host(part.deferred[0])), part, qi


def assert_same_as_reference(counts, bits, rows, want, prune):
    """The backend's counts, answer bits and deferred rows agree with the reference codes
    (with no bounded search: UNDECIDED pairs are deferred)."""
    undecided = want == shared.UNDECIDED
    np.testing.assert_array_equal(bits, np.isin(want, shared.SETTLED_TRUE))
    np.testing.assert_array_equal(rows, np.flatnonzero(undecided))
    hist = np.bincount(want, minlength=shared.N_STATUS)
    expect = hist.copy()
    expect[shared.DEFERRED] = hist[shared.UNDECIDED]
    expect[shared.UNDECIDED] = hist[shared.UNDECIDED] if prune else 0
    np.testing.assert_array_equal(counts, expect)


def check_answer_pairs(k, c, rng):
    idx = c.index
    sid, did = c.pairs(rng)
    known = (sid >= 0) & (did >= 0)
    truth = (sid == did) & known  # an unknown id stands for no key at all
    truth[known] |= reaches_by_dfs(c.g.src, c.g.dst, c.n, sid[known], did[known])
    lab = labels_on(k, idx.labels)
    for prune in (True, False):
        want = ref.query_cuts(sid, did, idx.comp, idx.labels, prune)
        ref.check_sound(want, truth)
        got = answer_ids(k, sid, did, idx.comp, lab, idx.dag, prune=prune)
        assert_same_as_reference(*got[:3], want, prune)
        if idx.n_components == c.n:  # acyclic: components are vertices (comp None)
            by_vertex = Labels(**{nm: a if nm == "win_first" else a[idx.comp]
                                  for nm, a in idx.labels.arrays().items()})
            alone = answer_ids(k, sid, did, None, labels_on(k, by_vertex), idx.dag, prune=prune)
            assert_same_as_reference(*alone[:3], want, prune)
    # the bounded search, pair for pair as the reference walks it, then the exact search
    want = ref.query_cuts(sid, did, idx.comp, idx.labels)
    cuts, ptr, nxt = ref.LabelTests(idx.labels), idx.dag[0].tolist(), idx.dag[1].tolist()
    codes = want.copy()
    for r in np.flatnonzero(want == shared.UNDECIDED):
        codes[r] = ref.probe(idx.comp[sid[r]], idx.comp[did[r]], ptr, nxt, cuts, 256)
    counts, bits, rows, part, qi = answer_ids(k, sid, did, idx.comp, lab, idx.dag, idx.dag_rev,
                                              budget=256)
    np.testing.assert_array_equal(bits, np.isin(codes, shared.SETTLED_TRUE))
    np.testing.assert_array_equal(rows, np.flatnonzero(codes == shared.DEFERRED))
    np.testing.assert_array_equal(counts[shared.PROBE_REACHES:],
                                  np.bincount(codes, minlength=shared.N_STATUS)[
                                      shared.PROBE_REACHES:])
    found = k.search_pairs(qi, *part.deferred[1:])
    bits[to_host(part.deferred[0])[np.asarray(found, bool)]] = True
    np.testing.assert_array_equal(bits, truth)
    # arbitrary label values: the predicates themselves, code for code
    m, r = max(idx.n_components, 1), rng.integers
    noise = Labels(level=r(0, 4, m).astype(np.int32), inner=r(0, 9, (m, D)).astype(np.int32),
                   outer=r(0, 9, (m, D)).astype(np.int32), tree=r(0, 9, (m, 4)).astype(np.int32),
                   hub_down=r(0, 4, (m, 2)).astype(np.uint64) << np.uint64(62),
                   hub_up=r(0, 4, (m, 2)).astype(np.uint64) << np.uint64(62))
    got = answer_ids(k, sid, did, idx.comp, labels_on(k, noise), idx.dag)
    assert_same_as_reference(*got[:3], ref.query_cuts(sid, did, idx.comp, noise), True)


def check_bitmask_search(k, c, rng):
    idx = c.index
    n = idx.n_components
    if n < 2:
        return
    u, w = ref.edges(*idx.dag)
    cs = np.concatenate([rng.integers(0, n, 600), u[:300], u[:300]])
    ct = np.concatenate([rng.integers(0, n, 600), w[:300], np.roll(w[:300], 1)])
    keep = cs != ct  # the search answers pairs of distinct components
    cs, ct = cs[keep].astype(np.int32), ct[keep].astype(np.int32)
    want = reaches_by_dfs(u, w, n, cs, ct)
    order = np.argsort(cs, kind="stable")
    dag, lab = csr_on(k, idx.dag), labels_on(k, idx.labels)
    for words in (1, 3):
        for prune in (True, False):
            for a, b, expect in ((cs, ct, want), (cs[order], ct[order], want[order])):
                got = to_host(k.bitmask_search(dag, lab, put(k, a), put(k, b), words, prune))
                np.testing.assert_array_equal(got, expect, err_msg=f"words {words} prune {prune}")


# --- fingerprints --------------------------------------------------------------------------------
def check_hash_sums(k, c, rng):
    pairs = ref.pack(c.src32, c.dst32)
    assert k.edge_hash_sum(put(k, pairs)) == ref.edge_hash_sum(pairs)
    info = np.iinfo(np.int64)
    keys = np.concatenate([c.g.src * 7919 - 10**12, [info.min, info.max, 0, -1]])
    assert k.key_hash_sum(put(k, keys.astype(np.int64))) == ref.key_hash_sum(keys)


CHECKS = {f.__name__[len("check_"):]: f for f in (
    check_csr, check_csr_of_pairs, check_csr_both_ways, check_reverse, check_edge_levels,
    check_trim, check_reach_within_colour, check_propagate_max_colour,
    check_rank_by_first_occurrence, check_representatives, check_component_pairs,
    check_topological_levels, check_acyclic_levels, check_largest_rows, check_tree_parents,
    check_tree_children, check_subtree_sizes, check_post_orders, check_interval_bounds,
    check_hub_bits, check_window_bits, check_hub_and_window_bits, check_answer_pairs,
    check_bitmask_search, check_hash_sums)}


#: kernels whose reference is one breadth-first search per hub: on the larger fixed graphs (a
#: hub at every vertex) they take seconds, so they run with the slow tests
_SLOW = {("window_bits", g) for g in ("rmat-14", "degree-thresholds", "degree-thresholds-cyclic",
                                      "chain-5000", "star-out", "star-in", "star-both",
                                      "giant-cycle")}


@pytest.mark.parametrize("kernel,graph", [
    pytest.param(k, g, marks=pytest.mark.slow) if (k, g) in _SLOW else (k, g)
    for g in ADVERSARIAL for k in CHECKS])
def test_kernel_on_adversarial_graph(backend, kernel, graph):
    CHECKS[kernel](backend, case_named(graph), np.random.default_rng(0))


#: the CPU's build sweeps on every path its settings choose between: each level shared by the
#: cores, with every prefetch and record; one sweep per core, with none
CPU_PATHS = {"levelwise": CpuSettings(level_work=0, level_threads=2, prefetch_degree=0),
             "sweeps": CpuSettings(level_work=2**40, prefetch_degree=2**20)}
BUILD_CHECKS = ("topological_levels", "acyclic_levels", "subtree_sizes", "post_orders",
                "interval_bounds", "hub_bits", "window_bits", "hub_and_window_bits",
                "hash_sums")
#: the adversarial graphs whose references take under a second or two
SMALL_ADVERSARIAL = [g for g in ADVERSARIAL
                     if g not in ("rmat-14", "chain-5000", "degree-thresholds",
                                  "degree-thresholds-cyclic")]


def test_cpu_rows_of_edges_grouped_by_source_across_tasks():
    """Edges grouped by source, enough of them for every core to take a share: rows longer
    than a share, self-loops, duplicates and empty rows come out as the references say."""
    rng = np.random.default_rng(7)
    n, m = 2000, 60_000
    src = np.sort(np.concatenate([rng.integers(0, n, m - 30_000), np.full(20_000, 5),
                                  np.full(10_000, n - 1)]))
    dst = rng.integers(0, n, m)
    dst[::7] = src[::7]
    dst[1::11] = dst[::11][: dst[1::11].shape[0]]
    fwd, rev = CpuKernels().csr_both_ways(ref.pack(src, dst), n)
    for got, (s, d) in ((fwd, (src, dst)), (rev, (dst, src))):
        want = ref.csr(s, d, n)
        np.testing.assert_array_equal(got.indptr, want[0])
        np.testing.assert_array_equal(got.indices, want[1])


@pytest.mark.parametrize("first,last", [(0, 1999), (3, 1990)])
def test_cpu_rows_of_edges_that_are_rows_already(first, last):
    """Edges grouped by source whose targets increase in each row, none the source (the
    rows of a CSR): copied into place as they are, empty rows (the first and the last ones
    too) and a row longer than a task's share included; one edge out of place or a
    self-loop, and the general path makes the same rows."""
    rng = np.random.default_rng(3)
    n = 2000
    pairs = np.unique(np.concatenate([
        ref.pack(rng.integers(first, last + 1, 40_000), rng.integers(0, n, 40_000)),
        ref.pack(np.full(n - 1, 7), np.delete(np.arange(n), 7))]))
    pairs = pairs[(pairs >> np.uint64(32)) != (pairs & np.uint64(0xFFFFFFFF))]
    src, dst = (pairs >> np.uint64(32)).astype(np.int64), (pairs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    want = ref.csr(src, dst, n)
    swapped, looped = pairs.copy(), pairs.copy()
    swapped[[100, 101]] = swapped[[101, 100]]
    looped[200] = ref.pack([int(src[200])], [int(src[200])])[0]
    assert rows_module.grouped_by_source(pairs) == rows_module.ROWS
    assert rows_module.grouped_by_source(swapped) == rows_module.GROUPED
    assert rows_module.grouped_by_source(looped) == rows_module.GROUPED
    for p, s, d in ((pairs, src, dst), (swapped, src, dst),
                    (looped, np.delete(src, 200), np.delete(dst, 200))):
        fwd, rev = CpuKernels().csr_both_ways(p.copy(), n)
        for got, (a, b) in ((fwd, (s, d)), (rev, (d, s))):
            expect = ref.csr(a, b, n)
            np.testing.assert_array_equal(got.indptr, expect[0])
            np.testing.assert_array_equal(got.indices, expect[1])
    np.testing.assert_array_equal(want[0][first], 0)


#: of the small adversarial graphs, those whose checks take seconds on two cores (run with
#: the slow tests)
SECONDS_ADVERSARIAL = ("rmat-12", "giant-cycle", "star-both", "star-in", "star-out")


@pytest.mark.parametrize("graph", [
    pytest.param(g, marks=pytest.mark.slow) if g in SECONDS_ADVERSARIAL else g
    for g in SMALL_ADVERSARIAL])
@pytest.mark.parametrize("path", list(CPU_PATHS))
def test_cpu_build_sweeps_on_each_path(path, graph):
    k = CpuKernels(settings=CPU_PATHS[path])
    for kernel in BUILD_CHECKS:
        CHECKS[kernel](k, case_named(graph), np.random.default_rng(0))


@settings(max_examples=100)
@given(g=graphs(), seed=st.integers(0, 2**16))
def test_every_kernel_on_hypothesis_graphs(backend, g, seed):
    c = Case(g)
    for check in CHECKS.values():
        check(backend, c, np.random.default_rng(seed))


def test_cut_defeating_pairs_reach_the_search_and_are_answered(backend):
    """The pairs built to pass every cut are undecided (unreachable and reachable alike): with
    no bounded search they are all deferred, and both searches answer them."""
    k, idx = backend, case_named("cut-defeating").index
    sid, did, want = (a.astype(np.int32) for a in CUT_DEFEATING_PAIRS)
    lab = labels_on(k, idx.labels)
    counts, bits, rows, part, qi = answer_ids(k, sid, did, idx.comp, lab, idx.dag, idx.dag_rev)
    assert rows.tolist() == list(range(sid.shape[0])) and not bits.any()
    assert counts[shared.UNDECIDED] == counts[shared.DEFERRED] == sid.shape[0]
    cs, ct = idx.comp[sid], idx.comp[did]
    got = to_host(k.bitmask_search(csr_on(k, idx.dag), lab, put(k, cs), put(k, ct), 1, True))
    np.testing.assert_array_equal(got, want)
    deferred = to_host(part.deferred[0])
    found = np.zeros(sid.shape[0], bool)
    found[deferred] = k.search_pairs(qi, *part.deferred[1:])
    np.testing.assert_array_equal(found, want)


@pytest.mark.parametrize("graph", ["rmat-12", "chain-5000", "degree-thresholds-cyclic"])
@pytest.mark.parametrize("shift", [0, shared.EDGE_LEVEL_CAP - 3, shared.EDGE_LEVEL_CAP + 1])
def test_exact_search_trusts_saturated_edge_levels_only_as_bounds(backend, graph, shift):
    """Every level moved up by ``shift`` (still levels: each edge leads up) puts the DAG's
    levels below, across or above EDGE_LEVEL_CAP, where the levels beside the edges saturate:
    a saturated level is only a lower bound, which the backward side cannot use. The exact
    search's answers on random pairs and on pairs two edges apart stay the oracle's."""
    k, idx = backend, case_named(graph).index
    n = idx.n_components
    rng = np.random.default_rng(shift % 97)
    u, w = ref.edges(*idx.dag)
    ptr = idx.dag[0]
    hop = rng.integers(0, max(u.shape[0], 1), 400) if u.shape[0] else np.zeros(0, np.int64)
    far = [(a, idx.dag[1][ptr[b]]) for a, b in zip(u[hop], w[hop]) if ptr[b + 1] > ptr[b]]
    cs = np.concatenate([rng.integers(0, n, 1500), [a for a, _ in far]]).astype(np.int32)
    ct = np.concatenate([rng.integers(0, n, 1500), [b for _, b in far]]).astype(np.int32)
    keep = cs != ct
    cs, ct = cs[keep], ct[keep]
    lab = Labels(**{**idx.labels.arrays(), "level": (idx.labels.level + shift).astype(np.int32)})
    qi = QueryIndex(shared.LOOKUP_IDS, 0, 0, k.xp.empty(0, k.xp.int32), None, csr_on(k, idx.dag),
                    labels_on(k, lab), csr_on(k, idx.dag_rev))
    got = np.asarray(to_host(k.search_pairs(qi, put(k, cs), put(k, ct))), bool)
    np.testing.assert_array_equal(got, reaches_by_dfs(u, w, n, cs, ct))
    stored = k.edge_levels(csr_on(k, idx.dag_rev), put(k, lab.level))
    saturated = to_host(stored) == shared.EDGE_LEVEL_CAP
    if shift > shared.EDGE_LEVEL_CAP:
        assert saturated.all()
    elif shift == 0:
        assert not saturated.any()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_out_of_memory_is_a_backend_error():
    import cupy as cp

    from grail_duckdb.kernels import kernels_for

    k = kernels_for("gpu")
    free, _ = cp.cuda.runtime.memGetInfo()
    huge = cp.zeros(1, cp.int32)
    with pytest.raises(BackendError, match="bytes"):
        k.csr(huge, huge, int(free))  # an indptr of the whole free memory in int64


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_post_orders_index_past_two_billion_label_entries():
    """n * d above 2^31 (250M components and 9 labels do it): every label's post ranks still
    a permutation of 1..n. A forest of singletons keeps the graph trivial and the reference
    exact: each vertex is its own subtree."""
    import cupy as cp

    from grail_duckdb.kernels import kernels_for
    from grail_duckdb.kernels.protocol import TopoOrder

    k = kernels_for("gpu")
    d = 64
    n = (1 << 31) // d + 4096
    topo = TopoOrder(cp.zeros(n, cp.int32), cp.arange(n, dtype=cp.int32),
                     cp.asarray(np.array([0, n], np.int32)))
    post = k.post_orders(cp.full(n, -1, cp.int32), topo, cp.ones(n, cp.int32), d, 7)
    for j in (0, d - 1):
        col = cp.sort(post[:, j])
        assert bool((col == cp.arange(1, n + 1, dtype=cp.int32)).all()), f"label {j}"


@pytest.mark.parametrize("apart", [True, False])
@pytest.mark.parametrize("graph", ["star-in", "star-out", "giant-cycle", "self-loops-only"])
def test_cpu_trees_side_by_side_or_in_turn(monkeypatch, graph, apart):
    """The tree of chosen children made on a thread of its own beside the tree of parents
    and the intervals (a CPU of few cores), or in turn: the labels the references make; an
    error in that thread reaches the caller."""
    from grail_duckdb.engine import labels as engine_labels
    from grail_duckdb.engine.condensation import condense
    from grail_duckdb.engine.csr import forward_and_reverse

    monkeypatch.setattr(engine_labels, "trees_side_by_side", lambda k: apart)
    k, c = CpuKernels(), case_named(graph)
    cond = condense(k, list(forward_and_reverse(k, ref.pack(c.src32, c.dst32), c.n)))
    got, want = engine_labels.grail_labels(k, cond, D, SEED), c.index.labels
    for name in ("level", "inner", "outer", "tree"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)

    def broken(*args, **kw):
        raise RuntimeError("tree of children")

    monkeypatch.setattr(engine_labels, "tree_of_children", broken)
    with pytest.raises(RuntimeError, match="tree of children"):
        engine_labels.grail_labels(k, cond, D, SEED)


@pytest.mark.parametrize("narrow", [0, 64])
def test_cpu_kahn_levels_shared_then_on_one_core(narrow):
    """Kahn's sweep level by level on two tasks over wide levels, then (``narrow``) on one
    core from the first level of that many vertices or fewer, a long chain and wide levels
    again after it: the levels the references find, each level's vertices together."""
    from grail_duckdb.kernels.cpu import labels as cpu_labels

    rng = np.random.default_rng(5)
    wide, chain = 300, 400
    layers = [np.arange(wide) + wide * i for i in range(4)]  # levels 0-3, 300 vertices each
    n0 = 4 * wide
    tail = np.arange(n0, n0 + chain)                          # a chain below level 3
    last = np.arange(n0 + chain, n0 + chain + wide)           # a wide level below the chain
    src = np.concatenate([rng.choice(layers[i], 3 * wide) for i in range(3)]
                         + [[layers[3][0]], tail[:-1], np.full(wide, tail[-1])])
    dst = np.concatenate([rng.choice(layers[i + 1], 3 * wide) for i in range(3)]
                         + [[tail[0]], tail[1:], last])
    n = n0 + chain + wide
    perm = rng.permutation(n)  # ids in no topological order
    src, dst = perm[src], perm[dst]
    fwd, rev = ref.csr(src, dst, n), ref.csr(dst, src, n)
    level, order = np.empty(n, np.int32), np.empty(n, np.int32)
    offsets = np.empty(n + 2, np.int64)
    count, seen = cpu_labels.topological_levels(*fwd, rev[0], np.empty(n, np.int32), level,
                                                order, offsets, False, 8, 8, narrow)
    want = ref.levels(*fwd, n)
    assert (count, seen) == (int(want.max()) + 1, n)
    np.testing.assert_array_equal(level, want)
    ref.check_topo_order(level, order, offsets[:count + 1], want)
