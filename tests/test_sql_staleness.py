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


@pytest.mark.parametrize("auto_rebuild", [True, False])
def test_a_check_made_while_a_write_runs_is_made_again_once_it_is_done(auto_rebuild):
    """DuckDB's catalog version moves when a write statement starts; its rows land when it
    commits. Readers checking freshness in between (a slow autocommit INSERT of one edge)
    must not take the old table for current once the write is done: afterwards the index
    answers from the new table (auto_rebuild) or refuses."""
    import threading

    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("CREATE TABLE pairs AS SELECT range AS a, 4 AS b FROM range(5)")
    con.execute(f"SELECT grail_index('edges', auto_rebuild := {str(auto_rebuild).lower()})"
                ).fetchall()
    stop, checks = threading.Event(), []

    def read(statement):
        cur = con.cursor()
        while not stop.is_set():
            try:
                cur.execute(statement).fetchall()
            except gd.StaleIndexError:
                pass
            checks.append(1)
        cur.close()

    readers = [threading.Thread(target=read, args=(q,)) for q in (
        "SELECT reaches(1, 3)", "SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs")]
    for t in readers:
        t.start()
    while len(checks) < 4:
        pass
    con.cursor().execute("INSERT INTO edges SELECT 3, 4 FROM range(30000000) "
                         "WHERE range = 29999999")
    stop.set()
    for t in readers:
        t.join()
    if auto_rebuild:
        assert con.execute("SELECT reaches(1, 4)").fetchall() == [(True,)]
        assert con.execute("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs"
                           ).fetchall() == [(4,)]
    else:
        for statement in ("SELECT reaches(1, 4)", STATEMENTS["whole column"]):
            with pytest.raises(gd.StaleIndexError):
                con.execute(statement).fetchall()
    con.close()


def test_auto_rebuild_under_a_concurrent_writer_matches_the_table_once_writes_stop():
    """One thread inserting edges (autocommit), five querying through an auto_rebuild index:
    once the writes stop, every answer is the table's (a recursive CTE's)."""
    import threading
    import time

    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT range AS src, range + 1 AS dst FROM range(0, 200, 2)")
    con.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b "
                "FROM range(0, 60, 3) a, range(0, 60, 5) b")
    con.execute("SELECT grail_index('edges', auto_rebuild := true)").fetchall()
    stop = threading.Event()

    def read(k):
        cur = con.cursor()
        q = ("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs" if k % 2 else
             "SELECT count(*) FROM pairs WHERE reaches(a, 31)")
        while not stop.is_set():
            cur.execute(q).fetchall()
        cur.close()

    readers = [threading.Thread(target=read, args=(k,)) for k in range(5)]
    for t in readers:
        t.start()
    writer = con.cursor()
    for i in range(1, 200, 16):  # chain the pairs up: paths appear with each insert
        writer.execute("INSERT INTO edges SELECT ?, ? FROM range(3000000) "
                       "WHERE range = 2999999", [i, i + 1])  # readers check while it runs
        time.sleep(0.01)
    stop.set()
    for t in readers:
        t.join()
    reach = ("WITH RECURSIVE w(s, v) USING KEY (s, v) AS (SELECT DISTINCT a, a FROM pairs "
             "UNION SELECT w.s, e.dst FROM w JOIN edges e ON e.src = w.v) ")
    want = con.execute(reach + "SELECT count(*) FROM pairs p WHERE (p.a, p.b) IN "
                               "(SELECT (s, v) FROM w)").fetchall()
    assert con.execute("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs").fetchall() == want
    with gd.per_chunk(con):
        assert con.execute("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs"
                           ).fetchall() == want
    con.close()
