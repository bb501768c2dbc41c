"""No silent stale answers (issue 10, item 4): after a committed INSERT, UPDATE, DELETE or
replacement of an indexed edge table, by any connection or cursor of the process, the next
statement that uses the index fails with StaleIndexError (on every path) until the index is
rebuilt, or answers from a rebuilt index (auto_rebuild); uncommitted rows of the calling
transaction are not the index's; errors reach SQL callers by name and say what to do."""
from __future__ import annotations

import duckdb
import pytest

import grail_duckdb as gd

STATEMENTS = {
    "per-chunk": "SELECT reaches(1, 3)",
    "whole column": "SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs",
    "one-to-all": "SELECT count(*) FROM pairs WHERE reaches(a, 3)",
    "descendants": "SELECT count(*) FROM descendants(1)",
}

CHANGES = {
    "insert": "INSERT INTO edges VALUES (3, 4)",
    "update": "UPDATE edges SET dst = 1 WHERE src = 2",  # same row count, other content
    "delete": "DELETE FROM edges WHERE src = 2",
    "replace": "CREATE OR REPLACE TABLE edges AS SELECT * FROM (VALUES (1, 3), (3, 2)) t(src, dst)",
    "alter": "ALTER TABLE edges ADD COLUMN w INTEGER",
}


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "g.duckdb")
    con = gd.install(duckdb.connect(path))
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("CREATE TABLE pairs AS SELECT range AS a, 3 AS b FROM range(5)")
    con.execute("SELECT grail_index('edges', labels := 3)").fetchall()
    yield path, con
    con.close()


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("writer", ["other connection", "cursor", "same connection"])
def test_a_change_makes_every_path_refuse_until_rebuilt(db, change, writer):
    path, con = db
    w = {"other connection": lambda: duckdb.connect(path), "cursor": con.cursor,
         "same connection": lambda: con}[writer]()
    for sql in STATEMENTS.values():
        con.execute(sql).fetchall()  # fresh: answers
    w.execute(CHANGES[change])
    for name, sql in STATEMENTS.items():
        with pytest.raises(gd.StaleIndexError, match="StaleIndexError: .* is stale"):
            con.execute(sql).fetchall()
        with pytest.raises(duckdb.InvalidInputException):  # the same error, as DuckDB's class
            con.execute(sql).fetchall()
    if change != "alter":  # once stale, stays stale: even changing it back does not help
        other = con.cursor()
        with pytest.raises(gd.StaleIndexError):
            other.execute(STATEMENTS["per-chunk"]).fetchall()
    try:
        con.execute(STATEMENTS["per-chunk"]).fetchall()
    except gd.StaleIndexError as exc:
        fix = str(exc).split("rebuild it with ")[1].split(" (or build")[0]
    assert "src := 'src'" in fix and "labels := 3" in fix
    assert con.execute(fix).fetchall()[0][0]["action"] == "built"  # the pasted fix works
    for sql in STATEMENTS.values():
        con.execute(sql).fetchall()
    if w is not con:
        w.close()


def test_writes_elsewhere_keep_the_index_fresh(db):
    path, con = db
    con.execute("CREATE TABLE unrelated(x INTEGER)")
    con.execute("INSERT INTO unrelated VALUES (1)")
    duckdb.connect(path).execute("UPDATE unrelated SET x = 2")
    assert con.execute("SELECT reaches(1, 3), reaches(3, 1)").fetchall() == [(True, False)]
    assert con.execute(STATEMENTS["whole column"]).fetchall() == [(3,)]


def test_uncommitted_rows_of_the_calling_transaction_are_not_the_indexs(db):
    _, con = db
    con.execute("BEGIN")
    con.execute("INSERT INTO edges VALUES (3, 4)")
    assert con.execute("SELECT reaches(1, 4)").fetchall() == [(False,)]  # the committed graph
    con.execute("ROLLBACK")
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]  # still fresh
    con.execute("BEGIN")
    con.execute("INSERT INTO edges VALUES (3, 4)")
    con.execute("COMMIT")
    with pytest.raises(gd.StaleIndexError):
        con.execute("SELECT reaches(1, 3)").fetchall()


def test_auto_rebuild_answers_from_the_new_content(db):
    path, con = db
    s = con.execute("SELECT grail_index('edges', labels := 3, auto_rebuild := true)").fetchall()
    assert s[0][0]["auto_rebuild"] is True
    duckdb.connect(path).execute("INSERT INTO edges VALUES (3, 4)")
    assert con.execute("SELECT reaches(1, 4)").fetchall() == [(True,)]
    assert con.execute("SELECT count(*) FROM descendants(1)").fetchall() == [(4,)]
    con.execute("DELETE FROM edges WHERE src = 2")
    assert con.execute(STATEMENTS["whole column"]).fetchall() == [(1,)]  # only 3 reaches 3
    assert con.execute("SELECT action, edges FROM grail_indexes()").fetchall() == [("built", 2)]


def test_a_new_process_refuses_a_changed_table(tmp_path):
    path = str(tmp_path / "g.duckdb")
    con = gd.install(duckdb.connect(path))
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("SELECT grail_index('edges')").fetchall()
    con.close()
    with duckdb.connect(path) as plain:
        plain.execute("UPDATE edges SET dst = 1 WHERE src = 2")
    con = gd.install(duckdb.connect(path))
    with pytest.raises(gd.StaleIndexError):
        con.execute("SELECT reaches(1, 3)").fetchall()
    con.close()


def test_errors_name_themselves_and_say_what_to_do():
    con = gd.install(duckdb.connect())
    with pytest.raises(gd.GrailError, match=r"^GrailError: no reachability index .* grail_index\("):
        con.execute("SELECT reaches(1, 2)").fetchall()
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES ('a', 'b')) t(src, dst)")
    con.execute("SELECT grail_index('edges')").fetchall()
    with pytest.raises(gd.KeyTypeError, match=r"^KeyTypeError: .*cast"):
        con.execute("SELECT reaches(1, 2)").fetchall()
    with pytest.raises(gd.GrailError, match=r"no reachability index named '42'"):
        con.execute("SELECT reaches('a', 'b', 42)").fetchall()  # no internal macro named
    rel = con.sql("SELECT reaches(1, 2)")  # lazy: the error comes when it is fetched
    with pytest.raises(duckdb.Error) as info:
        rel.fetchall()
    assert isinstance(gd.plugin.grail_error(info.value), gd.KeyTypeError)
    con.close()
