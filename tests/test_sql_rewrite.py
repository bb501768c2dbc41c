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
from grail_duckdb.plugin import duckdb_api, names, rewrite, statements

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
    c.execute("CREATE VIEW rpairs AS SELECT a, (random() * 60)::INT AS b FROM pairs")
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
    exact = plan.rewrites and statements.refusal(con, plan, text) is None
    got = rewrite.describe(plan).splitlines() if exact else ["=> per-chunk"]
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
    from dataclasses import replace

    k = gd.kernels.kernels_for("gpu")  # the instance SQL's builds use: every call on the device
    monkeypatch.setattr(k, "settings", replace(k.settings, host_below=0))
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


def test_views_and_macros_are_stored_as_written(tmp_path):
    """A view or macro holding reaches() keeps the user's text: it answers later in the same
    connection, after the statement's sources are gone, and on a new connection."""
    path = str(tmp_path / "g.duckdb")
    c = gd.install(duckdb.connect(path))
    c.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3), (4, 1)) t(src, dst)")
    c.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b FROM range(5) a, range(5) b")
    c.execute("SELECT grail_index('edges')").fetchall()
    c.execute("CREATE VIEW rv AS SELECT a, b, reaches(a, b) AS r FROM pairs")
    c.execute("CREATE MACRO rm(x, y) AS reaches(x, y) OR reaches(y, x)")
    c.execute("CREATE VIEW cv AS SELECT count(*) AS n FROM pairs WHERE reaches(a, 3)")
    stored = " ".join(r[0] for r in c.execute(
        "SELECT sql FROM duckdb_views() WHERE view_name IN ('rv', 'cv') UNION ALL "
        "SELECT macro_definition FROM duckdb_functions() WHERE function_name = 'rm'").fetchall())
    assert "__duckdb_source" not in stored and "__grail_m" not in stored
    assert stored.count("reaches(") == 4
    want = [(a, b, a == b or (a, b) in {(1, 2), (1, 3), (2, 3), (4, 1), (4, 2), (4, 3)})
            for a in range(5) for b in range(5)]
    c.execute("SELECT 1").fetchall()  # a later statement: the first one's sources are released
    import gc
    gc.collect()
    assert c.execute("SELECT * FROM rv ORDER BY a, b").fetchall() == want
    assert c.execute("SELECT n FROM cv").fetchall() == [(20,)]  # a in 1..4, any b
    c.close()
    c = gd.install(duckdb.connect(path))
    assert c.execute("SELECT * FROM rv ORDER BY a, b").fetchall() == want
    assert c.execute("SELECT rm(2, 1), rm(3, 0)").fetchall() == [(True, False)]
    c.close()


def test_a_relation_is_evaluated_when_fetched(con):
    """con.sql() returns a relation DuckDB evaluates at each fetch: rows inserted before the
    fetch are counted, a changed edge table is refused then (not answered from old edges)."""
    c = gd.install(duckdb.connect())
    c.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    c.execute("CREATE TABLE p AS SELECT 1 AS a, 3 AS b")
    c.execute("SELECT grail_index('edges')").fetchall()
    for rel in (c.sql("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM p"),
                c.sql("SELECT count(*) FROM p WHERE reaches(a, 3)"),
                gd.sql(c, "SELECT count(*) FILTER (WHERE reaches(a, b)) FROM p")):
        assert rel.fetchall() == [(1,)]
        c.execute("INSERT INTO p VALUES (2, 3)")
        assert rel.fetchall() == [(2,)]
        c.execute("DELETE FROM p WHERE a = 2")
    rel = c.sql("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM p")
    c.execute("DELETE FROM edges WHERE src = 2")
    with pytest.raises(duckdb.Error) as info:
        rel.fetchall()
    assert isinstance(gd.plugin.grail_error(info.value), gd.StaleIndexError)
    c.close()


def test_commands_naming_reaches_print_nothing():
    """PREPARE, EXPLAIN and other commands run as written, and sqlglot never sees them (it
    would warn on stderr that it falls back to parsing a 'Command'): in a child process,
    where nothing captures the warnings."""
    import subprocess
    import sys
    import textwrap

    from harness import child_env

    script = textwrap.dedent("""
        import duckdb, grail_duckdb as gd
        con = gd.install(duckdb.connect())
        con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
        con.execute("SELECT grail_index('edges')").fetchall()
        con.execute("PREPARE pr AS SELECT reaches(1, $1)")
        assert con.execute("EXECUTE pr(3)").fetchall() == [(True,)]
        assert con.execute("EXPLAIN SELECT reaches(1, 2)").fetchall()
        assert con.execute("DESCRIBE SELECT reaches(1, 2) AS r").fetchall()
        assert "per-chunk" in gd.explain(con, "EXPLAIN SELECT reaches(1, 2)")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=child_env(GRAIL_DUCKDB_PROGRESS="0"), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
    assert proc.stderr == "", proc.stderr[-2000:]
