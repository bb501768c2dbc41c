"""The whole pipeline on every backend present, with one test body each: ``build_index`` then
``reaches_with_stats`` (cuts on and off) against the oracle (a plain DFS per pair over the
original edges, ``tests/oracle.py``), on hypothesis graphs of every shape and key type and on
the adversarial graphs of ``tests/strategies.py``. Every GPU configuration must also build
exactly the CPU backend's index (components, DAG, every label array, fingerprint) and give
its answers and cut statistics."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from harness import all_pairs, assert_same_index, check_answers, expected
from strategies import (ADVERSARIAL, CUT_DEFEATING_PAIRS, KEY_KINDS, Graph, adversarial,
                        graphs, keys_of)

def build(g: Graph, backend, kind="int", **kw):
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


def test_pairs_that_pass_every_cut_are_searched(backend):
    g = adversarial("cut-defeating")
    idx = build(g, backend, labels=5)  # the labels its sinks are counted for (strategies.py)
    qs, qd, want = CUT_DEFEATING_PAIRS
    got, stats = idx.reaches_with_stats(qs, qd)
    assert got.to_pylist() == want.tolist()
    assert stats.searched == 2 and stats.search_reachable == 1


def test_small_calls_use_the_host_copy_with_the_same_answers(backend):
    """Below ``GpuSettings.host_below`` a GPU index answers from its CPU copy (made once);
    above, on the device; the answers are the oracle's either way."""
    if backend.name == "gpu":
        from dataclasses import replace

        from grail_duckdb.kernels.gpu import GpuKernels

        backend = GpuKernels(replace(backend.settings, host_below=1000))
    g = adversarial("rmat-12")
    idx = build(g, backend)
    rng = np.random.default_rng(2)
    for count in (999, 1000, 5000, 1):
        qs, qd = rng.integers(0, g.n + 2, count), rng.integers(0, g.n + 2, count)
        np.testing.assert_array_equal(idx.reaches(qs, qd).to_numpy(zero_copy_only=False),
                                      expected(g, qs, qd))
    on_gpu = backend.name != "cpu"
    assert (idx._host_copy is not None) == on_gpu  # made by the small calls, on a GPU only
    copy = idx.host_copy()
    assert copy.backend == "cpu" and idx.host_copy() is copy and (copy is idx) != on_gpu
    if on_gpu:
        assert idx._host_copy is copy
        assert_same_index(copy, idx)


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
