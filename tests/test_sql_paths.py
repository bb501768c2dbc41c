"""hops, reaches_path, reaches_within, descendants / ancestors with max_hops and
grail_reach_counts from SQL: the whole-column path (one engine call per column) and the
per-chunk path give the same rows, equal to the engine's answers and to NetworkX's shortest
paths; keys of either kind, NULLs, keys that are no vertex; an index with cycles reads its
edges from its table."""
from __future__ import annotations

import duckdb
import networkx as nx
import numpy as np
import pytest

import grail_duckdb as gd

QUERIES = [
    "SELECT a, b, hops(a, b) AS h FROM pairs ORDER BY ALL",
    "SELECT a, b, reaches_path(a, b) AS p FROM pairs ORDER BY ALL",
    "SELECT a, b, k, reaches_within(a, b, k) AS w FROM pairs ORDER BY ALL",
    "SELECT a, b, reaches_within(a, b, 2, 'g') AS w, hops(a, b, 'g') AS h FROM pairs ORDER BY ALL",
    "SELECT count(*) FILTER (WHERE reaches_within(a, b, 3)), sum(hops(a, b)) FROM pairs",
    "SELECT a, max(hops(a, b)) FROM pairs GROUP BY a ORDER BY a",
]


def _connection(edges, key="BIGINT"):
    con = gd.install(duckdb.connect())
    con.execute(f"CREATE TABLE edges(src {key}, dst {key})")
    con.executemany("INSERT INTO edges VALUES (?, ?)", edges)
    con.execute("SELECT grail_index('edges', name := 'g')").fetchall()
    return con


@pytest.fixture(scope="module", params=["BIGINT", "VARCHAR"])
def graph(request):
    """A random graph with cycles and self-loops, its DuckDB connection and 400 pairs (with
    NULLs, keys of no vertex and equal keys)."""
    g = nx.gnp_random_graph(50, 0.05, seed=3, directed=True)
    g.add_edges_from([(7, 7), (8, 9), (9, 8)])
    wrap = str if request.param == "VARCHAR" else int
    con = _connection([(wrap(u), wrap(v)) for u, v in g.edges], request.param)
    rng = np.random.default_rng(1)
    rows = [(wrap(a) if a < 53 else None, wrap(b) if b < 53 else None, int(k) if k < 6 else None)
            for a, b, k in zip(rng.integers(0, 55, 400), rng.integers(0, 55, 400),
                               rng.integers(-1, 7, 400))]
    rows += [(wrap(5), wrap(5), 0), (wrap(52), wrap(52), 1)]
    con.execute(f"CREATE TABLE pairs(a {request.param}, b {request.param}, k BIGINT)")
    con.executemany("INSERT INTO pairs VALUES (?, ?, ?)", rows)
    yield g, con, rows, wrap
    con.close()


@pytest.mark.parametrize("query", QUERIES)
def test_whole_column_and_per_chunk_give_the_same_rows(graph, query):
    _, con, _, _ = graph
    assert gd.explain(con, query).startswith("=>")  # one engine call per column
    got = con.execute(query).fetchall()
    with gd.per_chunk(con):
        assert con.execute(query).fetchall() == got


def test_answers_are_networkx_shortest_paths(graph):
    g, con, rows, wrap = graph
    got = con.execute("SELECT hops(a, b), reaches_path(a, b), reaches_within(a, b, k) "
                      "FROM pairs").fetchall()
    for (a, b, k), (h, p, w) in zip(rows, got):
        if a is None or b is None:
            assert (h, p) == (None, None) and w is None
            continue
        x, y = int(a), int(b)
        want = nx.shortest_path_length(g, x, y) if x in g and y in g and nx.has_path(g, x, y) \
            else (0 if x == y else None)
        assert h == want, (a, b)
        assert w == (None if k is None else (want is not None and 0 <= want <= k))
        if want is None:
            assert p is None
        else:  # a shortest path, every step an edge, the smallest by key
            assert len(p) == want + 1 and p[0] == a and p[-1] == b
            assert all(g.has_edge(int(u), int(v)) for u, v in zip(p, p[1:]))
            best = min([wrap(v) for v in q] for q in nx.all_shortest_paths(g, x, y)) \
                if x != y else [a]
            assert p == best


def test_bounded_one_to_all_tables(graph):
    g, con, _, wrap = graph
    for x in (0, 8, 52):
        for hops in (None, 0, 2):
            arg = "" if hops is None else f", max_hops := {hops}"
            for fn, rev in (("descendants", False), ("ancestors", True)):
                q = f"SELECT key, hops FROM {fn}(?{arg}) ORDER BY hops, key"
                got = con.execute(q, [wrap(x)]).fetchall()
                with gd.per_chunk(con):
                    assert con.execute(q, [wrap(x)]).fetchall() == got
                h = g.reverse() if rev else g
                d = nx.single_source_shortest_path_length(h, x, cutoff=hops) if x in g \
                    else {x: 0}
                assert got == sorted(((wrap(v), n) for v, n in d.items()),
                                     key=lambda r: (r[1], r[0])), (fn, x, hops)
    assert con.execute("SELECT count(*) FROM descendants(NULL)").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM descendants(?, max_hops := -1)",
                       [wrap(0)]).fetchall() == [(0,)]


def test_reach_counts_by_table_and_by_index_name(graph):
    g, con, _, wrap = graph
    by_table = con.execute("SELECT * FROM grail_reach_counts('edges') ORDER BY key").fetchall()
    assert by_table == con.execute("SELECT * FROM grail_reach_counts('g') ORDER BY key").fetchall()
    want = sorted((wrap(v), len(nx.descendants(g, v)), len(nx.ancestors(g, v))) for v in g)
    assert [r[:3] for r in by_table] == want
    assert {r[3] for r in by_table} == {"exact"}
    approx = con.execute("SELECT mode, rel_error FROM grail_reach_counts('g', "
                         "mode := 'approximate', precision := 10) LIMIT 1").fetchall()
    assert approx == [("approximate", pytest.approx(1.04 / 32))]
    with pytest.raises(duckdb.Error, match="mode must be"):
        con.execute("SELECT * FROM grail_reach_counts('g', mode := 'quick')").fetchall()


def test_an_index_with_cycles_loaded_from_its_file_reads_its_table(tmp_path):
    path = str(tmp_path / "db.duckdb")
    con = gd.install(duckdb.connect(path))
    con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3), (3, 1), (3, 4)) "
                "t(src, dst)")
    con.execute("SELECT grail_index('cites')").fetchall()
    assert con.execute("SELECT reaches_path(2, 4)").fetchall() == [([2, 3, 4],)]
    con.close()
    con = gd.install(duckdb.connect(path))
    assert con.execute("SELECT hops(1, 4), reaches_path(3, 2)").fetchall() == [(3, [3, 1, 2])]
    con.execute("INSERT INTO cites VALUES (1, 4)")  # no new path: absorbed, a hop shorter
    assert con.execute("SELECT hops(1, 4), reaches_path(1, 4)").fetchall() == [(1, [1, 4])]
    con.execute("INSERT INTO cites VALUES (4, 1)")  # a new path out of a held vertex: stale
    with pytest.raises(gd.StaleIndexError):
        con.execute("SELECT hops(4, 1)").fetchall()
    con.close()


def test_ubigint_keys_beyond_bigint_are_no_vertices_for_paths():
    """A UBIGINT key above 2**63 - 1 is never a vertex: 0 hops, the path [x] and within any
    k >= 0 against itself; NULL, NULL and false against another key; on both paths."""
    big = 2**64 - 1
    con = _connection([(1, 2), (2, 3)])
    con.execute(f"CREATE TABLE u AS SELECT * FROM (VALUES ({big}::UBIGINT, 1::UBIGINT), "
                f"({big}, {big}), (1, 3), (NULL, {big})) t(x, y)")
    q = ("SELECT x, y, hops(x, y), reaches_path(x, y), reaches_within(x, y, 2), "
         "reaches_within(x, y, -1) FROM u ORDER BY ALL")
    want = [(1, 3, 2, [1, 2, 3], True, False), (big, 1, None, None, False, False),
            (big, big, 0, [big], True, False), (None, big, None, None, None, None)]
    assert con.execute(q).fetchall() == want
    with gd.per_chunk(con):
        assert con.execute(q).fetchall() == want
    assert con.execute(f"SELECT key, hops FROM descendants({big}::UBIGINT)").fetchall() == [
        (big, 0)]
