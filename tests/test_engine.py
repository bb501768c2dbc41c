"""The engine's contract on every backend present (the ``backend`` fixture): NULLs, unknown
keys, self pairs, empty edge tables, self-loops and duplicates, DuckDB relations with sparse
and negative keys, reproducible labels and the GRAIL invariants; and the errors that bad input
gets. The whole pipeline against the oracle on generated graphs is ``tests/test_pipeline.py``."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import grail_duckdb as gd
from grail_duckdb.kernels import to_host
from harness import all_pairs


def test_labels_are_reproducible_and_seed_dependent(backend):
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 500, 3000), rng.integers(0, 500, 3000)
    src, dst = np.minimum(src, dst), np.maximum(src, dst)
    a = gd.build_index(src, dst, labels=4, seed=11, backend=backend)
    b = gd.build_index(src[::-1], dst[::-1], labels=4, seed=11, backend=backend)
    c = gd.build_index(src, dst, labels=4, seed=12, backend=backend)
    np.testing.assert_array_equal(to_host(a.labels.inner), to_host(b.labels.inner))
    np.testing.assert_array_equal(to_host(a.labels.outer), to_host(b.labels.outer))
    assert not np.array_equal(to_host(a.labels.inner), to_host(c.labels.inner))
    assert a.fingerprint == b.fingerprint  # row order does not matter


def test_grail_interval_invariant_holds_on_every_dag_edge(backend):
    """For every condensed edge u -> v: [inner(v), outer(v)] inside [inner(u), outer(u)] and
    level(u) < level(v); the tree interval of a vertex holds exactly its tree descendants."""
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 2000, 8000), rng.integers(0, 2000, 8000)
    idx = gd.build_index(src, dst, labels=5, backend=backend)
    lab = {name: to_host(a) for name, a in idx.labels.arrays().items()}
    ptr, v = to_host(idx.dag.indptr), to_host(idx.dag.indices)
    u = np.repeat(np.arange(idx.dag.n), np.diff(ptr))
    assert np.all(lab["level"][u] < lab["level"][v])
    assert np.all(lab["inner"][u] <= lab["inner"][v])
    assert np.all(lab["outer"][u] >= lab["outer"][v])
    assert sorted(lab["tree"][:, 1].tolist()) == list(range(1, idx.dag.n + 1))


def test_nulls_unknown_keys_and_self_pairs_follow_the_contract(backend):
    idx = gd.build_index([1, 2, 3], [2, 3, 1], backend=backend)  # a 3-cycle
    got = idx.reaches(pa.array([1, None, 1, 9, 9, 3, None]), pa.array([3, 1, None, 9, 1, 2, None]))
    assert got.to_pylist() == [True, None, None, True, False, True, None]
    assert idx.last_stats.null == 3 and idx.last_stats.same_key == 1
    idx = gd.build_index([1, 2, 3, 4], [2, 3, 1, 5], backend=backend)  # a 3-cycle and a tail
    got = idx.reaches(pa.array([1, None, 9, 1, 4, 5, 3, 1]), pa.array([3, 2, 9, 8, 5, 4, 2, 5]))
    assert got.to_pylist() == [True, None, True, False, True, False, True, False]


def test_empty_edge_table_answers_by_the_contract(backend):
    idx = gd.build_index(pa.array([], pa.int64()), pa.array([], pa.int64()), backend=backend)
    assert idx.n_vertices == 0
    assert idx.reaches([1, 1, None], [1, 2, 2]).to_pylist() == [True, False, None]


def test_self_loops_and_duplicates_change_no_answer(backend):
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4])
    plain = gd.build_index(src, dst, backend=backend)
    noisy = gd.build_index(np.r_[src, src, [2, 2, 4]], np.r_[dst, dst, [2, 2, 4]],
                           backend=backend)
    qs, qd = all_pairs(5)
    assert plain.reaches(qs, qd).equals(noisy.reaches(qs, qd))


def test_null_endpoint_is_an_error_that_counts_rows(backend):
    with pytest.raises(gd.EdgeInputError, match="2 edge rows have a NULL endpoint"):
        gd.build_index(pa.array([1, None, 3]), pa.array([None, 2, 4]), backend=backend)


def test_mismatched_key_types_are_errors(backend):
    with pytest.raises(gd.EdgeInputError, match="different types"):
        gd.build_index(pa.array([1, 2]), pa.array(["a", "b"]), backend=backend)
    idx = gd.build_index([1, 2], [2, 3], backend=backend)
    with pytest.raises(gd.KeyTypeError, match="integer vertex keys"):
        idx.reaches(pa.array(["1"]), pa.array(["2"]))


def test_missing_column_is_named(backend):
    table = pa.table({"citing": [1], "cited": [2]})
    with pytest.raises(gd.EdgeInputError, match="no column 'src'"):
        gd.build_index(table, backend=backend)
    idx = gd.build_index(table, src="citing", dst="cited", backend=backend)
    assert idx.reaches([1], [2]).to_pylist() == [True]


def test_duckdb_relation_and_sparse_and_negative_keys(backend):
    import duckdb

    con = duckdb.connect()
    rel = con.sql("SELECT * FROM (VALUES (-5, 10000000000), (10000000000, 7), (7, -5), (8, 9)) t(src, dst)")
    idx = gd.build_index(rel, backend=backend)
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
