"""Every graph in the shared datasets folder, on every backend present: 20,000 uniform random
pairs, 10,000 pairs known reachable (random walks) and 20,000 edges, every answer (with the
cuts and without) equal to a plain DFS over the original edges; a GPU configuration also
builds exactly the CPU backend's index and gives its cut statistics. Skipped when the folder
is absent.

The pairs and the oracle's answers are computed once per dataset and shared by the backends.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

import grail_duckdb as gd
from grail_duckdb.engine.ids import assign_ids
from grail_duckdb.engine.ingest import edge_columns
from benchmarks import datasets, workloads
from harness import assert_same_index, check_answers
from oracle import reaches_by_dfs

pytestmark = pytest.mark.datasets

RANDOM, WALKS, EDGES = 20_000, 10_000, 20_000
LABELS, SEED = 5, 1


@dataclass(frozen=True)
class Workload:
    edges: pa.Table
    pairs: dict  # set name -> (pair table, the oracle's answers)


@functools.lru_cache(maxsize=None)
def workload(name: str) -> Workload:
    edges = datasets.load_dataset(name)
    cols = edge_columns(edges)  # with the isolated vertices a .gra file declares
    ids, s, d = assign_ids(cols.src, cols.dst, cols.extra_vertices)
    pick = np.random.default_rng(5).integers(0, edges.num_rows, EDGES)
    sets = {"random": workloads.random_pairs(workloads.vertex_keys(edges), RANDOM, seed=2),
            "walks": workloads.reachable_pairs(edges, WALKS, seed=3),
            "edges": edges.select(["src", "dst"]).take(pa.array(pick))}
    assert sets["walks"].num_rows >= WALKS * 0.9, name
    pairs = {}
    for label, t in sets.items():
        qs, qd = ids.encode(t.column("src")), ids.encode(t.column("dst"))
        assert (qs >= 0).all() and (qd >= 0).all()
        want = reaches_by_dfs(s, d, ids.n, qs, qd)
        if label != "random":  # a walk or an edge is a path
            assert want.all(), (name, label)
        pairs[label] = (t, want)
    return Workload(edges, pairs)


@functools.lru_cache(maxsize=None)
def cpu_index(name: str):
    """The CPU index of a dataset, built once for every GPU configuration to compare with."""
    return gd.build_index(workload(name).edges, labels=LABELS, seed=SEED, backend="cpu")


#: the datasets whose oracle takes longest run with the slow tests (every other one, cit-HepTh
#: with its cycles among them, runs in the suite)
_SLOW = {"p2p-Gnutella31", "Wiki-Vote"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
                                  for n in sorted(datasets.DATASETS)])
def test_dataset_answers_match_the_oracle_and_the_cpu(backend, name, datasets_dir):
    if name not in datasets.available():
        pytest.skip(f"{name} is not in {datasets_dir}")
    w = workload(name)
    idx = gd.build_index(w.edges, labels=LABELS, seed=SEED, backend=backend)
    cpu = idx if backend.name == "cpu" else cpu_index(name)
    assert_same_index(cpu, idx)
    for label, (t, want) in w.pairs.items():
        check_answers(idx, t.column("src"), t.column("dst"), want, cpu)
