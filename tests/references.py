"""Small, obviously correct references for every operation of the kernel interface
(:class:`grail_duckdb.kernels.protocol.Kernels`), on host NumPy arrays.

Each states what its kernel computes in the plainest way there is (Python lists, a relaxation
over every edge repeated until nothing changes, one breadth-first search per source), with no
worklist, no ordering trick and no code shared with the kernels, except the two specifications
both backends read from :mod:`grail_duckdb.kernels.shared` (the splitmix64 constants and
``order_params``, the parameters of each label's sibling order) and, for the whole reference
index, the engine's choice of hub vertices (``hub_slots``, ``window_hubs``: policies, not
kernels). Speed only matters as far as the adversarial graphs of ``tests/strategies.py`` (up
to 10^5 edges, 5,000 levels) stay fast.

The ``check_*`` functions assert what defines a result where more than one is right (a
topological order, a post order) or where a result is a claim (the status codes' soundness).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from grail_duckdb.engine.labels import hub_slots, window_hubs
from grail_duckdb.model import Labels
from grail_duckdb.kernels import shared
from grail_duckdb.kernels.protocol import CSR

MASK64 = (1 << 64) - 1


# --- CSR -----------------------------------------------------------------------------------------
def rows(indptr, indices) -> list[list[int]]:
    """The rows of a CSR as Python lists."""
    indptr, indices = np.asarray(indptr), np.asarray(indices)
    return [indices[indptr[v]:indptr[v + 1]].tolist() for v in range(indptr.shape[0] - 1)]


def from_rows(rws) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr int64, indices int32)`` of Python rows."""
    indptr = np.zeros(len(rws) + 1, np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rws]) if rws else []
    flat = [w for r in rws for w in r]
    return indptr, np.asarray(flat, np.int32).reshape(-1)


def edges(indptr, indices) -> tuple[np.ndarray, np.ndarray]:
    """The (source, target) pairs of a CSR, row by row."""
    indptr = np.asarray(indptr)
    return np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr)), np.asarray(indices)


def csr(src, dst, n):
    """Rows of an edge list: self-loops and duplicate targets dropped, each row's targets
    sorted."""
    rws = [set() for _ in range(n)]
    for s, d in zip(np.asarray(src).tolist(), np.asarray(dst).tolist()):
        if s != d:
            rws[s].add(d)
    return from_rows([sorted(r) for r in rws])


def raw_csr(src, dst, n):
    """Rows of an edge list with every edge kept (self-loops and duplicates too), each row's
    targets sorted."""
    rws = [[] for _ in range(n)]
    for s, d in zip(np.asarray(src).tolist(), np.asarray(dst).tolist()):
        rws[s].append(d)
    return from_rows([sorted(r) for r in rws])


def pack(src, dst) -> np.ndarray:
    """Edges packed one per uint64, ``src << 32 | dst`` (Python integers, then NumPy)."""
    return np.asarray([(s << 32) | d for s, d in zip(np.asarray(src).tolist(),
                                                    np.asarray(dst).tolist())], np.uint64)


# --- condensation --------------------------------------------------------------------------------
def trim(indptr, indices, alive):
    """``(alive after, removed)``: remove every live vertex with no live in-edge or no live
    out-edge, in rounds, until a round removes nothing."""
    alive = np.asarray(alive, bool).copy()
    n = alive.shape[0]
    u, w = edges(indptr, indices)
    before = int(alive.sum())
    while True:
        live = alive[u] & alive[w]
        outdeg = np.bincount(u[live], minlength=n)
        indeg = np.bincount(w[live], minlength=n)
        drop = alive & ((outdeg == 0) | (indeg == 0))
        if not drop.any():
            return alive, before - int(alive.sum())
        alive &= ~drop


def reach_within_colour(indptr, indices, seeds, colour):
    """bool[n]: reached from a live seed along edges between vertices of one colour."""
    rws = rows(indptr, indices)
    colour = np.asarray(colour).tolist()
    seen = [bool(s) and c >= 0 for s, c in zip(np.asarray(seeds).tolist(), colour)]
    todo = deque(v for v, s in enumerate(seen) if s)
    while todo:
        v = todo.popleft()
        for w in rws[v]:
            if not seen[w] and colour[w] == colour[v]:
                seen[w] = True
                todo.append(w)
    return np.array(seen, bool)


def propagate_max_colour(indptr, indices, colour):
    """colour[w] = max(colour[w], colour[v]) over edges between live (colour >= 0) vertices,
    in rounds, until a round changes nothing; returns the new colours."""
    colour = np.asarray(colour).copy()
    u, w = edges(indptr, indices)
    live = (colour[u] >= 0) & (colour[w] >= 0)
    u, w = u[live], w[live]
    while True:
        new = colour.copy()
        np.maximum.at(new, w, colour[u])
        if np.array_equal(new, colour):
            return colour
        colour = new


def rank_by_first_occurrence(label):
    """Labels renumbered 0, 1, ... in the order they first appear, and how many there are."""
    seen: dict[int, int] = {}
    out = [seen.setdefault(x, len(seen)) for x in np.asarray(label).tolist()]
    return np.asarray(out, np.int32), len(seen)


def representatives(comp):
    """Whether each row is the first to hold its component."""
    seen: set[int] = set()
    return np.asarray([not (x in seen or seen.add(x)) for x in np.asarray(comp).tolist()], bool)


def component_pairs(indptr, indices, comp):
    """Every edge as its (comp[v], comp[w]) pair, packed, in CSR order (inside a component:
    a self-loop)."""
    comp = np.asarray(comp).tolist()
    pairs = [(comp[v], comp[w]) for v, r in enumerate(rows(indptr, indices)) for w in r]
    return pack([a for a, _ in pairs], [b for _, b in pairs])


def strong_components(src, dst, n) -> np.ndarray:
    """Component of each vertex (SciPy's own SCC algorithm: an independent implementation)."""
    if n == 0:
        return np.zeros(0, np.int32)
    g = csr_matrix((np.ones(len(src), np.int8), (np.asarray(src), np.asarray(dst))), (n, n))
    return connected_components(g, directed=True, connection="strong")[1].astype(np.int32)


# --- labels --------------------------------------------------------------------------------------
def levels(indptr, indices, n):
    """Longest path from a root to each vertex of a DAG: level[w] >= level[v] + 1 over every
    edge, raised in rounds until it holds."""
    level = np.zeros(n, np.int64)
    u, w = edges(indptr, indices)
    while True:
        new = level.copy()
        np.maximum.at(new, w, level[u] + 1)
        if np.array_equal(new, level):
            return level.astype(np.int32)
        level = new


def check_topo_order(level, order, offsets, want_level):
    """A :class:`~grail_duckdb.kernels.protocol.TopoOrder` (host arrays) is right: the levels
    are the longest paths, ``order`` lists every vertex once by non-decreasing level, level L
    fills ``order[offsets[L]:offsets[L + 1]]``."""
    n = want_level.shape[0]
    np.testing.assert_array_equal(level, want_level, err_msg="levels")
    np.testing.assert_array_equal(np.sort(order), np.arange(n), err_msg="order: a permutation")
    top = int(want_level.max()) + 1 if n else 0
    want_offsets = np.searchsorted(np.sort(want_level), np.arange(top + 1), side="left")
    np.testing.assert_array_equal(np.asarray(offsets, np.int64), want_offsets, err_msg="offsets")
    for lv in range(top):
        assert (level[order[want_offsets[lv]:want_offsets[lv + 1]]] == lv).all(), lv


def tree_parents(rev_indptr, rev_indices, level):
    """The smallest in-neighbour one level above each vertex, or -1."""
    level = np.asarray(level).tolist()
    return np.asarray([min((u for u in r if level[u] == level[v] - 1), default=-1)
                       for v, r in enumerate(rows(rev_indptr, rev_indices))], np.int32)


def tree_children(indptr, indices, level):
    """The out-neighbour of smallest (level, id) of each vertex, or -1."""
    level = np.asarray(level).tolist()
    return np.asarray([min(r, key=lambda w: (level[w], w), default=-1)
                       for r in rows(indptr, indices)], np.int32)


def subtree_sizes(parent):
    """Tree descendants of each vertex, itself included: every vertex adds one to itself and
    to each of its ancestors."""
    parent = np.asarray(parent)
    size = np.zeros(parent.shape[0], np.int64)
    cur = np.arange(parent.shape[0])
    while cur.shape[0]:
        np.add.at(size, cur, 1)
        cur = parent[cur]
        cur = cur[cur >= 0]
    return size.astype(np.int32)


def permute_step(x, mask, a1, c, a2, shift):
    """shared.permute_step, restated with Python integers."""
    x = (x * a1 + c) & mask
    x ^= x >> shift
    x = (x * a2) & mask
    return x ^ (x >> shift)


def vertex_rank(n: int, label: int, seed: int) -> np.ndarray:
    """Position of each vertex in label ``label``'s vertex order: blocks of ORDER_BLOCK ids in
    the cycle-walked permutation of :func:`permute_step`, ids xored inside a block."""
    block = shared.ORDER_BLOCK
    n_blocks = (n + block - 1) // block
    mask, a1, c, a2, shift, xor = (int(p) for p in shared.order_params(n_blocks, label, seed))
    block_rank = {}
    for b in range(n_blocks):
        x = permute_step(b, mask, a1, c, a2, shift)
        while x >= n_blocks:
            x = permute_step(x, mask, a1, c, a2, shift)
        block_rank[x] = b
    assert sorted(block_rank) == list(range(n_blocks)), "the block order is not a permutation"
    return np.asarray([block_rank[v // block] * block + ((v % block) ^ xor) for v in range(n)],
                      np.int64)


def post_orders(parent, d: int, seed: int):
    """int32[n, d]: 1-based post-order ranks of a depth-first walk of the tree forest, in label
    j's vertex order among siblings (roots are siblings too)."""
    parent = np.asarray(parent).tolist()
    n = len(parent)
    post = np.zeros((n, d), np.int32)
    for j in range(d):
        rank = vertex_rank(n, j, seed)
        children = [[] for _ in range(n + 1)]  # children[n]: the roots
        for v in sorted(range(n), key=lambda v: rank[v]):
            children[parent[v] if parent[v] >= 0 else n].append(v)
        counter = 0
        stack = [(n, iter(children[n]))]
        while stack:
            v, todo = stack[-1]
            nxt = next(todo, None)
            if nxt is not None:
                stack.append((nxt, iter(children[nxt])))
                continue
            stack.pop()
            if v < n:
                counter += 1
                post[v, j] = counter
    return post


def check_post_orders(post, parent, size):
    """What makes ``post`` a post order of the tree in each label: a permutation of 1..n, and
    every vertex's tree descendants filling exactly [post - size + 1, post]."""
    parent, size = np.asarray(parent), np.asarray(size)
    n = parent.shape[0]
    child = np.flatnonzero(parent >= 0)
    for j in range(post.shape[1]):
        p = post[:, j]
        np.testing.assert_array_equal(np.sort(p), np.arange(1, n + 1), err_msg=f"label {j}")
        lo = p - size + 1
        par = parent[child]
        # a child's interval lies inside its parent's, below the parent's own rank; with
        # distinct ranks and size[v] descendants, [lo, post] then holds exactly v's subtree
        assert (lo[par] <= lo[child]).all() and (p[child] < p[par]).all(), f"label {j}"


def interval_bounds(indptr, indices, post):
    """(inner, outer): the least and the largest ``post`` over each vertex and all its
    descendants, lowered / raised over every edge in rounds until nothing changes."""
    inner, outer = np.asarray(post).copy(), np.asarray(post).copy()
    u, w = edges(indptr, indices)
    while True:
        lo, hi = inner.copy(), outer.copy()
        np.minimum.at(lo, u, inner[w])
        np.maximum.at(hi, u, outer[w])
        if np.array_equal(lo, inner) and np.array_equal(hi, outer):
            return inner, outer
        inner, outer = lo, hi


def _matrix(indptr, indices) -> csr_matrix:
    n = np.asarray(indptr).shape[0] - 1
    return csr_matrix((np.ones(len(indices), np.int8), np.asarray(indices), np.asarray(indptr)),
                      (n, n))


def hub_bits(fwd, rev, hub_of, words):
    """(down, up) uint64[n, words]: bit h of down[v] iff v reaches hub h, of up[v] iff hub h
    reaches v; one breadth-first search each way per hub."""
    n = np.asarray(hub_of).shape[0]
    down = np.zeros((n, words), np.uint64)
    up = np.zeros((n, words), np.uint64)
    g_fwd, g_rev = _matrix(*fwd), _matrix(*rev)
    for v in np.flatnonzero(np.asarray(hub_of) >= 0):
        h = int(hub_of[v])
        bit = np.uint64(1 << (h % 64))
        up[breadth_first_order(g_fwd, int(v), return_predecessors=False), h // 64] |= bit
        down[breadth_first_order(g_rev, int(v), return_predecessors=False), h // 64] |= bit
    return down, up


def window_bits(fwd, rev, hub_of, first, level, words):
    """(down, up) uint64[n, words] of the window hubs: bit i of down[v] iff v reaches hub
    ``first[level[v]] + i``, of up[v] iff hub ``first[level[v] + 1] - 64 words + i`` reaches
    v; one breadth-first search each way per hub, its bit then placed in each vertex's window."""
    n = np.asarray(hub_of).shape[0]
    span = 64 * words
    down = np.zeros((n, words), np.uint64)
    up = np.zeros((n, words), np.uint64)
    g_fwd, g_rev = _matrix(*fwd), _matrix(*rev)
    level = np.asarray(level, np.int64)
    first = np.asarray(first, np.int64)
    base_down = first[level] if n else np.zeros(0, np.int64)
    base_up = first[level + 1] - span if n else np.zeros(0, np.int64)

    def put(bits, vertices, h, base):
        i = h - base[vertices]
        keep = (i >= 0) & (i < span)
        v, i = vertices[keep], i[keep]
        np.bitwise_or.at(bits, (v, i // 64),
                         np.left_shift(np.uint64(1), (i % 64).astype(np.uint64)))

    for v in np.flatnonzero(np.asarray(hub_of) >= 0):
        h = int(hub_of[v])
        put(up, breadth_first_order(g_fwd, int(v), return_predecessors=False), h, base_up)
        put(down, breadth_first_order(g_rev, int(v), return_predecessors=False), h, base_down)
    return down, up


# --- queries -------------------------------------------------------------------------------------
class LabelTests:
    """The cuts of one pair of components, each written out on Python integers."""

    def __init__(self, lab):
        self.level = np.asarray(lab.level).tolist()
        self.inner, self.outer = np.asarray(lab.inner).tolist(), np.asarray(lab.outer).tolist()
        self.rows = np.asarray(lab.tree).tolist()
        self.down = [[int(x) for x in r] for r in np.asarray(lab.hub_down)]
        self.up = [[int(x) for x in r] for r in np.asarray(lab.hub_up)]
        self.first = None if lab.win_first is None else np.asarray(lab.win_first).tolist()
        if self.first is not None:  # each window as one Python integer over hub numbers
            span = 64 * np.asarray(lab.win_down).shape[1]
            self.wdown = [sum(int(x) << (64 * k) for k, x in enumerate(r)) << self.first[lv]
                          for r, lv in zip(np.asarray(lab.win_down), self.level)]
            self.wup = [sum(int(x) << (64 * k) for k, x in enumerate(r))
                        << max(self.first[lv + 1] - span, 0) >> max(span - self.first[lv + 1], 0)
                        for r, lv in zip(np.asarray(lab.win_up), self.level)]

    def level_cut(self, u, t):
        return self.level[u] >= self.level[t]

    def tree(self, u, t):
        """t in u's subtree of the tree of parents, or u in t's subtree of the tree of chosen
        children."""
        a, b = self.rows[u], self.rows[t]
        return a[0] <= b[1] <= a[1] or b[2] <= a[3] <= b[3]

    def hub(self, u, t):
        return any(du & ut for du, ut in zip(self.down[u], self.up[t]))

    def window(self, u, t):
        """A window hub in u's down window and t's up window that u reaches and that reaches t:
        each window a Python integer whose bit h stands for hub h."""
        return self.first is not None and (self.wdown[u] & self.wup[t]) != 0

    def excludes(self, u, t):
        """The negative tests: level, every GRAIL interval, the hub sets."""
        return (self.level_cut(u, t)
                or any(it < iu or ot > ou for iu, ou, it, ot in zip(
                    self.inner[u], self.outer[u], self.inner[t], self.outer[t]))
                or any((dt & ~du) | (uu & ~ut) for du, uu, dt, ut in zip(
                    self.down[u], self.up[u], self.down[t], self.up[t])))


def query_cuts(sid, did, comp, lab, prune=True):
    """The status code of each query of vertex ids, as the cut order of the queries module
    states it (before the bounded search: UNDECIDED where no cut settles it)."""
    cuts = LabelTests(lab)
    comp = None if comp is None else np.asarray(comp).tolist()
    out = []
    for a, b in zip(np.asarray(sid).tolist(), np.asarray(did).tolist()):
        if a < 0 or b < 0:
            out.append(shared.UNKNOWN)
            continue
        if a == b:
            out.append(shared.SAME_VERTEX)
            continue
        u, t = (a, b) if comp is None else (comp[a], comp[b])
        if u == t:
            code = shared.SAME_COMPONENT
        elif not prune:
            code = shared.UNDECIDED
        elif cuts.level_cut(u, t):
            code = shared.LEVEL_CUT
        elif cuts.tree(u, t):
            code = shared.TREE_CUT
        elif cuts.excludes(u, t):
            code = shared.LABEL_CUT
        elif cuts.hub(u, t) or cuts.window(u, t):
            code = shared.HUB_CUT
        else:
            code = shared.UNDECIDED
        out.append(code)
    return np.asarray(out, np.int8).reshape(-1)


def probe(u, t, ptr, idx, cuts, budget):
    """The bounded search of one undecided pair of components, as the queries module states it:
    depth first from u (children pushed in row order, the last pushed first), at most
    ``budget`` edges and a stack of PROBE_STACK entries; PROBE_REACHES at the first vertex that
    is t or meets a positive cut for t, DEFERRED when the budget or the stack runs out,
    PROBE_EXCLUDES when nothing is left to enter. ``ptr``, ``idx``: the DAG's rows as lists;
    ``cuts``: its :class:`LabelTests`."""
    if budget <= 0:
        return shared.DEFERRED
    stack, steps = [u], 0
    while stack:
        v = stack.pop()
        for w in idx[ptr[v]:ptr[v + 1]]:
            if steps == budget:
                return shared.DEFERRED
            steps += 1
            if w == t or cuts.tree(w, t) or cuts.hub(w, t):
                return shared.PROBE_REACHES
            if not cuts.excludes(w, t):
                if len(stack) == shared.PROBE_STACK:
                    return shared.DEFERRED
                stack.append(w)
    return shared.PROBE_EXCLUDES


#: the answer each status code implies (None: no claim; UNKNOWN: false between distinct ids)
IMPLIED = {shared.UNDECIDED: None, shared.SAME_COMPONENT: True, shared.LEVEL_CUT: False,
           shared.LABEL_CUT: False, shared.TREE_CUT: True, shared.HUB_CUT: True,
           shared.SAME_VERTEX: True, shared.UNKNOWN: False}


def check_sound(status, truth):
    """Every code's implied answer agrees with the truth (an oracle's answers)."""
    for code, implied in IMPLIED.items():
        rows = np.flatnonzero(np.asarray(status) == code)
        if implied is not None and rows.shape[0]:
            bad = rows[np.asarray(truth)[rows] != implied]
            assert bad.shape[0] == 0, (f"{shared.STATUS_NAMES[code]} claims {implied} for "
                                       f"queries {bad[:10].tolist()}")


# --- fingerprints --------------------------------------------------------------------------------
def mix64(x: int) -> int:
    """splitmix64's finaliser on Python integers, from the constants of kernels/shared.py."""
    k = shared.SPLITMIX
    x = (x + k["SM_GAMMA"]) & MASK64
    x = ((x ^ (x >> 30)) * k["SM_M1"]) & MASK64
    x = ((x ^ (x >> 27)) * k["SM_M2"]) & MASK64
    return x ^ (x >> 31)


def edge_hash_sum(pairs) -> int:
    """Sum of mix64 over packed edges ``src << 32 | dst``, modulo 2^64."""
    return sum(mix64(p) for p in np.asarray(pairs).tolist()) & MASK64


def key_hash_sum(keys) -> int:
    """Sum of mix64 over the keys read as unsigned 64-bit integers, modulo 2^64."""
    return sum(mix64(k & MASK64) for k in np.asarray(keys).tolist()) & MASK64


# --- the whole index, by the references ----------------------------------------------------------
@dataclass(frozen=True)
class ReferenceIndex:
    """Components, condensed DAG and labels computed by the references alone (host arrays);
    the query kernels' inputs. Components are SciPy's, numbered by their first vertex as the
    engine numbers them (tree parents, the smallest in-neighbour, depend on the numbering)."""

    comp: np.ndarray
    n_components: int
    dag: tuple  # (indptr, indices), duplicates removed
    dag_rev: tuple
    labels: Labels


def reference_index(src, dst, n: int, d: int = 3, seed: int = 0) -> ReferenceIndex:
    """The index of an edge list over ids 0..n-1, stage by stage with the references (the hub
    vertices are the engine's choice, ``hub_slots``: a policy, not a kernel)."""
    comp, c = rank_by_first_occurrence(strong_components(src, dst, n))  # the engine's numbering
    pairs = component_pairs(*csr(src, dst, n), comp).tolist()
    cs, cd = [p >> 32 for p in pairs], [p & 0xFFFFFFFF for p in pairs]
    dag, dag_rev = csr(cs, cd, c), csr(cd, cs, c)
    level = levels(*dag, c)
    parent = tree_parents(*dag_rev, level)
    size = subtree_sizes(parent)
    post = post_orders(parent, d, seed)
    inner, outer = interval_bounds(*dag, post)
    hub_of = hub_slots(np, CSR(*dag), CSR(*dag_rev), 64 * shared.HUB_WORDS)
    down, up = hub_bits(dag, dag_rev, hub_of, shared.HUB_WORDS)
    levels_ = int(np.max(level)) + 1 if c else 0
    win_of, first = window_hubs(np, CSR(*dag), np.asarray(level), levels_)
    win_down, win_up = window_bits(dag, dag_rev, win_of, first, level, shared.WIN_WORDS)
    child = tree_children(*dag, level)
    rsize = subtree_sizes(child)
    rpost = post_orders(child, 1, seed)[:, 0]
    tree = np.stack([post[:, 0] - size + 1, post[:, 0], rpost - rsize + 1, rpost], axis=1)
    lab = Labels(level=level, inner=inner, outer=outer, tree=tree.astype(np.int32),
                 hub_down=down, hub_up=up, win_down=win_down, win_up=win_up, win_first=first)
    return ReferenceIndex(comp, c, dag, dag_rev, lab)
