"""Every graph in the shared datasets folder: 10,000 uniform random pairs and 10,000 pairs
known reachable (random walks), all answers equal to a plain DFS over the original edges.
Skipped when the folder is absent."""
from __future__ import annotations

import numpy as np
import pytest

import grail_duckdb as gd
from grail_duckdb.tools import datasets, workloads
from grail_duckdb.engine.ids import assign_ids
from grail_duckdb.engine.ingest import edge_columns
from oracle import reaches_by_dfs

PAIRS = 10_000


@pytest.fixture(scope="module", params=sorted(datasets.DATASETS))
def graph(request, datasets_dir):
    name = request.param
    if name not in datasets.available():
        pytest.skip(f"{name} is not in {datasets_dir}")
    return name, datasets.load_dataset(name)


def test_random_and_reachable_pairs_match_the_oracle(graph):
    name, edges = graph
    idx = gd.build_index(edges, labels=5, seed=1, backend="cpu")
    cols = edge_columns(edges)  # with the isolated vertices a .gra file declares
    ids, s, d = assign_ids(cols.src, cols.dst, cols.extra_vertices)
    keys = workloads.vertex_keys(edges)
    random = workloads.random_pairs(keys, PAIRS, seed=2)
    walks = workloads.reachable_pairs(edges, PAIRS, seed=3)
    assert walks.num_rows >= PAIRS * 0.9, name
    for pairs, all_true in ((random, False), (walks, True)):
        got, stats = idx.reaches_with_stats(pairs.column("src"), pairs.column("dst"))
        got = got.to_numpy(zero_copy_only=False)
        qs = ids.encode(pairs.column("src"))
        qd = ids.encode(pairs.column("dst"))
        assert (qs >= 0).all() and (qd >= 0).all()
        want = reaches_by_dfs(s, d, ids.n, qs, qd)
        np.testing.assert_array_equal(got, want, err_msg=name)
        if all_true:
            assert want.all(), name
        assert stats.queries == pairs.num_rows
