"""Hops, shortest paths, hop-bounded reachability, bounded one-to-all sets and reach counts on
every backend present, against plain breadth-first searches over the original edges
(``tests/oracle.py``): every hop count equal to the oracle's, every path checked edge by edge,
for its length and against the lexicographically smallest shortest path by key; hypothesis
graphs of every shape and key type (cycles, self-loops, duplicate edges, isolated and unknown
keys, NULLs, empty graphs) and the shared datasets (marked ``datasets``)."""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.engine import reach_counts as rc
from grail_duckdb.engine.paths import UNBOUNDED, path_graph
from grail_duckdb.kernels import gpu_available
from benchmarks import datasets, workloads
from oracle import hop_distances, smallest_shortest_path
from strategies import KEY_KINDS, Graph, adversarial, graphs, keys_of


def build(g: Graph, backend, kind="int", **kw):
    return gd.build_index(keys_of(g.src, kind), keys_of(g.dst, kind), backend=backend, **kw)


def key_rank(n: int, kind: str) -> np.ndarray:
    """Position of each id's key in the keys' sorted order (the paths' tie-break)."""
    keys = keys_of(np.arange(n), kind)
    keys = keys.to_pylist() if isinstance(keys, pa.Array) else keys.tolist()
    rank = np.empty(n, np.int64)
    rank[sorted(range(n), key=lambda i: keys[i])] = np.arange(n)
    return rank


def keys_back(values, kind: str) -> list:
    """Ids of keys of ``keys_of(..., kind)``."""
    if kind == "int":
        return list(values)
    if kind == "sparse":
        return [(v + 5_000_000_000) // 1_000_003 for v in values]
    return [int(v[1:]) for v in values]


class Oracle:
    """All-pairs hop counts of a small graph over the ids 0..n + 1 (the last two: keys of no
    vertex), and the smallest shortest paths by key rank."""

    def __init__(self, g: Graph, kind: str):
        self.g, self.kind, self.n = g, kind, g.n + 2
        self.dist = hop_distances(g.src, g.dst, self.n, np.arange(self.n))
        self.rank = key_rank(self.n, kind)

    def path(self, s, t):
        return smallest_shortest_path(self.g.src, self.g.dst, self.dist[:, t], s, t, self.rank)


def pair_columns(o: Oracle, rng, count=300):
    """Random id pairs with a few NULLs on either side, as key columns, and the ids."""
    qs, qd = rng.integers(0, o.n, count), rng.integers(0, o.n, count)
    null_s, null_d = rng.random(count) < 0.05, rng.random(count) < 0.05
    ks, kd = keys_of(qs, o.kind), keys_of(qd, o.kind)
    if not isinstance(ks, pa.Array):
        ks, kd = pa.array(ks), pa.array(kd)
    ks = pa.array([None if m else v for v, m in zip(ks.to_pylist(), null_s)], ks.type)
    kd = pa.array([None if m else v for v, m in zip(kd.to_pylist(), null_d)], kd.type)
    return ks, kd, qs, qd, null_s | null_d


def check_path(o: Oracle, s: int, t: int, got) -> None:
    """``got`` (keys) is the oracle's path: every step an edge, shortest, smallest by key."""
    want = o.path(s, t)
    if want is None:
        assert got is None, (s, t, got)
        return
    ids = keys_back(got, o.kind)
    edges = set(zip(o.g.src.tolist(), o.g.dst.tolist()))
    assert ids[0] == s and ids[-1] == t and len(ids) == o.dist[s, t] + 1, (s, t, ids)
    assert all((a, b) in edges for a, b in zip(ids, ids[1:])), (s, t, ids)
    assert ids == want, (s, t, ids, want)


@settings(max_examples=60)
@given(g=graphs(max_n=30, max_m=90), kind=st.sampled_from(KEY_KINDS), seed=st.integers(0, 99),
       labels=st.integers(1, 4))
def test_hops_paths_and_bounds_match_the_oracle(backend, g, kind, seed, labels):
    idx = build(g, backend, kind, labels=labels, seed=seed)
    o = Oracle(g, kind)
    rng = np.random.default_rng(seed)
    ks, kd, qs, qd, null = pair_columns(o, rng)
    want = np.where(qs == qd, 0, o.dist[qs, qd])
    got = idx.hops(ks, kd).to_pylist()
    assert got == [None if m or w < 0 else int(w) for w, m in zip(want, null)]
    for s, t, p, m in zip(qs, qd, idx.path(ks, kd).to_pylist(), null):
        if m:
            assert p is None
        elif s == t:
            assert keys_back(p, kind) == [s]
        else:
            check_path(o, int(s), int(t), p)
    k = pa.array(rng.integers(-1, 5, len(ks)).tolist(), pa.int64()).to_pylist()
    k = pa.array([None if r < 0.05 else v for v, r in zip(k, rng.random(len(k)))], pa.int64())
    within = idx.reaches_within(ks, kd, k).to_pylist()
    for w, m, kk, got_w in zip(want, null, k.to_pylist(), within):
        assert got_w == (None if m or kk is None else bool(0 <= w <= kk))


@settings(max_examples=40)
@given(g=graphs(max_n=25, max_m=80), labels=st.integers(1, 3), seed=st.integers(0, 99))
def test_the_pair_search_settles_every_pair_itself(backend, g, labels, seed):
    """The pairs the cuts leave open reach the pair search unsettled: on every ordered pair of
    two vertices, reachable or not, within random hop bounds, its hops are the oracle's (-1:
    no path within the bound) and its paths the smallest shortest ones, edge by edge."""
    idx = build(g, backend, "int", labels=labels, seed=seed)
    o = Oracle(g, "int")
    keys = np.asarray(idx.ids.keys.to_pylist(), np.int64)  # the key of each vertex id
    s, t = (a.ravel() for a in np.meshgrid(np.arange(keys.shape[0]), np.arange(keys.shape[0])))
    s, t = s[s != t], t[s != t]
    rng = np.random.default_rng(seed)
    limits = np.where(rng.random(s.shape[0]) < 0.5, UNBOUNDED, rng.integers(0, 4, s.shape[0]))
    hops, (offsets, verts) = idx.kernels.pair_hops(
        path_graph(idx), s.astype(np.int32), t.astype(np.int32), limits.astype(np.int32), True)
    d = o.dist[keys[s], keys[t]]
    want = np.where((d >= 0) & (d <= limits), d, -1)
    np.testing.assert_array_equal(np.asarray(hops), want)
    for i in range(s.shape[0]):
        got = keys[np.asarray(verts[offsets[i]:offsets[i + 1]])].tolist()
        if want[i] < 0:
            assert got == [], (s[i], t[i], got)
        else:
            check_path(o, int(keys[s[i]]), int(keys[t[i]]), got)


def test_long_paths_keep_their_hops(backend):
    """A chain of 3,000 vertices with forward chords: searches thousands of levels deep, on
    both sides, give the oracle's hops and its smallest shortest paths."""
    n = 3000
    chords = np.arange(0, n - 40, 37)
    g = Graph(n, np.concatenate([np.arange(n - 1), chords]),
              np.concatenate([np.arange(1, n), chords + 11]), "chain")
    idx = build(g, backend)
    o = Oracle(g, "int")
    qs, qt = [0, 5, 2999, 1000, 37, 0], [2999, 2500, 0, 1001, 48, 36]
    want = [int(o.dist[a, b]) if o.dist[a, b] >= 0 else None for a, b in zip(qs, qt)]
    assert idx.hops(qs, qt).to_pylist() == want
    for a, b, p in zip(qs, qt, idx.path(qs, qt).to_pylist()):
        check_path(o, a, b, p)


@settings(max_examples=40)
@given(g=graphs(max_n=25, max_m=70), kind=st.sampled_from(KEY_KINDS),
       hops=st.one_of(st.none(), st.integers(-1, 4)), seed=st.integers(0, 99))
def test_bounded_one_to_all_sets_match_the_oracle(backend, g, kind, hops, seed):
    idx = build(g, backend, kind)
    o = Oracle(g, kind)
    x = int(np.random.default_rng(seed).integers(0, o.n))
    key = keys_of(np.array([x]), kind)
    key = key[0].as_py() if isinstance(key, pa.Array) else int(key[0])
    for forward, table in ((True, idx.descendants(key, max_hops=hops)),
                           (False, idx.ancestors(key, max_hops=hops))):
        d = o.dist[x] if forward else o.dist[:, x]
        limit = np.iinfo(np.int64).max if hops is None else hops
        members = [v for v in range(o.n) if 0 <= d[v] <= limit]
        if x not in idx.ids.keys.to_pylist() and hops is not None and hops < 0:
            members = []
        want = sorted(((int(d[v]), o.rank[v], v) for v in members))
        got = table.to_pydict()
        assert keys_back(got["key"], kind) == [v for _, _, v in want]
        assert got["hops"] == [h for h, _, _ in want]


@settings(max_examples=40)
@given(g=graphs(max_n=30, max_m=90), kind=st.sampled_from(KEY_KINDS))
def test_reach_counts_match_the_oracle(backend, g, kind):
    idx = build(g, backend, kind)
    o = Oracle(g, kind)
    vertices = keys_back(idx.ids.keys.to_pylist(), kind)
    reach = o.dist[np.ix_(vertices, vertices)] >= 0
    exact = idx.reach_counts("exact").to_pydict()
    assert keys_back(exact["key"], kind) == vertices
    assert exact["reaches"] == (reach.sum(1) - 1).tolist()
    assert exact["reached_by"] == (reach.sum(0) - 1).tolist()
    assert set(exact["mode"]) <= {"exact"} and set(exact["rel_error"]) <= {0.0}
    approx = idx.reach_counts("approximate", precision=6).to_pydict()
    assert set(approx["mode"]) <= {"approximate"}
    # the small-range estimate of a few dozen hashed vertices in 64 registers is near-exact
    for got, true in ((approx["reaches"], reach.sum(1) - 1), (approx["reached_by"], reach.sum(0) - 1)):
        assert np.all(np.abs(np.array(got, np.int64) - true) <= 3 + 0.2 * true)


def test_sketch_slices_add_up_to_the_whole_sketch(backend):
    """A sketch swept in slices of its registers (a sweep each, as a device too small for
    the whole sketch does) gives the sums of the whole sketch, both ways, on a graph with
    cycles."""
    g = adversarial("rmat-12")
    idx = gd.build_index(g.src, g.dst, backend=backend)
    k, qi, nc = idx.kernels, idx.query_index(need_reverse=True), idx.n_components
    comp = None if nc == idx.n_vertices else qi.comp
    for dag, order in zip((qi.dag, qi.rev), rc._orders(k, qi.labels.level)):
        whole = rc._sketch_sums(k, dag, order, comp, nc, 8, 1)
        assert (whole[1] < 256).all()  # every component's own vertices set a register
        for slices in (2, 4, 64):
            got = rc._sketch_sums(k, dag, order, comp, nc, 8, slices)
            assert all(np.array_equal(a, b) for a, b in zip(got, whole))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_sketches_that_do_not_fit_the_device_are_sliced_then_take_a_lower_precision():
    """Registers beyond the device's room: the sketches are swept in slices, and past
    ``max_slices`` step down to the precision that fits (its error in ``rel_error``), the
    same numbers as the CPU at that precision; none fits: a MemoryError that says what to
    do."""
    import cupy

    g = adversarial("rmat-12")
    idx = gd.build_index(g.src, g.dst, backend="gpu")
    cpu_idx = gd.build_index(g.src, g.dst, backend="cpu")
    nc = idx.n_components
    free = cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()
    share = nc * 100 / free  # room for 64 + 12 bytes a component, not 128 + 12
    for slices, precision in ((2, 7), (1, 6)):
        tight = rc.CountSettings(sketch_share=share, max_slices=slices)
        assert rc.sketch_plan(idx.kernels, nc, 8, tight) == (precision, 2 if slices == 2 else 1)
        got = rc.reach_counts(idx, "approximate", precision=8, settings=tight)
        assert set(got.column("rel_error").to_pylist()) == {rc.relative_error(precision)}
        assert got.equals(rc.reach_counts(cpu_idx, "approximate", precision=precision))
    with pytest.raises(MemoryError, match="count on the CPU backend"):
        rc.reach_counts(idx, "approximate", settings=rc.CountSettings(sketch_share=1e-12))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_a_breadth_first_step_in_slices_finds_the_same_vertices():
    """The GPU's one-key search expands a large frontier a slice of edges at a time: slices
    of 7 edges give every vertex the hop count of a plain BFS."""
    from grail_duckdb.kernels.gpu import GpuKernels

    g = adversarial("rmat-12")
    idx = gd.build_index(g.src, g.dst, backend="gpu")
    keys = idx.ids.keys.to_numpy()
    k = GpuKernels()
    k.BFS_STEP = 7
    rows = path_graph(idx).fwd
    for v in (0, 5, 17):
        ids, hops = k.bounded_bfs(rows, v, 1 << 30)
        want = hop_distances(g.src, g.dst, g.n, [int(keys[v])])[0]
        got = np.full(g.n, -1)
        got[keys[ids]] = hops
        np.testing.assert_array_equal(got, want)


def test_exact_batches_of_one_word_sweep_from_their_first_member(cpu):
    """Many small batches (one word each) over a graph with cycles give the same counts."""
    g = adversarial("rmat-12")
    idx = gd.build_index(g.src, g.dst, backend="cpu")
    one = rc.reach_counts(idx, "exact", words=1)
    assert one.equals(rc.reach_counts(idx, "exact"))
    at = np.random.default_rng(1).integers(0, idx.n_vertices, 40)
    some = idx.ids.keys.to_numpy()[at]  # the keys are the graph's ids
    d = hop_distances(g.src, g.dst, g.n, some)
    np.testing.assert_array_equal(one.column("reaches").to_numpy()[at], (d >= 0).sum(1) - 1)


def test_empty_graph_and_errors(backend):
    idx = gd.build_index(pa.array([], pa.int64()), pa.array([], pa.int64()), backend=backend)
    assert idx.hops([1, None], [1, 2]).to_pylist() == [0, None]
    assert idx.path([5], [5]).to_pylist() == [[5]]
    assert idx.reaches_within(3, 3, 0) is True and idx.reaches_within(3, 4, 9) is False
    assert idx.reach_counts().num_rows == 0
    assert idx.descendants(7).to_pydict() == {"key": [7], "hops": [0]}
    with pytest.raises(gd.KeyTypeError):
        idx.hops(["a"], ["b"])
    with pytest.raises(ValueError, match="mode"):
        idx.reach_counts("fast")


def test_paths_inside_a_cycle_count_every_edge(backend):
    """Hops inside a strongly connected component are not zero; the path goes around."""
    idx = gd.build_index([1, 2, 3, 4, 4], [2, 3, 4, 1, 5], backend=backend)
    assert idx.hops([1, 4, 2, 5], [4, 3, 1, 1]).to_pylist() == [3, 3, 3, None]
    assert idx.path(2, 5) == [2, 3, 4, 5]
    assert idx.reaches_within([1, 1], [4, 4], [2, 3]).to_pylist() == [False, True]
    assert idx.reach_counts().column("reaches").to_pylist() == [4, 4, 4, 4, 0]


def test_a_loaded_index_with_cycles_needs_its_edges(tmp_path):
    edges = pa.table({"src": [1, 2, 3, 3], "dst": [2, 1, 4, 4]})
    idx = gd.build_index(edges, backend="cpu")
    assert idx.path(1, 2) == [1, 2] and idx.path(3, 4) == [3, 4]
    path = idx.save(tmp_path / "g.grail.parquet")
    loaded = gd.load_index(path, backend="cpu")
    assert loaded.hops(4, 3) is None  # an unreachable pair needs no search, no edges
    with pytest.raises(gd.GrailError, match="attach_edges"):
        loaded.hops(2, 1)
    other = gd.load_index(path, backend="cpu").attach_edges(pa.table({"src": [1, 2, 3],
                                                                      "dst": [2, 1, 4]}))
    with pytest.raises(gd.StaleIndexError):
        other.hops(2, 1)
    assert loaded.attach_edges(edges).hops([2, 1], [1, 1]).to_pylist() == [1, 0]
    dag = gd.load_index(gd.build_index([1, 2], [2, 3], backend="cpu").save(
        tmp_path / "dag.grail.parquet"), backend="cpu")
    assert dag.path(1, 3) == [1, 2, 3]  # an acyclic index reads its own DAG


@functools.lru_cache(maxsize=None)
def _dataset_case(name: str):
    edges = datasets.load_dataset(name)
    keys = workloads.vertex_keys(edges)
    pairs = pa.concat_tables([workloads.random_pairs(keys, 150, seed=3),
                              workloads.reachable_pairs(edges, 150, seed=4)])
    return edges, pairs


@pytest.mark.datasets
@pytest.mark.parametrize("name", ["cit-HepTh", "p2p-Gnutella31", "human", "Wiki-Vote"])
def test_dataset_paths_match_the_oracle(backend, name, datasets_dir):
    if name not in datasets.available():
        pytest.skip(f"{name} is not in {datasets_dir}")
    edges, pairs = _dataset_case(name)
    idx = gd.build_index(edges, backend=backend)
    ids = idx.ids
    s = ids.encode(pairs.column("src"))
    t = ids.encode(pairs.column("dst"))
    src, dst = ids.encode(edges.column("src")), ids.encode(edges.column("dst"))
    targets, where = np.unique(t, return_inverse=True)
    to_t = hop_distances(dst, src, ids.n, targets)  # reversed edges: hops to each target
    want = to_t[where, s]
    got = idx.hops(pairs.column("src"), pairs.column("dst")).to_pylist()
    assert got == [None if w < 0 else int(w) for w in want]
    rank = np.arange(ids.n)
    paths = idx.path(pairs.column("src"), pairs.column("dst")).to_pylist()
    for i in range(0, pairs.num_rows, 7):
        exp = smallest_shortest_path(src, dst, to_t[where[i]], int(s[i]), int(t[i]), rank)
        got_ids = None if paths[i] is None else ids.encode(pa.array(paths[i])).tolist()
        assert got_ids == exp, i
    k = np.where(want >= 0, want, 3) - (np.arange(len(want)) % 2)
    assert idx.reaches_within(pairs.column("src"), pairs.column("dst"), k).to_pylist() == (
        ((want >= 0) & (want <= k)).tolist())
    if backend.name != "cpu":  # every path the CPU's
        cpu = gd.build_index(edges, backend="cpu")
        assert paths == cpu.path(pairs.column("src"), pairs.column("dst")).to_pylist()


@pytest.mark.datasets
def test_dataset_reach_counts_match_the_oracle(datasets_dir):
    if "cit-HepTh" not in datasets.available():
        pytest.skip(f"cit-HepTh is not in {datasets_dir}")
    edges = datasets.load_dataset("cit-HepTh")
    idx = gd.build_index(edges, backend="cpu")
    exact = idx.reach_counts("exact")
    some = np.random.default_rng(0).integers(0, idx.n_vertices, 60)
    src, dst = (idx.ids.encode(edges.column(c)) for c in ("src", "dst"))
    down = (hop_distances(src, dst, idx.n_vertices, some) >= 0).sum(1) - 1
    up = (hop_distances(dst, src, idx.n_vertices, some) >= 0).sum(1) - 1
    np.testing.assert_array_equal(exact.column("reaches").to_numpy()[some], down)
    np.testing.assert_array_equal(exact.column("reached_by").to_numpy()[some], up)
    approx = idx.reach_counts("approximate")
    bound = 3 * rc.relative_error(rc.DEFAULT_PRECISION)
    for col in ("reaches", "reached_by"):
        true = exact.column(col).to_numpy() + 1
        est = approx.column(col).to_numpy() + 1
        big = true >= 100
        within = np.abs(est[big] - true[big]) <= bound * true[big]
        assert within.mean() >= 0.99, col
