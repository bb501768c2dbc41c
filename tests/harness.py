"""What the pipeline tests share: the contract's answers from the oracle, and the comparisons of
a whole index and of its answers between backends.

* :func:`expected`: the answers the contract demands for query ids over a
  :class:`~strategies.Graph` (a plain DFS per pair, ``tests/oracle.py``);
* :func:`assert_same_index`: two indices are equal bit for bit (components, condensed DAG,
  every label array, fingerprint): every GPU configuration must build the CPU index;
* :func:`check_answers`: answers with the cuts and without equal the expected ones, every query
  is counted once in the statistics, and another backend's statistics equal the CPU's;
* :func:`child_env`: the environment of a child Python that imports this checkout.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from grail_duckdb.kernels import to_host
from oracle import reaches_by_dfs
from strategies import Graph


ROOT = Path(__file__).resolve().parents[1]


def child_env(base: dict | None = None, **extra: str) -> dict:
    """``base`` (the process's environment by default) with ``extra`` and this checkout first
    on ``PYTHONPATH``, keeping what was there (where the dependencies may live)."""
    env = dict(os.environ if base is None else base, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def expected(g: Graph, qs, qd) -> np.ndarray:
    """The contract's answers for query ids (ids without an edge are keys that are not
    vertices: false, but each reaches itself)."""
    qs, qd = np.asarray(qs, np.int64), np.asarray(qd, np.int64)
    vertex = np.zeros(max(g.n, int(qs.max(initial=0)), int(qd.max(initial=0))) + 1, bool)
    vertex[g.src] = True
    vertex[g.dst] = True
    known = vertex[qs] & vertex[qd]
    want = qs == qd
    want[known] |= reaches_by_dfs(g.src, g.dst, max(g.n, 1), qs[known], qd[known])
    return want


def all_pairs(n: int, extra: int = 3):
    """Every ordered pair over the ids 0..n-1 and ``extra`` ids that are not vertices."""
    ids = np.arange(n + extra)
    qs, qd = np.meshgrid(ids, ids, indexing="ij")
    return qs.ravel(), qd.ravel()


def assert_same_index(cpu, other):
    """Components, condensed DAG, every label array and the fingerprint, bit for bit."""
    assert other.n_components == cpu.n_components
    np.testing.assert_array_equal(to_host(other.comp), cpu.comp, err_msg="components")
    np.testing.assert_array_equal(to_host(other.dag.indptr), cpu.dag.indptr, err_msg="DAG")
    np.testing.assert_array_equal(to_host(other.dag.indices), cpu.dag.indices, err_msg="DAG")
    for name, arr in cpu.labels.arrays().items():
        got = to_host(other.labels.arrays()[name])
        assert got.dtype == arr.dtype, name
        np.testing.assert_array_equal(got, arr, err_msg=name)
    assert other.fingerprint == cpu.fingerprint


def check_answers(idx, src, dst, want, cpu=None, words=None):
    """``idx`` answers the key columns ``src``, ``dst`` with ``want``, with the cuts and
    without; every query is settled once; another index ``cpu`` has the same statistics."""
    for cuts in (True, False):
        got, stats = idx.reaches_with_stats(src, dst, use_cuts=cuts, words=words)
        assert got.null_count == 0
        np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), want,
                                      err_msg=f"use_cuts={cuts}")
        settled = (stats.same_key + stats.unknown_vertex + stats.same_component
                   + stats.level_cut + stats.label_cut + stats.tree_cut + stats.hub_cut
                   + stats.searched)
        assert settled == stats.queries == len(want)
        if cpu is not None and cpu is not idx:
            assert stats == cpu.reaches_with_stats(src, dst, use_cuts=cuts, words=words)[1]
