"""The whole pipeline on every backend present, with one test body each: ``build_index`` then
``reaches_with_stats`` (cuts on and off) against the oracle (a plain DFS per pair over the
original edges, ``tests/oracle.py``), on hypothesis graphs of every shape and key type and on
the adversarial graphs of ``tests/strategies.py``. Every GPU configuration must also build
exactly the CPU backend's index (components, DAG, every label array, fingerprint) and give
its answers and cut statistics."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.kernels import to_host
from harness import all_pairs, assert_same_index, check_answers, expected
from strategies import (ADVERSARIAL, CUT_DEFEATING_PAIRS, KEY_KINDS, Graph, adversarial,
                        graphs, keys_of)

def build(g: Graph, backend, kind="int", **kw):
    """The index of ``g`` on ``backend``; the GPU's label pairs on every backend unless ``kw``
    names them (the backends' defaults differ, and these tests compare the labels)."""
    kw.setdefault("labels", gd.DEFAULT_LABELS["gpu"])
    return gd.build_index(keys_of(g.src, kind), keys_of(g.dst, kind), backend=backend, **kw)


@settings(max_examples=150)
@given(g=graphs(), d=st.integers(1, 6), seed=st.integers(0, 2**31 - 1),
       kind=st.sampled_from(KEY_KINDS), words=st.sampled_from([None, 2]))
def test_every_pair_matches_the_oracle(backend, g, d, seed, kind, words):
    idx = build(g, backend, kind, labels=d, seed=seed)
    cpu = idx if backend.name == "cpu" else build(g, "cpu", kind, labels=d, seed=seed)
    assert_same_index(cpu, idx)
    qs, qd = all_pairs(g.n)
    check_answers(idx, keys_of(qs, kind), keys_of(qd, kind), expected(g, qs, qd), cpu, words)


@settings(max_examples=40)
@given(g=graphs(max_n=25, max_m=60), d=st.integers(1, 4))
def test_string_keys_answer_like_integer_keys(backend, g, d):
    qs, qd = all_pairs(g.n)
    answers = [build(g, backend, kind, labels=d).reaches(keys_of(qs, kind), keys_of(qd, kind))
               for kind in KEY_KINDS]
    assert answers[0].equals(answers[1]) and answers[0].equals(answers[2])


def _queries(g: Graph, count=5000, seed=0):
    """Random pairs (a few unknown ids), edges, two-edge paths and the cut-defeating pairs."""
    rng = np.random.default_rng(seed)
    qs = [rng.integers(0, g.n + 2, count), CUT_DEFEATING_PAIRS[0]]
    qd = [rng.integers(0, g.n + 2, count), CUT_DEFEATING_PAIRS[1]]
    if g.m:
        e = rng.integers(0, g.m, count)
        order = np.argsort(g.src, kind="stable")
        row = np.minimum(np.searchsorted(g.src[order], g.dst[e]), g.m - 1)
        has_next = g.src[order][row] == g.dst[e]
        qs += [g.src[e], g.src[e]]
        qd += [g.dst[e], np.where(has_next, g.dst[order][row], g.dst[e])]
    return np.concatenate(qs), np.concatenate(qd)


@pytest.mark.parametrize("graph", list(ADVERSARIAL))
def test_adversarial_graph_matches_the_oracle_and_the_cpu(backend, graph):
    g = adversarial(graph)
    idx = build(g, backend)
    cpu = idx if backend.name == "cpu" else build(g, "cpu")
    assert_same_index(cpu, idx)
    if graph.startswith("rmat"):  # one giant strongly connected component
        assert np.bincount(cpu.comp).max() > cpu.n_vertices // 10
    qs, qd = _queries(g)
    check_answers(idx, qs, qd, expected(g, qs, qd), cpu)


def test_hub_sets_are_made_only_where_they_can_settle_pairs(backend):
    """A forest (every vertex one child at most: one spanning tree is the DAG) gets no hub
    bits, a shallow DAG the global hubs without window hubs, a DAG deeper than a window both;
    each answers as the oracle says."""
    n, rng = 700, np.random.default_rng(4)
    a, b = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    keep = a != b
    chain = np.arange(n - 2)
    graphs = {"forest": Graph(n, np.arange(1, n), np.arange(1, n) // 2),
              "shallow": Graph(n, np.minimum(a, b)[keep], np.maximum(a, b)[keep]),
              "deep": Graph(n, np.concatenate([chain, chain]),
                            np.concatenate([chain + 1, chain + 2]))}
    qs, qd = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    for name, g in graphs.items():
        idx = build(g, backend)
        lab = idx.labels
        hubs = bool(to_host(lab.hub_down).any() or to_host(lab.hub_up).any())
        assert hubs == (name != "forest"), name
        assert (lab.win_down is not None) == (name == "deep"), name
        check_answers(idx, qs, qd, expected(g, qs, qd))


def test_pairs_that_pass_every_cut_are_searched(backend):
    g = adversarial("cut-defeating")
    idx = build(g, backend, labels=5)  # the labels its sinks are counted for (strategies.py)
    qs, qd, want = CUT_DEFEATING_PAIRS
    got, stats = idx.reaches_with_stats(qs, qd)
    assert got.to_pylist() == want.tolist()
    assert stats.searched == 2 and stats.search_reachable == 1


def test_small_calls_are_classified_on_the_host_with_the_same_answers(backend):
    """Below ``GpuSettings.host_below`` a GPU index classifies a call on the host, from a copy
    of its labels (made once, without the DAG), and searches what the cuts leave on the
    device; above, everything runs on the device; the answers are the oracle's either way."""
    if backend.name == "gpu":
        from dataclasses import replace

        from grail_duckdb.kernels.gpu import GpuKernels

        backend = GpuKernels(replace(backend.settings, host_below=1000))
    g = adversarial("rmat-12")
    idx = build(g, backend)
    rng = np.random.default_rng(2)
    for count in (999, 1000, 5000, 1):
        qs, qd = rng.integers(0, g.n + 2, count), rng.integers(0, g.n + 2, count)
        got, stats = idx.reaches_with_stats(qs, qd)
        np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), expected(g, qs, qd))
        assert stats.searched == stats.bounded_search + stats.deep_search
    on_gpu = backend.name != "cpu"
    assert (idx._host_labels is not None) == on_gpu  # made by the small calls, on a GPU only
    if on_gpu:
        host = idx.host_labels()
        assert host is idx.host_labels() and host.dag.m == 0
        assert isinstance(host.labels.level, np.ndarray) and host.labels.record is None
        np.testing.assert_array_equal(host.labels.inner, to_host(idx.labels.inner))
        assert idx.classifier(999)[0].name == "cpu" and idx.classifier(1000)[0] is backend
    copy = idx.host_copy()
    assert copy.backend == "cpu" and idx.host_copy() is copy and (copy is idx) != on_gpu
    if on_gpu:
        assert_same_index(copy, idx)


@pytest.mark.parametrize("graph", ["cut-defeating", "rmat-12", "chain-5000"])
def test_chunks_answer_like_whole_calls(backend, graph):
    """The per-chunk path (``answer_chunk``: one fused pass, then the exact search of what is
    left) gives the oracle's answers; a GPU index classifies a chunk on the host (the
    shipped ``host_below``) and searches on the device the pairs the cuts leave."""
    from grail_duckdb.engine.queries import answer_chunk

    if backend.name == "gpu":
        from dataclasses import replace

        from grail_duckdb.kernels.gpu import GpuKernels

        backend = GpuKernels(replace(backend.settings, host_below=32_768))
    g = adversarial(graph)
    idx = build(g, backend, labels=5)
    rng = np.random.default_rng(4)
    for count in (1, 700, 2048):
        qs, qd = rng.integers(0, g.n + 2, count), rng.integers(0, g.n + 2, count)
        if graph == "cut-defeating":
            qs, qd = np.r_[CUT_DEFEATING_PAIRS[0], qs], np.r_[CUT_DEFEATING_PAIRS[1], qd]
        want = expected(g, qs, qd)
        sliced = [pa.chunked_array([pa.array(np.r_[7, q]).slice(1)]) for q in (qs, qd)]
        for a, b in ((qs, qd), sliced):  # NumPy, and DuckDB's layout (read as it is)
            np.testing.assert_array_equal(
                answer_chunk(idx, a, b).to_numpy(zero_copy_only=False), want)
    if graph == "cut-defeating":
        _, stats = idx.reaches_with_stats(*CUT_DEFEATING_PAIRS[:2])
        assert stats.searched == 2


def test_indices_move_between_backends_and_through_a_file(backend, tmp_path):
    g = adversarial("degree-thresholds-cyclic")
    cpu = build(g, "cpu")
    here = build(g, backend)
    path = here.save(tmp_path / "g.grail.parquet")
    moved = (cpu.to_backend(backend), here.to_backend("cpu"),
             gd.load_index(path, backend=backend), gd.load_index(path, backend="cpu"))
    qs, qd = _queries(g, 3000, seed=4)
    want = cpu.reaches(qs, qd)
    for idx in moved:
        assert_same_index(cpu, idx)
        assert idx.reaches(qs, qd).equals(want)
    assert moved[0].backend == moved[2].backend == backend.name
