"""The graphs of the tests, in one place: hypothesis strategies and fixed adversarial graphs.

A :class:`Graph` is an edge list over the vertex ids 0..n-1 (int64 ``src`` -> ``dst``; an id
need not have an edge). The kernel tests read the ids as they are (n vertices); the pipeline
tests map them to keys with :func:`keys_of` (the index's vertices are then the keys that occur
in an edge, and every other id is an unknown key).

* :func:`graphs`: hypothesis graphs of every small shape: random (cycles, self-loops,
  duplicate edges), DAG-only, chains with shortcuts, stars, nested cycles, self-loops only,
  one edge repeated, no edge at all;
* :data:`ADVERSARIAL`: fixed graphs by name, for the kernels' code paths and the cuts: the empty
  graph, one vertex, self-loops only, all duplicates, a chain of thousands of levels, stars of
  5,000 leaves (out, in, both ways), a giant cycle, R-MAT graphs (one giant SCC, skewed
  degrees), rows of 31-33 and 4,095-4,097 edges (the GPU advance moves from thread to warp to
  whole-grid code at 32 and 4,096 edges), and graphs built to defeat every cut;
* :func:`dagify`: the same edges oriented along a random order (the label kernels' inputs).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

from grail_duckdb.tools.generators import rmat as _rmat_table


@dataclass(frozen=True)
class Graph:
    """Edges ``src[e] -> dst[e]`` over the vertex ids 0..n-1 (int64 arrays)."""

    n: int
    src: np.ndarray
    dst: np.ndarray
    name: str = ""

    @property
    def m(self) -> int:
        return int(self.src.shape[0])

    def __repr__(self) -> str:  # hypothesis prints failing examples with this
        return (f"Graph(n={self.n}, src={self.src.tolist()}, dst={self.dst.tolist()}, "
                f"name={self.name!r})")


def _graph(n, src, dst, name="") -> Graph:
    return Graph(int(n), np.asarray(src, np.int64).reshape(-1),
                 np.asarray(dst, np.int64).reshape(-1), name)


# --- hypothesis ----------------------------------------------------------------------------------
SHAPES = ("any", "dag", "cycle+tail", "chain", "star", "nested cycles", "self-loops only",
          "one edge repeated", "no edges")


@st.composite
def graphs(draw, max_n: int = 40, max_m: int = 120, shapes=SHAPES) -> Graph:
    """Small directed graphs of every shape in ``shapes`` (see :data:`SHAPES`); ids of
    0..n-1 without an edge are isolated (kernels) or unknown keys (pipeline)."""
    n = draw(st.integers(1, max_n))
    shape = draw(st.sampled_from(shapes))
    m = draw(st.integers(0, max_m))
    ids = st.lists(st.integers(0, n - 1), min_size=m, max_size=m)
    src, dst = draw(ids), draw(ids)
    if shape == "dag":
        src, dst = [min(a, b) for a, b in zip(src, dst)], [max(a, b) for a, b in zip(src, dst)]
    elif shape == "cycle+tail" and n > 1:
        k = draw(st.integers(2, n))
        src, dst = src + list(range(k)), dst + [(i + 1) % k for i in range(k)]
    elif shape == "chain":
        cut = draw(st.integers(0, m))  # a path through every id, a few shortcuts forward
        short = list(zip(src[:cut], dst[:cut]))
        src = list(range(n - 1)) + [min(a, b) for a, b in short]
        dst = list(range(1, n)) + [max(a, b) for a, b in short]
    elif shape == "star":
        hub = draw(st.integers(0, n - 1))
        way = draw(st.sampled_from(["out", "in", "both"]))
        leaves = [v for v in range(n) if v != hub]
        out = [(hub, v) for v in leaves] if way != "in" else []
        inn = [(v, hub) for v in leaves] if way != "out" else []
        pairs = out + inn + list(zip(src[: m // 8], dst[: m // 8]))
        src, dst = [a for a, _ in pairs], [b for _, b in pairs]
    elif shape == "nested cycles":
        k = draw(st.integers(1, max(1, n // 3)))  # k cycles strung on a line, plus noise
        blocks = np.array_split(np.arange(n), k)
        pairs = [(int(b[i]), int(b[(i + 1) % len(b)])) for b in blocks for i in range(len(b))]
        pairs += [(int(blocks[i][0]), int(blocks[i + 1][-1])) for i in range(k - 1)]
        pairs += list(zip(src[: m // 4], dst[: m // 4]))
        src, dst = [a for a, _ in pairs], [b for _, b in pairs]
    elif shape == "self-loops only":
        src = dst = src
    elif shape == "one edge repeated":
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        src, dst = [a] * max(m, 1), [b] * max(m, 1)
    elif shape == "no edges":
        src = dst = []
    order = draw(st.permutations(range(len(src))))  # the row order must not matter
    return _graph(n, np.asarray(src, np.int64)[list(order)],
                  np.asarray(dst, np.int64)[list(order)], f"hypothesis:{shape}")


KEY_KINDS = ("int", "sparse", "str")


def keys_of(ids, kind: str):
    """Vertex keys of ids: ``int`` (the ids), ``sparse`` (negative and far apart: the sorted
    lookup instead of the dense table) or ``str`` (VARCHAR keys, sorted otherwise than the ids)."""
    ids = np.asarray(ids, np.int64)
    if kind == "int":
        return ids
    if kind == "sparse":
        return ids * 1_000_003 - 5_000_000_000
    if kind == "str":
        return pa.array([f"v{i}" for i in ids.tolist()], pa.string())
    raise ValueError(kind)


# --- transformations -----------------------------------------------------------------------------
def dagify(g: Graph, seed: int = 0) -> Graph:
    """The graph as a DAG, self-loops dropped: an acyclic graph as it is (its rows keep their
    lengths), any other with each edge oriented from the earlier to the later of a random order
    of the ids (the same degrees up to direction)."""
    keep = g.src != g.dst
    s, d = g.src[keep], g.dst[keep]
    rank = _topological_rank(g.n, s, d)
    if rank is None:
        rank = np.random.default_rng(seed).permutation(g.n)
    fwd = rank[s] < rank[d]
    return _graph(g.n, np.where(fwd, s, d), np.where(fwd, d, s), f"dag of {g.name}")


def _topological_rank(n, src, dst):
    """Position of each id in a topological order (Kahn), or None when there is a cycle."""
    indeg = np.bincount(dst, minlength=n)
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1))
    ready = list(np.flatnonzero(indeg == 0))
    rank = np.full(n, -1, np.int64)
    for i, v in enumerate(ready):  # ready grows while it is read
        rank[v] = i
        for w in dst[order[starts[v]:starts[v + 1]]]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return rank if len(ready) == n else None


# --- fixed adversarial graphs --------------------------------------------------------------------
def empty() -> Graph:
    return _graph(0, [], [], "empty")


def single_vertex() -> Graph:
    """One vertex (a self-loop: the pipeline needs an edge row to know it)."""
    return _graph(1, [0], [0], "single vertex")


def self_loops_only(n: int = 60) -> Graph:
    return _graph(n, np.arange(n), np.arange(n), "self-loops only")


def all_duplicates(copies: int = 700) -> Graph:
    """One edge and its reverse, each repeated: a 2-cycle of 1,400 rows plus a repeated tail."""
    src = [0] * copies + [1] * copies + [1] * 40
    dst = [1] * copies + [0] * copies + [2] * 40
    return _graph(3, src, dst, "all duplicates")


def chain(n: int = 5000, shortcuts: int = 3000, seed: int = 7) -> Graph:
    """A path of n vertices (n levels) with random short forward shortcuts, rows reversed."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n - 50, shortcuts)
    src = np.concatenate([np.arange(n - 1), a])
    dst = np.concatenate([np.arange(1, n), a + rng.integers(2, 50, shortcuts)])
    return _graph(n, src[::-1], dst[::-1], f"chain {n}")


def star(leaves: int = 5000, way: str = "out") -> Graph:
    """Vertex 0 with ``leaves`` out-edges (``out``), in-edges (``in``) or both (one SCC)."""
    leaf = np.arange(1, leaves + 1)
    hub = np.zeros(leaves, np.int64)
    pairs = {"out": [(hub, leaf)], "in": [(leaf, hub)], "both": [(hub, leaf), (leaf, hub)]}[way]
    src = np.concatenate([p[0] for p in pairs])
    dst = np.concatenate([p[1] for p in pairs])
    return _graph(leaves + 1, src, dst, f"star {leaves} {way}")


def giant_cycle(n: int = 5000, chords: int = 50, seed: int = 3) -> Graph:
    """One cycle through every vertex, plus a few chords: one SCC of n vertices."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    src = np.concatenate([perm, rng.integers(0, n, chords)])
    dst = np.concatenate([np.roll(perm, -1), rng.integers(0, n, chords)])
    return _graph(n, src, dst, f"giant cycle {n}")


def rmat(scale: int = 12, factor: int = 8, seed: int = 1) -> Graph:
    """An R-MAT graph (skewed degrees, one giant SCC, self-loops and duplicates kept)."""
    t = _rmat_table(scale, factor, seed=seed)
    return _graph(1 << scale, t.column("src").to_numpy(), t.column("dst").to_numpy(),
                  f"rmat {scale}x{factor}")


#: row lengths around the GPU advance's bins (thread < 32 <= warp < 4096 <= whole grid)
THRESHOLD_DEGREES = (1, 31, 32, 33, 4095, 4096, 4097)


def degree_thresholds(cyclic: bool = False) -> Graph:
    """For every length in :data:`THRESHOLD_DEGREES`, a centre with that many out-edges to a
    fan of its own and a centre with that many in-edges from the same fan, the fans strung in
    sequence (in-centre -> next out-centre) on different levels: a DAG. ``cyclic`` adds each
    in-centre -> its out-centre, so that every fan is one SCC of its own (trim, the pivot's
    sweeps and the colour propagation meet every row length)."""
    src, dst = [], []
    fan_start = 2 * len(THRESHOLD_DEGREES)  # ids 0.. are the centres, the fans follow
    for i, deg in enumerate(THRESHOLD_DEGREES):
        out_c, in_c = 2 * i, 2 * i + 1
        fan = np.arange(fan_start, fan_start + deg)
        fan_start += deg
        src += [np.full(deg, out_c), fan]
        dst += [fan, np.full(deg, in_c)]
        if i:
            src.append([in_c - 2])
            dst.append([out_c])
        if cyclic:
            src.append([in_c])
            dst.append([out_c])
    name = "degree thresholds" + (" cyclic" if cyclic else "")
    return _graph(fan_start, np.concatenate([np.asarray(x) for x in src]),
                  np.concatenate([np.asarray(x) for x in dst]), name)


def cut_defeating(sinks: int = 195, decoys: int = 130, seed: int = 0) -> Graph:
    """Pairs that every cut lets through, unreachable and reachable, among decoy hubs.

    * False pairs: roots ``w`` = 0 and ``u`` = 1; ``w`` -> ``t`` = 2 and ``w`` -> every sink,
      ``u`` -> every sink. The sinks' tree parent is ``w`` (the smaller id), so ``u``'s tree
      interval is ``u`` alone; ``t`` sits among the sinks in every sibling order, so ``u``'s
      GRAIL intervals (spanning the sinks) hold ``t``'s with high probability (the default
      count of sinks is one where they do for the tests' labels: d = 3 seed 11, d = 5 seed 0);
      ``u``'s level is below ``t``'s. ``u`` does not reach ``t``.
    * True pairs: ``p`` = 3 -> ``m`` = 5, ``q`` = 4 -> ``m``, ``m`` -> ``x`` = 6: ``m``'s tree
      parent is ``p``, so ``q``'s tree interval misses ``x``, which ``q`` reaches. ``m`` also
      leads to ``y``, a level above ``x`` (a chain ``r0 -> r1 -> r2 -> x`` puts ``x`` at level
      3), so ``m``'s chosen child is ``y`` and ``q``'s chain of chosen children misses ``x``
      too.
    * Decoys: a complete bipartite ``decoys`` x 300 graph, apart: its vertices out-rank all
      others in out- and in-degree, so they take every hub slot and the hub sets of the
      vertices above are empty (no hub cut either way).
    """
    w, u, t, p, q, m, x = range(7)
    sink = np.arange(7, 7 + sinks)
    left = np.arange(7 + sinks, 7 + sinks + decoys)
    right = np.arange(left[-1] + 1, left[-1] + 1 + 300)
    y, r0, r1, r2 = range(int(right[-1]) + 1, int(right[-1]) + 5)
    src = [[w, p, q, m, m, r0, r1, r2], np.full(sinks, w), np.full(sinks, u),
           np.repeat(left, right.shape[0])]
    dst = [[t, m, m, x, y, r1, r2, x], sink, sink, np.tile(right, decoys)]
    s = np.concatenate([np.asarray(a) for a in src])
    d = np.concatenate([np.asarray(a) for a in dst])
    order = np.random.default_rng(seed).permutation(s.shape[0])
    return _graph(r2 + 1, s[order], d[order], "cut defeating")


#: the pairs of :func:`cut_defeating` that only the search settles: (sources, targets, answers)
CUT_DEFEATING_PAIRS = (np.array([1, 4]), np.array([2, 6]), np.array([False, True]))

#: fixed graphs by name (built once per process by :func:`adversarial`)
ADVERSARIAL = {
    "empty": empty,
    "single-vertex": single_vertex,
    "self-loops-only": self_loops_only,
    "all-duplicates": all_duplicates,
    "chain-5000": chain,
    "star-out": lambda: star(5000, "out"),
    "star-in": lambda: star(5000, "in"),
    "star-both": lambda: star(5000, "both"),
    "giant-cycle": giant_cycle,
    "rmat-12": rmat,
    "rmat-14": lambda: rmat(14, 8, seed=14),
    "degree-thresholds": degree_thresholds,
    "degree-thresholds-cyclic": lambda: degree_thresholds(cyclic=True),
    "cut-defeating": cut_defeating,
}


@functools.lru_cache(maxsize=None)
def adversarial(name: str) -> Graph:
    """The fixed graph ``name`` of :data:`ADVERSARIAL` (cached: tests share it)."""
    g = ADVERSARIAL[name]()
    return Graph(g.n, g.src, g.dst, name)
