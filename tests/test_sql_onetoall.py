"""One-to-all queries (issue 10, item 3): descendants / ancestors and their counts, by one
traversal, equal to NetworkX (plus the key itself: reaches(x, x) is true); columns with few
distinct keys answered by one traversal per key, equal to the engine's pair answers."""
from __future__ import annotations

import duckdb
import networkx as nx
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.plugin import traversal
from grail_duckdb.plugin.registry import Entry


def connection(edges, key="BIGINT"):
    con = gd.install(duckdb.connect())
    con.execute(f"CREATE TABLE edges(src {key}, dst {key})")
    if edges:
        con.executemany("INSERT INTO edges VALUES (?, ?)", edges)
    con.execute("SELECT grail_index('edges')").fetchall()
    return con


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15)), min_size=1, max_size=40))
def test_sets_equal_networkx_on_every_path(edges):
    g = nx.DiGraph(edges)
    con = connection(edges)
    for x in list(g.nodes)[:6] + [99]:
        down = ({x} | nx.descendants(g, x)) if x in g else {x}
        up = ({x} | nx.ancestors(g, x)) if x in g else {x}
        for path in (True, False):
            if path:
                got_d = {r[0] for r in con.execute("SELECT key FROM descendants(?)", [x]).fetchall()}
                got_u = {r[0] for r in con.execute(f"SELECT key FROM ancestors({x})").fetchall()}
                counts = con.execute("SELECT descendants_count(?), ancestors_count(?)", [x, x]).fetchall()
            else:
                with gd.per_chunk(con):
                    got_d = {r[0] for r in con.execute("SELECT key FROM descendants(?)", [x]).fetchall()}
                    got_u = {r[0] for r in con.execute(f"SELECT key FROM ancestors({x})").fetchall()}
                    counts = con.execute("SELECT descendants_count(?), ancestors_count(?)", [x, x]).fetchall()
            assert got_d == down and got_u == up, (x, path)
            assert counts == [(len(down), len(up))]
    con.close()


def test_null_and_string_keys():
    con = connection([("a", "b"), ("b", "c"), ("c", "b")], key="VARCHAR")
    assert sorted(con.execute("SELECT key FROM descendants('a')").fetchall()) == [("a",), ("b",), ("c",)]
    assert con.execute("SELECT key FROM ancestors('zz')").fetchall() == [("zz",)]
    assert con.execute("SELECT count(*) FROM descendants(NULL)").fetchall() == [(0,)]
    assert con.execute("SELECT descendants_count(NULL), ancestors_count('b')").fetchall() == [(None, 3)]
    with pytest.raises(gd.KeyTypeError):
        con.execute("SELECT * FROM descendants(1)").fetchall()
    con.close()


@pytest.mark.parametrize("flip", [False, True])
def test_few_distinct_keys_answer_like_the_engine(flip):
    rng = np.random.default_rng(3)
    g = nx.gnp_random_graph(300, 0.015, seed=4, directed=True)
    idx = gd.build_index([u for u, _ in g.edges], [v for _, v in g.edges], backend="cpu")
    entry = Entry("g", idx, "t", "s", "d", 5, None, {}, None)
    n = 20_000
    many = rng.integers(-5, 310, n).astype(object)
    few = rng.choice([3, 17, 250, 1000, -4], n).astype(object)
    many[rng.random(n) < 0.02] = None
    few[rng.random(n) < 0.02] = None
    a, b = pa.array(list(many), pa.int64()), pa.array(list(few), pa.int64())
    if flip:
        a, b = b, a
    got = traversal.few_keys_answers(entry, a, b)
    assert got is not None and got.equals(idx.reaches(a, b))
    assert traversal.few_keys_answers(entry, a.slice(0, 100), b.slice(0, 100)) is None  # too few rows


def test_few_keys_of_a_large_graph_are_asked_pair_by_pair():
    """Traversals may visit every vertex for each key: with fewer rows than the vertices they
    may visit (over VERTICES_PER_ROW), the engine answers pair by pair; the answers agree."""
    n = 20_000
    idx = gd.build_index(np.arange(1, n), np.arange(n - 1), backend="cpu")  # a chain to 0
    entry = Entry("g", idx, "t", "s", "d", 5, None, {}, None)
    per = traversal.VERTICES_PER_ROW
    for rows, taken in ((n // per - 1, False), (n // per + 1, True)):
        a = pa.array(np.arange(rows, dtype=np.int64) * 7 % n)
        b = pa.array(np.zeros(rows, np.int64))
        got = traversal.few_keys_answers(entry, a, b)
        assert (got is not None) == taken
        if taken:
            assert got.equals(idx.reaches(a, b)) and got.to_numpy(zero_copy_only=False).all()


def test_a_grid_against_few_candidates_takes_the_traversals():
    con = connection([(i, i // 2) for i in range(1, 400)])
    q = ("SELECT c.k, count(*) FILTER (WHERE reaches(p.range, c.k)) FROM range(400) AS p "
         "CROSS JOIN (VALUES (1), (3), (7), (NULL), (9999)) AS c(k) GROUP BY c.k ORDER BY c.k")
    got = con.execute(q).fetchall()
    with gd.per_chunk(con):
        assert got == con.execute(q).fetchall()
    assert dict(got)[1] == 399 and dict(got)[9999] == 0
    con.close()
