"""Seeded generators: reproducible, the promised shape (DAG-ness, j < i, counts, a giant SCC)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pyarrow as pa
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from grail_duckdb.tools.generators import citation_dag, random_dag, rmat

GENERATORS = [
    lambda seed: citation_dag(3000, seed=seed),
    lambda seed: random_dag(1000, 4.0, seed=seed),
    lambda seed: rmat(9, 8, seed=seed),
]


def arrays(table):
    return table["src"].to_numpy(), table["dst"].to_numpy()


@pytest.mark.parametrize("make", GENERATORS)
def test_seeded_and_int64(make):
    a, b, c = make(1), make(1), make(2)
    assert a.equals(b) and not a.equals(c)
    assert a.schema == pa.schema([("src", pa.int64()), ("dst", pa.int64())])


def test_citation_dag_cites_earlier_papers_only():
    n = 20_000
    s, d = arrays(citation_dag(n, seed=3))
    assert (d < s).all() and (d >= 0).all() and s.max() < n
    assert not (s == 0).any()                                   # the first paper cites nothing
    assert abs(s.shape[0] / (4.38 * (n - 1)) - 1) < 0.03        # Poisson(4.38) per paper
    assert abs(citation_dag(n, mean_citations=2.0).num_rows / (2.0 * (n - 1)) - 1) < 0.03


def test_citation_dag_mixes_recent_and_old_citations():
    s, d = arrays(citation_dag(20_000, seed=4))
    gap = (s - d) / s
    late = s > 10_000
    # recent citations look back ~2% of i, old ones j = i u^3 look back > 50% of i mostly
    assert 0.4 < np.mean(gap[late] < 0.1) < 0.6


@pytest.mark.parametrize("make", GENERATORS)
def test_every_vertex_counts_even_without_edges(make):
    import grail_duckdb as gd

    t = make(0)
    n = int(t.schema.metadata[b"grail.vertices"])
    assert n in (3000, 1000, 512)
    assert gd.build_index(t, backend="cpu").summary()["vertices"] == n


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_graphs_have_no_edges(n):
    assert citation_dag(n).num_rows == 0 and random_dag(n, 3.0).num_rows == 0


def test_random_dag_is_a_dag_with_shuffled_ids():
    n, deg = 2000, 5.0
    s, d = arrays(random_dag(n, deg, seed=5))
    assert s.shape[0] == n * deg
    assert (s != d).all() and s.min() >= 0 and max(s.max(), d.max()) < n
    g = nx.DiGraph()
    g.add_edges_from(zip(s.tolist(), d.tolist()))
    assert nx.is_directed_acyclic_graph(g)
    assert 0.3 < np.mean(s < d) < 0.7                          # ids are not a topological order


def test_rmat_counts_and_giant_component():
    scale, factor = 10, 16
    s, d = arrays(rmat(scale, factor, seed=6))
    n = 1 << scale
    assert s.shape[0] == factor * n and s.min() >= 0 and max(s.max(), d.max()) < n
    graph = csr_matrix((np.ones(s.shape[0]), (s, d)), shape=(n, n))
    _, comp = connected_components(graph, directed=True, connection="strong")
    assert np.bincount(comp).max() > 0.3 * n


def test_rmat_rejects_bad_probabilities():
    with pytest.raises(ValueError):
        rmat(4, a=0.6, b=0.3, c=0.3)
