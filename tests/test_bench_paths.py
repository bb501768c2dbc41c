"""The paths bench's check of the approximate counts over hash draws (``--hash-draws``).

The draws relabel the vertices and count again; each estimate must be compared with the exact
count of the same vertex. Counting exactly in every draw makes every error zero exactly when
the relabelling is undone right.
"""
from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pytest

from benchmarks import paths
from grail_duckdb.engine.index import GrailIndex

pytestmark = pytest.mark.slow  # a bench's check: with the long runs


def test_hash_draws_compare_each_vertex_with_its_own_exact_counts(monkeypatch):
    n = 1_500  # a chain: counts up to n - 1, past 2.5 * 2**8 where the check applies
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.arange(10, 10 + n))
    edges = pa.table({"src": keys[:-1], "dst": keys[1:]})
    idx = paths.build_index(edges, backend="cpu", progress=False)
    exact = idx.reach_counts("exact")
    real = GrailIndex.reach_counts
    monkeypatch.setattr(GrailIndex, "reach_counts",
                        lambda self, mode="auto", **kw: real(self, "exact", **kw))
    args = argparse.Namespace(hash_draws=3, seed=0)
    d = paths.hash_draws(edges, idx.ids.keys, exact, "cpu", args)
    assert d["draws"] == 3 and len(d["per_draw"]) == 3
    assert d["values"] == 3 * 2 * (n - 640)  # reaches + 1 and reached_by + 1 above 640
    assert d["rms"] == 0.0 and d["within_2_sigma"] == 1.0 and d["within_bound"]
