"""The rewriter is exact: every statement of ``fixtures/reaches_rewrite.sql`` returns the same
rows (order included, unless the entry says otherwise) on the per-chunk path (as written) and
on its rewritten path, on DuckDB; and its plan is the one the fixture shows (sqlglot's
fixture-driven style: the expected rewrite beside the input)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import networkx as nx
import pyarrow.parquet as pq
import pytest

import grail_duckdb as gd
from grail_duckdb.errors import EdgeInputError
from grail_duckdb.plugin import duckdb_api, names, rewrite

FIXTURE = Path(__file__).parent / "fixtures" / "reaches_rewrite.sql"


def parse_fixture(path: Path) -> list[dict]:
    """Entries of the fixture: title, options, statement, expected plan lines."""
    entries, cur = [], None
    for line in path.read_text().splitlines() + [""]:
        if not line.strip():
            if cur and cur["statement"]:
                entries.append(cur)
            cur = None
            continue
        if cur is None:
            cur = {"title": "", "options": {}, "statement": "", "expected": [], "done": False}
        if line.startswith("-- ") and not cur["statement"]:
            text = line[3:]
            key, _, value = text.partition(": ")
            if key in ("params", "check", "setup"):
                cur["options"][key] = value
            elif text == "unordered":
                cur["options"]["unordered"] = True
            elif not cur["title"]:
                cur["title"] = text
        elif line.startswith(("=>", "@")):
            cur["expected"].append(line)
        elif not line.startswith("--"):
            cur["statement"] += (" " if cur["statement"] else "") + line.strip()
    return [e for e in entries if e["statement"].endswith(";")]


ENTRIES = parse_fixture(FIXTURE)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rewrite")
    old = os.getcwd()
    os.chdir(folder)
    g = nx.gnp_random_graph(60, 0.04, seed=11, directed=True)
    c = gd.install(duckdb.connect())
    c.execute("SET threads = 2")
    c.execute("CREATE TABLE edges(src BIGINT, dst BIGINT)")
    c.executemany("INSERT INTO edges VALUES (?, ?)", list(g.edges()))
    c.execute("SELECT grail_index('edges', name := 'main')").fetchall()
    c.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b, "
              "(a.range * 7 + b.range) % 11 AS w FROM range(-1, 62, 2) a, range(-1, 62, 3) b")
    c.execute("INSERT INTO pairs VALUES (NULL, 1, 5), (2, NULL, 5), (NULL, NULL, 1)")
    pq.write_table(c.sql("SELECT * FROM pairs").to_arrow_table(), "pairs.parquet")
    yield c
    c.close()
    os.chdir(old)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["title"] for e in ENTRIES])
def test_rewrite_returns_the_per_chunk_rows(con, entry):
    arrow_pairs = con.sql("SELECT * FROM pairs").to_arrow_table()  # noqa: F841 (read by SQL)
    options = entry["options"]
    params = json.loads(options["params"]) if "params" in options else None
    statement = entry["statement"]
    with gd.per_chunk(con):
        if "setup" in options:
            con.execute(options["setup"])
        plain = con.execute(statement, params).fetchall()
        if "check" in options:
            plain = con.execute(options["check"]).fetchall()
    if "setup" in options:
        con.execute(options["setup"])
    rewritten = con.execute(statement, params).fetchall()
    if "check" in options:
        rewritten = con.execute(options["check"]).fetchall()
    if options.get("unordered"):
        plain, rewritten = sorted(map(repr, plain)), sorted(map(repr, rewritten))
    assert rewritten == plain
    assert len(plain) > 0


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["title"] for e in ENTRIES])
def test_plan_is_the_fixtures(con, entry):
    arrow_pairs = con.sql("SELECT * FROM pairs").to_arrow_table()
    params = json.loads(entry["options"]["params"]) if "params" in entry["options"] else None
    text, values = rewrite.normalise(entry["statement"], params)
    handle = duckdb_api.register_source(con, arrow_pairs)
    variables = {"arrow_pairs": f'"{handle.name}"'}
    plan = rewrite.plan_for(text, lambda sql: _columns(con, sql, values), variables)
    got = rewrite.describe(plan).splitlines() if plan.rewrites else ["=> per-chunk"]
    assert got == entry["expected"], "\n".join(got)


def _columns(con, sql, values):
    try:
        return duckdb_api.bind(con, sql, values=values and {
            k: v for k, v in values.items() if f"${k}" in sql}).names
    except Exception:
        return None


def test_fixture_covers_the_shapes():
    assert len(ENTRIES) >= 30
    text = FIXTURE.read_text()
    for shape in ("OVER (", "UNION", " IN (SELECT", "WITH ", "JOIN", "GROUP BY", "HAVING",
                  "ORDER BY", "LIMIT", "CREATE TABLE", "INSERT INTO", "UPDATE", "rowid",
                  "?::INT", "$lo", "(SELECT count(*)"):
        assert shape in text, shape


def test_positional_parameters_keep_their_meaning(con):
    q = "SELECT a, reaches(a, ?) AS r, a + ? AS s FROM pairs WHERE b = 2 ORDER BY a"
    got = con.execute(q, [4, 100]).fetchall()
    with gd.per_chunk(con):
        assert got == con.execute(q, [4, 100]).fetchall()
    assert all(s == a + 100 for a, _, s in got if a is not None)


def test_explain_names_the_paths(con):
    text = gd.plugin.explain(con, "SELECT count(*) FROM pairs WHERE reaches(a, b)")
    assert "pairs.__grail_r0" in text and "<= SELECT" in text
    assert gd.plugin.explain(con, "SELECT * FROM pairs AS p JOIN edges AS e ON p.b = e.src "
                                  "WHERE reaches(p.a, e.dst)").startswith("per-chunk")
    assert "IN ancestors(3)" in gd.plugin.explain(con, "SELECT reaches(a, 3) FROM pairs")


def test_string_keys_rewrite():
    c = gd.install(duckdb.connect())
    c.execute("CREATE TABLE edges AS SELECT * FROM (VALUES ('a', 'b'), ('b', 'c'), ('B', 'a')) t(src, dst)")
    c.execute("SELECT grail_index('edges')").fetchall()
    c.execute("CREATE TABLE spairs(x VARCHAR COLLATE NOCASE, y VARCHAR)")
    c.execute("INSERT INTO spairs VALUES ('a', 'c'), ('c', 'a'), ('q', 'q'), (NULL, 'a'), ('A', 'c'), ('b', 'B')")
    for q in ("SELECT x, y, reaches(x, y) FROM spairs", "SELECT x, reaches(x, 'c') FROM spairs",
              "SELECT x, reaches('B', x) FROM spairs", "SELECT * FROM descendants('B')"):
        got = c.execute(q).fetchall()
        with gd.per_chunk(c):
            assert got == c.execute(q).fetchall(), q
    assert c.execute("SELECT x FROM spairs WHERE reaches(x, 'c') ORDER BY x").fetchall() == [
        ("a",), ("b",), ("c",)]  # byte equality: 'A' is no vertex, though the column ignores case
    c.close()


def test_bad_statements_run_as_written(con):
    with pytest.raises(duckdb.Error):
        con.execute("SELECT reaches(a, b) FROM no_such_table").fetchall()
    with pytest.raises(duckdb.Error, match="both integers or both VARCHAR"):
        con.execute("SELECT reaches(a, 'x') FROM pairs").fetchall()
    assert con.execute("SELECT 1; SELECT reaches(1, 1)").fetchall() == [(True,)]


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


GPU_STATEMENTS = [
    "SELECT a, b, reaches(a, b) FROM pairs",
    "SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs",
    "SELECT a, reaches(a, 3), reaches(5, a) FROM pairs",
    "SELECT p.a, e.dst, reaches(p.a, e.dst) FROM pairs AS p JOIN edges AS e ON p.b = e.src ORDER BY ALL",
    "SELECT key FROM descendants(3) ORDER BY key",
    "SELECT ancestors_count(5), descendants_count(3)",
]


@pytest.mark.gpu
@pytest.mark.skipif(not gd.kernels.gpu_available(), reason="no CUDA device visible to CuPy")
def test_a_gpu_index_gives_the_cpu_rows_on_every_path(con, monkeypatch, backend="gpu"):
    """The same statements on a GPU index (whole columns on the device, chunks on its host
    copy, one-to-all traversals on the device) and on a CPU index."""
    monkeypatch.setattr("grail_duckdb.engine.index.GPU_MIN_QUERIES", 0)
    want = {q: con.execute(q).fetchall() for q in GPU_STATEMENTS}
    monkeypatch.setenv("GRAIL_DUCKDB_BACKEND", backend)
    g = gd.install(duckdb.connect())
    g.register("e", con.sql("SELECT * FROM edges").to_arrow_table())
    g.execute("CREATE TABLE edges AS SELECT * FROM e")
    g.register("p", con.sql("SELECT * FROM pairs").to_arrow_table())
    g.execute("CREATE TABLE pairs AS SELECT * FROM p")
    assert g.execute("SELECT grail_index('edges').backend").fetchall() == [(backend,)]
    for q in GPU_STATEMENTS:
        assert g.execute(q).fetchall() == want[q], q
        with gd.per_chunk(g):
            assert g.execute(q).fetchall() == want[q], q
    g.close()
