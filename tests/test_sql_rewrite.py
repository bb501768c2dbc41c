"""grail_duckdb.sql: the rewritten query (whole-column path) returns the rows of the plain one;
the fixture file holds the queries, one line each (sqlglot's fixture-driven style)."""
from __future__ import annotations

from pathlib import Path

import duckdb
import networkx as nx
import pytest

import grail_duckdb as gd
import grail_duckdb.plugin.rewrite as _rewrite_mod
from grail_duckdb.plugin import names
from grail_duckdb.errors import EdgeInputError, GrailError

FIXTURE = Path(__file__).parent / "fixtures" / "reaches_rewrite.sql"
QUERIES = [line for line in FIXTURE.read_text().splitlines()
           if line.strip() and not line.startswith("--")]


@pytest.fixture(scope="module")
def con():
    g = nx.gnp_random_graph(60, 0.04, seed=11, directed=True)
    c = gd.install(duckdb.connect())
    c.execute("CREATE TABLE edges(src BIGINT, dst BIGINT)")
    c.executemany("INSERT INTO edges VALUES (?, ?)", list(g.edges()))
    c.execute("SELECT grail_index('edges', name := 'main')").fetchall()
    c.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b, (a.range * 7 + b.range) % 11 AS w "
              "FROM range(-1, 62, 2) a, range(-1, 62, 3) b")
    c.execute("INSERT INTO pairs VALUES (NULL, 1, 5), (2, NULL, 5)")
    yield c
    c.close()


def _rows(rel):
    return sorted(map(repr, rel.fetchall()))


@pytest.mark.parametrize("query", QUERIES)
def test_rewrite_returns_the_plain_rows(con, query):
    assert _rows(gd.sql(con, query)) == _rows(con.sql(query))


def test_rewrite_uses_the_whole_column_path():
    out = _rewrite_mod.rewrite("SELECT count(*) FROM pairs WHERE reaches(a, b) AND reaches(a, b)")
    assert out.count("REACHES_LIST") == 1 and "reaches(" not in out.lower().replace("reaches_list(", "")


def test_joins_and_outer_references_keep_the_scalar_path():
    q = "SELECT * FROM pairs AS p JOIN edges AS e ON p.b = e.src WHERE reaches(p.a, e.dst)"
    assert "REACHES_LIST" not in _rewrite_mod.rewrite(q)
    q = "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE reaches(t.a, u.b))"
    assert "REACHES_LIST" not in _rewrite_mod.rewrite(q)


def test_string_keys_rewrite():
    c = gd.install(duckdb.connect())
    c.execute("CREATE TABLE edges AS SELECT * FROM (VALUES ('a', 'b'), ('b', 'c')) t(src, dst)")
    c.execute("SELECT grail_index('edges')").fetchall()
    c.execute("CREATE TABLE spairs AS SELECT * FROM (VALUES ('a', 'c'), ('c', 'a'), ('q', 'q'), (NULL, 'a')) t(x, y)")
    q = "SELECT x, y, reaches(x, y) FROM spairs"
    assert _rows(gd.sql(c, q)) == _rows(c.sql(q))


def test_parameters_pass_through(con):
    q = "SELECT count(*) FROM pairs WHERE reaches(a, $t)"
    assert gd.sql(con, q, params={"t": 3}).fetchall() == con.execute(q, {"t": 3}).fetchall()


def test_bad_queries_are_errors():
    with pytest.raises(GrailError):
        _rewrite_mod.rewrite("SELECT 1; SELECT 2")
    with pytest.raises(GrailError):
        _rewrite_mod.rewrite("SELECT FROM WHERE (")


@pytest.mark.parametrize("name,want", [("cites", '"cites"'), ("main.cites", '"main"."cites"'),
                                       ('"my table"', '"my table"'), ('"a""b"', '"a""b"')])
def test_quote_table(name, want):
    assert names.quote_table(name) == want


@pytest.mark.parametrize("name", ["x; DROP TABLE y", "t; --", "f()", "t AS u", "1", "", "a b"])
def test_quote_table_refuses(name):
    with pytest.raises(EdgeInputError):
        names.quote_table(name)


@pytest.mark.parametrize("name", ["a.b", "x; DROP", "f(x)", "*"])
def test_quote_column_refuses(name):
    with pytest.raises(EdgeInputError):
        names.quote_column(name)
