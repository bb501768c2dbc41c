"""The GPU backend gives exactly the CPU backend's index and answers (skipped without a GPU).

Every test builds the same edges on both backends and compares the components, the condensed
DAG, the labels themselves and the answers of query columns; small graphs are also checked
against a plain BFS oracle (``tests/oracle.py``).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb import kernels as _backend
from grail_duckdb.kernels import to_host
from oracle import bfs_pairs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _backend.gpu_available(), reason="no CUDA device visible to CuPy"),
]


@pytest.fixture(autouse=True)
def queries_on_the_device(monkeypatch):
    """Every query call runs the GPU kernels, however small (by default a GPU index answers
    calls below ``GPU_MIN_QUERIES`` from its host copy)."""
    monkeypatch.setattr("grail_duckdb.engine.index.GPU_MIN_QUERIES", 0)


def test_small_calls_use_the_host_copy_with_the_same_answers(monkeypatch):
    from grail_duckdb.engine import index as index_module

    monkeypatch.setattr(index_module, "GPU_MIN_QUERIES", 1000)
    cpu, gpu = build_both(*_pairs(500, 3000, 1))
    qs, qt = _pairs(500, 999, 2)
    assert gpu.reaches(qs, qt).to_pylist() == cpu.reaches(qs, qt).to_pylist()
    assert gpu._host_copy is not None and gpu._host_copy.backend == "cpu"


def build_both(src, dst=None, **kw):
    """The CPU and the GPU index of one edge list."""
    return (gd.build_index(src, dst, backend="cpu", **kw),
            gd.build_index(src, dst, backend="gpu", **kw))


def assert_same_index(cpu, gpu):
    """Components, condensed DAG, labels and fingerprint are identical on both backends."""
    assert gpu.backend == "gpu" and cpu.backend == "cpu"
    assert gpu.n_components == cpu.n_components
    np.testing.assert_array_equal(to_host(gpu.comp), cpu.comp)
    np.testing.assert_array_equal(to_host(gpu.dag.indptr), cpu.dag.indptr)
    np.testing.assert_array_equal(to_host(gpu.dag.indices), cpu.dag.indices)
    for name, arr in cpu.labels.arrays().items():
        np.testing.assert_array_equal(to_host(gpu.labels.arrays()[name]), arr, err_msg=name)
    assert gpu.fingerprint == cpu.fingerprint


def assert_same_answers(cpu, gpu, qs, qt, oracle=None):
    """Answers (with and without the cuts) and cut statistics agree; and with an oracle."""
    a_cpu, s_cpu = cpu.reaches_with_stats(qs, qt)
    a_gpu, s_gpu = gpu.reaches_with_stats(qs, qt)
    assert a_gpu.to_pylist() == a_cpu.to_pylist()
    assert s_gpu.as_dict() == s_cpu.as_dict()
    plain, _ = gpu.reaches_with_stats(qs, qt, use_cuts=False)
    assert plain.to_pylist() == a_cpu.to_pylist()
    if oracle is not None:
        assert a_gpu.to_pylist() == list(oracle)


def _pairs(n, count, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, count), rng.integers(0, n, count)


@st.composite
def graphs(draw):
    """Small directed graphs with cycles, self-loops, duplicate edges and isolated vertices."""
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 120))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    return n, src, dst


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(1, 4), st.integers(0, 3), st.booleans())
def test_hypothesis_graphs_match_cpu_and_oracle(g, d, seed, strings):
    n, src, dst = g
    isolated = list(range(n))  # every vertex exists, some without edges
    s = src + isolated
    t = dst + isolated  # self-loops: never change an answer
    keys = (lambda xs: [f"v{x}" for x in xs]) if strings else (lambda xs: list(xs))
    cpu, gpu = build_both(keys(s), keys(t), labels=d, seed=seed)
    assert_same_index(cpu, gpu)
    qs, qt = _pairs(n + 2, 300, seed)  # n and n+1 are not vertices
    ids_cpu = cpu.ids
    want = []
    for u, v in zip(qs, qt):
        if u == v:
            want.append(True)
        elif u >= n or v >= n:
            want.append(False)
        else:
            want.append(None)
    known = [i for i, w in enumerate(want) if w is None]
    ku = ids_cpu.encode(pa.array(keys(qs[known].tolist())))
    kv = ids_cpu.encode(pa.array(keys(qt[known].tolist())))
    sid = ids_cpu.encode(pa.array(keys(src))) if src else np.empty(0, np.int32)
    did = ids_cpu.encode(pa.array(keys(dst))) if dst else np.empty(0, np.int32)
    got = bfs_pairs(sid, did, ids_cpu.n, ku, kv)
    for i, r in zip(known, got):
        want[i] = bool(r)
    assert_same_answers(cpu, gpu, keys(qs.tolist()), keys(qt.tolist()), want)


def test_nulls_and_unknown_keys():
    cpu, gpu = build_both([1, 2, 3, 4], [2, 3, 1, 5])
    qs = pa.array([1, None, 9, 1, 4, 5, 3, 1], pa.int64())
    qt = pa.array([3, 2, 9, 8, 5, 4, 2, 5], pa.int64())
    want = [True, None, True, False, True, False, True, False]
    assert gpu.reaches(qs, qt).to_pylist() == want
    assert_same_answers(cpu, gpu, qs, qt)


def _rmat_edges(scale, factor, seed):
    """A small directed R-MAT graph (a=0.57, b=c=0.19): skewed degrees, one giant SCC."""
    rng = np.random.default_rng(seed)
    m = factor << scale
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    for bit in range(scale):
        r = rng.random(m)
        down = r >= 0.57 + 0.19  # quadrants c, d: source bit set
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)  # quadrants b, d: target bit set
        src |= down.astype(np.int64) << bit
        dst |= right.astype(np.int64) << bit
    return src, dst


@pytest.mark.parametrize("scale", [10, 14])
@pytest.mark.parametrize("balance", ["binned", "edges"])
def test_giant_scc_rmat(scale, balance):
    from grail_duckdb.kernels.gpu import GpuKernels, GpuSettings

    tuned = GpuKernels(GpuSettings(balance=balance, search_balance=balance))
    src, dst = _rmat_edges(scale, 8, seed=scale)
    cpu = gd.build_index(src, dst, backend="cpu")
    gpu = gd.build_index(src, dst, backend=tuned)
    assert cpu.n_components < cpu.n_vertices  # there is a non-trivial component
    sizes = np.bincount(cpu.comp)
    assert sizes.max() > cpu.n_vertices // 10  # and a giant one
    assert_same_index(cpu, gpu)
    qs, qt = _pairs(1 << scale, 5000, scale)
    keys = cpu.ids.keys.to_numpy()
    assert_same_answers(cpu, gpu, keys[qs % keys.shape[0]], keys[qt % keys.shape[0]])


def test_deep_dag_and_many_passes():
    """A long chain with shortcuts: thousands of levels; more queries than one pass holds."""
    n = 5000
    rng = np.random.default_rng(7)
    src = np.concatenate([np.arange(n - 1), rng.integers(0, n - 50, 3000)])
    dst = np.concatenate([np.arange(1, n), src[n - 1:] + rng.integers(2, 50, 3000)])
    cpu, gpu = build_both(src[::-1].copy(), dst[::-1].copy())
    assert_same_index(cpu, gpu)
    qs, qt = _pairs(n, 20000, 1)
    assert_same_answers(cpu, gpu, qs, qt)


def _dataset_names():
    from grail_duckdb.tools import datasets

    return list(datasets.DATASETS)


@pytest.mark.parametrize("name", _dataset_names())
def test_datasets_match_cpu(name, datasets_dir):
    from grail_duckdb.tools import datasets

    if not datasets.DATASETS[name].file(datasets_dir).is_file():
        pytest.skip(f"{name} is not in {datasets_dir}")
    edges = datasets.load_dataset(name)
    cpu, gpu = build_both(edges)
    assert_same_index(cpu, gpu)
    keys = cpu.ids.keys.to_numpy()
    qs, qt = _pairs(keys.shape[0], 20000, 3)
    assert_same_answers(cpu, gpu, keys[qs], keys[qt])
    # reachable pairs: sources and their out-neighbours' out-neighbours
    s = edges.column("src").to_numpy()
    d = edges.column("dst").to_numpy()
    pick = np.random.default_rng(5).integers(0, s.shape[0], min(20000, s.shape[0]))
    assert_same_answers(cpu, gpu, s[pick], d[pick])


def test_to_backend_round_trip():
    src, dst = _rmat_edges(9, 4, seed=1)
    cpu = gd.build_index(src, dst, backend="cpu")
    moved = cpu.to_backend("gpu")
    qs, qt = _pairs(int(max(src.max(), dst.max())) + 1, 3000, 2)
    assert moved.reaches(qs, qt).to_pylist() == cpu.reaches(qs, qt).to_pylist()


def test_out_of_memory_is_a_backend_error():
    from grail_duckdb.kernels.gpu import GpuKernels
    import cupy as cp

    k = _backend.kernels_for("gpu")
    assert isinstance(k, GpuKernels)
    free, _ = cp.cuda.runtime.memGetInfo()
    huge = cp.zeros(1, cp.int32)
    with pytest.raises(gd.BackendError, match="bytes"):
        k.csr(huge, huge, int(free))  # an indptr of the whole free memory in int64
