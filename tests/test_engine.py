"""The engine against an independent oracle (a plain DFS per pair over the original edges) on
hypothesis-generated graphs: cycles, self-loops, duplicate edges, isolated and unknown
vertices, string keys, empty graphs; several label counts and seeds; cuts on and off."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import grail_duckdb as gd
from oracle import reaches_by_dfs


@st.composite
def graphs(draw, max_n=40, max_m=120):
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(0, max_m))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    shape = draw(st.sampled_from(["any", "dag", "cycle+tail"]))
    if shape == "dag":
        src, dst = [min(a, b) for a, b in zip(src, dst)], [max(a, b) for a, b in zip(src, dst)]
    elif shape == "cycle+tail" and n > 2:
        k = draw(st.integers(2, n))
        src += list(range(k))
        dst += [(i + 1) % k for i in range(k)]
    return n, np.array(src, np.int64), np.array(dst, np.int64)


def all_pairs(n, extra=3):
    """Every ordered pair over the vertex ids plus a few ids that are not vertices."""
    ids = np.arange(n + extra)
    qs, qd = np.meshgrid(ids, ids, indexing="ij")
    return qs.ravel(), qd.ravel()


def expected(n, src, dst, qs, qd):
    verts = np.zeros(n + 8, bool)
    verts[src] = True
    verts[dst] = True
    known = verts[qs] & verts[qd]
    ans = np.zeros(qs.shape[0], bool)
    ans[known] = reaches_by_dfs(src, dst, n, qs[known], qd[known])
    ans |= qs == qd  # x reaches x, also for keys that are not vertices
    return ans


@settings(max_examples=120, deadline=None)
@given(graphs(), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_every_pair_matches_the_oracle(graph, d, seed):
    n, src, dst = graph
    idx = gd.build_index(src, dst, labels=d, seed=seed, backend="cpu")
    qs, qd = all_pairs(n)
    want = expected(n, src, dst, qs, qd)
    for cuts in (True, False):
        got, stats = idx.reaches_with_stats(qs, qd, use_cuts=cuts)
        assert got.null_count == 0
        np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), want)
        settled = (stats.same_key + stats.unknown_vertex + stats.same_component
                   + stats.level_cut + stats.label_cut + stats.tree_cut + stats.hub_cut
                   + stats.searched)
        assert settled == stats.queries == qs.shape[0]


@settings(max_examples=40, deadline=None)
@given(graphs(max_n=25, max_m=60), st.integers(1, 4))
def test_string_keys_answer_like_integer_keys(graph, d):
    n, src, dst = graph
    name = np.vectorize(lambda i: f"paper-{i:03d}", otypes=[object])
    idx_s = gd.build_index(pa.array(name(src).tolist(), pa.string()),
                           pa.array(name(dst).tolist(), pa.string()), labels=d, backend="cpu")
    idx_i = gd.build_index(src, dst, labels=d, backend="cpu")
    qs, qd = all_pairs(n)
    got_s = idx_s.reaches(pa.array(name(qs).tolist()), pa.array(name(qd).tolist()))
    assert got_s.equals(idx_i.reaches(qs, qd))


def test_labels_are_reproducible_and_seed_dependent():
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 500, 3000), rng.integers(0, 500, 3000)
    src, dst = np.minimum(src, dst), np.maximum(src, dst)
    a = gd.build_index(src, dst, labels=4, seed=11, backend="cpu")
    b = gd.build_index(src[::-1], dst[::-1], labels=4, seed=11, backend="cpu")
    c = gd.build_index(src, dst, labels=4, seed=12, backend="cpu")
    np.testing.assert_array_equal(a.labels.inner, b.labels.inner)
    np.testing.assert_array_equal(a.labels.outer, b.labels.outer)
    assert not np.array_equal(a.labels.inner, c.labels.inner)
    assert a.fingerprint == b.fingerprint  # row order does not matter


def test_grail_interval_invariant_holds_on_every_dag_edge():
    """For every condensed edge u -> v: [inner(v), outer(v)] inside [inner(u), outer(u)] and
    level(u) < level(v); the tree interval of a vertex holds exactly its tree descendants."""
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 2000, 8000), rng.integers(0, 2000, 8000)
    idx = gd.build_index(src, dst, labels=5, backend="cpu")
    lab, dag = idx.labels, idx.dag
    u = np.repeat(np.arange(dag.n), np.diff(dag.indptr))
    v = dag.indices
    assert np.all(lab.level[u] < lab.level[v])
    assert np.all(lab.inner[u] <= lab.inner[v]) and np.all(lab.outer[u] >= lab.outer[v])
    assert sorted(lab.tree_post.tolist()) == list(range(1, dag.n + 1))


def test_nulls_unknown_keys_and_self_pairs_follow_the_contract():
    idx = gd.build_index([1, 2, 3], [2, 3, 1], backend="cpu")  # a 3-cycle
    got = idx.reaches(pa.array([1, None, 1, 9, 9, 3, None]), pa.array([3, 1, None, 9, 1, 2, None]))
    assert got.to_pylist() == [True, None, None, True, False, True, None]
    assert idx.last_stats.null == 3 and idx.last_stats.same_key == 1


def test_empty_edge_table_answers_by_the_contract():
    idx = gd.build_index(pa.array([], pa.int64()), pa.array([], pa.int64()), backend="cpu")
    assert idx.n_vertices == 0
    assert idx.reaches([1, 1, None], [1, 2, 2]).to_pylist() == [True, False, None]


def test_self_loops_and_duplicates_change_no_answer():
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4])
    plain = gd.build_index(src, dst, backend="cpu")
    noisy = gd.build_index(np.r_[src, src, [2, 2, 4]], np.r_[dst, dst, [2, 2, 4]], backend="cpu")
    qs, qd = all_pairs(5)
    assert plain.reaches(qs, qd).equals(noisy.reaches(qs, qd))


def test_null_endpoint_is_an_error_that_counts_rows():
    with pytest.raises(gd.EdgeInputError, match="2 edge rows have a NULL endpoint"):
        gd.build_index(pa.array([1, None, 3]), pa.array([None, 2, 4]), backend="cpu")


def test_mismatched_key_types_are_errors():
    with pytest.raises(gd.EdgeInputError, match="different types"):
        gd.build_index(pa.array([1, 2]), pa.array(["a", "b"]), backend="cpu")
    idx = gd.build_index([1, 2], [2, 3], backend="cpu")
    with pytest.raises(gd.KeyTypeError, match="integer vertex keys"):
        idx.reaches(pa.array(["1"]), pa.array(["2"]))


def test_missing_column_is_named():
    table = pa.table({"citing": [1], "cited": [2]})
    with pytest.raises(gd.EdgeInputError, match="no column 'src'"):
        gd.build_index(table, backend="cpu")
    idx = gd.build_index(table, src="citing", dst="cited", backend="cpu")
    assert idx.reaches([1], [2]).to_pylist() == [True]


def test_duckdb_relation_and_sparse_and_negative_keys():
    import duckdb

    con = duckdb.connect()
    rel = con.sql("SELECT * FROM (VALUES (-5, 10000000000), (10000000000, 7), (7, -5), (8, 9)) t(src, dst)")
    idx = gd.build_index(rel, backend="cpu")
    assert idx.n_components == 3
    got = idx.reaches([-5, 7, 8, 9, 10000000000], [7, 10000000000, 9, 8, -5]).to_pylist()
    assert got == [True, True, True, False, True]


def test_backend_gpu_without_device_is_a_clear_error(monkeypatch):
    from grail_duckdb import kernels as backend

    if backend.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(gd.BackendError, match="no CUDA device"):
        gd.build_index([1], [2], backend="gpu")
    monkeypatch.setenv("GRAIL_DUCKDB_BACKEND", "nonsense")
    with pytest.raises(gd.BackendError, match="unknown backend"):
        gd.build_index([1], [2])
