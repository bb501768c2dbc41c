"""Query workloads: reachable pairs checked by a BFS oracle, random pairs from the vertex set."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from grail_duckdb.tools.generators import citation_dag, rmat
from grail_duckdb.engine.ids import assign_ids
from benchmarks.workloads import random_pairs, reachable_pairs, vertex_keys
from oracle import bfs_pairs


def oracle_answers(edges, pairs):
    """BFS answers of query pairs given by keys, through one shared key -> id map."""
    ids, s, d = assign_ids(edges["src"].combine_chunks(), edges["dst"].combine_chunks())
    qs = ids.encode(pairs["src"].combine_chunks())
    qt = ids.encode(pairs["dst"].combine_chunks())
    assert (qs >= 0).all() and (qt >= 0).all()
    return bfs_pairs(s, d, ids.n, qs, qt)


def cyclic_graph(seed=0):
    """R-MAT with cycles, self-loops, duplicates, plus a sink chain: int32 sparse keys."""
    t = rmat(7, 4, seed=seed)
    s = np.concatenate([t["src"].to_numpy() * 10, [5000, 5001, 7, 7]])
    d = np.concatenate([t["dst"].to_numpy() * 10, [5001, 5002, 7, 7]])
    return pa.table({"src": pa.array(s, pa.int32()), "dst": pa.array(d, pa.int32())})


@pytest.mark.parametrize("seed", [0, 1])
def test_reachable_pairs_are_reachable(seed):
    edges = cyclic_graph(seed)
    p = reachable_pairs(edges, 3000, seed=seed)
    assert p.num_rows == 3000 and p.schema.field("src").type == pa.int32()
    assert not np.any(p["src"].to_numpy() == p["dst"].to_numpy())
    assert oracle_answers(edges, p).all()


def test_reachable_pairs_on_a_deep_dag_go_deep():
    edges = citation_dag(5000, seed=2)
    p = reachable_pairs(edges, 2000, seed=3, max_steps=40)
    assert oracle_answers(edges, p).all()
    assert (p["src"].to_numpy() > p["dst"].to_numpy()).all()
    assert (p["src"].to_numpy() - p["dst"].to_numpy()).max() > 1000      # multi-step walks


def test_reachable_pairs_string_keys_and_seed():
    edges = pa.table({"src": ["a", "b", "c", "c", "x"], "dst": ["b", "c", "a", "d", "x"]})
    p = reachable_pairs(edges, 200, seed=9)
    assert p.equals(reachable_pairs(edges, 200, seed=9))
    assert not p.equals(reachable_pairs(edges, 200, seed=10))
    assert p.schema.field("dst").type == pa.string()
    assert oracle_answers(edges, p).all()
    assert "x" not in p["src"].to_pylist()                    # a self-loop is not a way out


def test_reachable_pairs_from_a_relation():
    import duckdb

    con = duckdb.connect()
    rel = con.sql("SELECT * FROM (VALUES (1, 2), (2, 3)) t(citing, cited)")
    p = reachable_pairs(rel, 10, src="citing", dst="cited")
    assert set(zip(p["src"].to_pylist(), p["dst"].to_pylist())) <= {(1, 2), (2, 3), (1, 3)}


def test_reachable_pairs_without_edges_is_an_error():
    with pytest.raises(ValueError, match="no reachable pairs"):
        reachable_pairs(pa.table({"src": [1, 2], "dst": [1, 2]}), 5)


def test_random_pairs_draw_from_the_vertex_set():
    keys = vertex_keys(cyclic_graph())
    p = random_pairs(keys, 5000, seed=4)
    allowed = set(keys.to_pylist())
    assert p.num_rows == 5000 and p.schema.field("src").type == keys.type
    assert set(p["src"].to_pylist()) <= allowed and set(p["dst"].to_pylist()) <= allowed
    assert len(set(p["src"].to_pylist())) > 0.9 * len(allowed)          # uniform: covers most
    assert p.equals(random_pairs(keys, 5000, seed=4))
    q = random_pairs(np.array([7, 8, 9], np.int64), 50, seed=1)
    assert set(q["dst"].to_pylist()) <= {7, 8, 9}
    with pytest.raises(ValueError):
        random_pairs([], 3)


def test_vertex_keys_include_isolated_gra_vertices():
    t = pa.table({"src": [0], "dst": [1]}).replace_schema_metadata({b"grail.vertices": b"4"})
    assert vertex_keys(t).to_pylist() == [0, 1, 2, 3]
