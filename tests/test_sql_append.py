"""Living edge tables through SQL (grail_duckdb.plugin.appends): an INSERT of new papers into an
indexed table is absorbed by the next statement on every connection, persisted as a part, read
back by a reopened database; the check after a write proves "append only" from DuckDB's log
without scanning the table, falls back to the scan otherwise, and a change that is not an
append makes the index stale with an error that names it. The DuckDB facts the proof rests on
are checked here too."""
from __future__ import annotations

import threading
import time

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.indexfile.appends import parts_of
from grail_duckdb.plugin import appends, duckdb_api, hooks
from grail_duckdb.plugin.staleness import table_check
from oracle import bfs_pairs

BASE = [(i, i + 1) for i in range(20)] + [(3, 10), (15, 2)]


def _connect(path):
    con = gd.install(duckdb.connect(path))
    con.execute("SET threads = 1")
    return con


def _chain(tmp_path, monkeypatch, n: int, share: float = 100.0):
    """A file database whose table e is the chain 0 -> 1 -> ... -> n, indexed with 2 labels,
    its parts compacted past ``share`` of the index (100: never)."""
    monkeypatch.setattr(appends, "COMPACT_SHARE", share)
    path = str(tmp_path / "g.duckdb")
    con = _connect(path)
    con.execute(f"CREATE TABLE e AS SELECT range AS src, range + 1 AS dst FROM range({n})")
    con.execute("SELECT grail_index('e', labels := 2)").fetchall()
    return con, path


def _edges(con):
    return con.execute("SELECT src, dst FROM e").fetchall()


def _check(con, n=72):
    """Every pair of 0..n against a BFS of the table's current rows."""
    rows = _edges(con)
    src, dst = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    ids = np.arange(n)
    qs, qt = np.repeat(ids, n), np.tile(ids, n)
    want = bfs_pairs(src, dst, n, qs, qt)
    known = np.isin(ids, np.concatenate([src, dst]))
    want = (want & known[qs] & known[qt]) | (qs == qt)
    con.execute("CREATE OR REPLACE TEMP TABLE q AS SELECT * FROM "
                "(SELECT unnest($1) AS a, unnest($2) AS b)", [qs.tolist(), qt.tolist()])
    got = np.array([r[0] for r in con.execute("SELECT reaches(a, b) FROM q").fetchall()])
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:5]


@pytest.fixture(params=["memory", "file"])
def db(request, tmp_path, monkeypatch):
    monkeypatch.setattr(appends, "COMPACT_SHARE", 100.0)
    path = ":memory:" if request.param == "memory" else str(tmp_path / "g.duckdb")
    con = _connect(path)
    con.execute("CREATE TABLE e (src BIGINT, dst BIGINT)")
    con.executemany("INSERT INTO e VALUES (?, ?)", BASE)
    con.execute("SELECT grail_index('e', labels := 2)").fetchall()
    yield path, con
    con.close()


def _summary(con):
    return con.execute("SELECT action, vertices, edges, note FROM grail_index('e', labels := 2)"
                       ).fetchall()[0]


@settings(max_examples=5)
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 69)),
                                 min_size=1, max_size=6), min_size=1, max_size=3))
def test_inserted_papers_are_absorbed(tmp_path_factory, monkeypatch, batches):
    monkeypatch.setattr(appends, "COMPACT_SHARE", 100.0)  # no compaction: parts stay
    path = str(tmp_path_factory.mktemp("live") / "g.duckdb")
    con = _connect(path)
    con.execute("CREATE TABLE e (src BIGINT, dst BIGINT)")
    con.executemany("INSERT INTO e VALUES (?, ?)", BASE)
    con.execute("SELECT grail_index('e', labels := 2)").fetchall()
    top = 30
    for batch in batches:  # new papers 30, 31, ... citing anything so far (or each other)
        rows = [(top + a, min(b, top + 9)) for a, b in batch]
        top += 10  # ids up to 59
        con.executemany("INSERT INTO e VALUES (?, ?)", rows)
        _check(con)
        assert _summary(con)[0] == "appended"
    appends.wait_for_parts()
    assert len(parts_of(f"{path}.e.grail.parquet")) == len(batches)
    con.close()
    con = _connect(path)  # a reopened database: the file and its parts, no rebuild
    assert _summary(con)[0] == "loaded"
    _check(con)
    con.close()


def test_every_connection_sees_the_append(db):
    path, con = db
    other = con.cursor()
    other.execute("INSERT INTO e VALUES (50, 7), (51, 50), (51, 51)")
    assert other.execute("SELECT reaches(51, 20), reaches(7, 50)").fetchall() == [(True, False)]
    assert con.execute("SELECT reaches(50, 8)").fetchall() == [(True,)]
    action, vertices, edges, note = _summary(con)
    assert action == "appended" and vertices == 23 and edges == 25
    assert "+2 vertices, +3 edges" in note
    if path != ":memory:":
        writer = duckdb.connect(path)  # a connection grail_duckdb is not installed on
        writer.execute("INSERT INTO e VALUES (60, 51)")
        writer.close()
        assert con.execute("SELECT reaches(60, 0), reaches(60, 8)").fetchall() == [(False, True)]


CHANGES = {
    "delete": ("DELETE FROM e WHERE src = 5", "rows were deleted"),
    "update": ("UPDATE e SET dst = 0 WHERE src = 5", "rows were updated"),
    "replace": ("CREATE OR REPLACE TABLE e AS SELECT * FROM e", "replaced or altered"),
    "alter": ("ALTER TABLE e ADD COLUMN w INTEGER", "replaced or altered"),
    "held source": ("INSERT INTO e VALUES (19, 0)", "leaves a vertex the index holds"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_other_changes_name_themselves(db, change):
    path, con = db
    con.execute("INSERT INTO e VALUES (70, 1)")  # an append first: absorbed
    assert con.execute("SELECT reaches(70, 5)").fetchall() == [(True,)]
    sql, words = CHANGES[change]
    con.execute(sql)
    with pytest.raises(gd.StaleIndexError, match=words):
        con.execute("SELECT reaches(1, 3)").fetchall()
    con.execute("SELECT grail_index('e', rebuild := true)").fetchall()
    _check(con)


def test_auto_rebuild_lasts_across_processes(tmp_path):
    path = str(tmp_path / "g.duckdb")
    con = _connect(path)
    con.execute("CREATE TABLE e AS SELECT range AS src, range + 1 AS dst FROM range(10)")
    con.execute("SELECT grail_index('e', auto_rebuild := true)").fetchall()
    con.close()
    con = _connect(path)
    assert con.execute("SELECT auto_rebuild, action FROM grail_index('e')").fetchall() == [
        (True, "loaded")]
    con.execute("SELECT grail_index('e', auto_rebuild := false)").fetchall()  # a settings part
    con.close()
    con = _connect(path)
    con.execute("SELECT reaches(1, 2)").fetchall()
    assert con.execute("SELECT auto_rebuild FROM grail_indexes()").fetchall() == [(False,)]
    con.execute("UPDATE e SET dst = 0 WHERE src = 3")
    with pytest.raises(gd.StaleIndexError):
        con.execute("SELECT reaches(1, 2)").fetchall()
    con.close()


def test_a_part_is_written_once_its_statement_has_ended(tmp_path, monkeypatch):
    """The part of a batch absorbed inside a statement is written after that statement
    (no write beside it), and it is the batch: a reopened database reads it back."""
    con, path = _chain(tmp_path, monkeypatch, 30)
    seen = {}
    absorb, save = appends.absorb, gd.GrailIndex.save_parts

    def absorbing(*a, **kw):
        seen["during"] = hooks.statements_in_flight()
        return absorb(*a, **kw)

    def saving(self, *a, **kw):
        seen["at write"] = hooks.statements_in_flight()
        return save(self, *a, **kw)

    monkeypatch.setattr(appends, "absorb", absorbing)
    monkeypatch.setattr(gd.GrailIndex, "save_parts", saving)
    con.execute("INSERT INTO e VALUES (100, 3), (101, 100)")
    assert con.execute("SELECT reaches(101, 30), reaches(3, 101)").fetchall() == [(True, False)]
    appends.wait_for_parts()
    assert seen["during"] and not seen["during"] & seen["at write"]
    assert len(parts_of(f"{path}.e.grail.parquet")) == 1
    con.close()
    con = _connect(path)
    assert _summary(con)[0] == "loaded"
    assert con.execute("SELECT reaches(101, 30), reaches(3, 101)").fetchall() == [(True, False)]
    con.close()


def test_a_held_write_waits_no_longer_than_asked():
    """A write waits for the statements it names at most its limit, and not at all once told
    to hurry (a wait for the parts inside a statement does not wait for that statement)."""
    token = object()
    hooks._running(token, True)
    try:
        t0 = time.perf_counter()
        hooks.wait_for_statements(frozenset([token]), 0.05)
        assert 0.05 <= time.perf_counter() - t0 < 5
        hurry = threading.Event()
        waiter = threading.Thread(target=hooks.wait_for_statements,
                                  args=(frozenset([token]), 60, hurry.is_set))
        waiter.start()
        hurry.set()
        hooks.nudge()
        waiter.join(10)
        assert not waiter.is_alive()
    finally:
        hooks._running(token, False)
    hooks.wait_for_statements(frozenset([token]), 60)  # ended: no wait


def test_compaction_folds_the_parts_in_the_background(tmp_path, monkeypatch):
    con, path = _chain(tmp_path, monkeypatch, 20, share=0.1)
    con.execute("INSERT INTO e VALUES (100, 3), (101, 100), (102, 5)")
    assert con.execute("SELECT reaches(101, 9)").fetchall() == [(True,)]  # absorbed, then 15%
    deadline = time.time() + 60
    summary = "SELECT action, edges, note FROM grail_index('e', labels := 2)"
    while time.time() < deadline and con.execute(summary).fetchall()[0][2] is not None:
        time.sleep(0.2)  # the rebuilt index takes the appended one's place when it is ready
    assert con.execute(summary).fetchall() == [("cached", 23, None)]
    assert parts_of(f"{path}.e.grail.parquet") == []
    con.execute("INSERT INTO e VALUES (103, 101)")
    assert con.execute("SELECT reaches(103, 9)").fetchall() == [(True,)]
    con.close()


# --- the check's proof and its fallback --------------------------------------------------------
def _change(con, name="e"):
    """The check's finding for the index, run as the registry would."""
    reg = gd.plugin.registry_of(con)
    entry = reg.entries[name]
    cur = reg.cursor(quiet=False)
    try:
        return appends.changes(cur, entry, entry.tracker)
    finally:
        cur.close()


def test_the_log_proves_an_append_in_a_file_database(tmp_path, monkeypatch):
    con, _ = _chain(tmp_path, monkeypatch, 1000)
    con.execute("CREATE TABLE other (x INTEGER)")
    con.execute("INSERT INTO e VALUES (5000, 3), (5001, 5000)")
    con.execute("INSERT INTO other VALUES (1)")
    con.execute("UPDATE other SET x = 2")  # another table's UPDATE changes nothing here
    found = _change(con)
    assert (found.kind, found.proof, found.rows.num_rows) == ("append", "log", 2)
    assert con.execute("SELECT reaches(5001, 999)").fetchall() == [(True,)]
    assert _change(con).kind == "none"
    con.execute("INSERT INTO e SELECT range + 10000, range FROM range(200000)")  # optimistic
    found = _change(con)
    assert (found.kind, found.proof, found.rows.num_rows) == ("append", "log", 200000)
    con.execute("UPDATE e SET dst = 7 WHERE src = 5")
    found = _change(con)
    assert (found.kind, found.proof, found.reason) == ("stale", "scan", "rows were updated (UPDATE)")
    con.close()


def test_the_log_proofs_check_is_the_tables(tmp_path, monkeypatch):
    """The check an append through the log leaves (rows and hash summed from the new rows'
    hashes) equals a scan of the whole table, over batches of several Arrow chunks."""
    con, _ = _chain(tmp_path, monkeypatch, 100)
    reg = gd.plugin.registry_of(con)
    for sql in ("INSERT INTO e VALUES (500, 3), (501, 500), (501, 500)",
                "INSERT INTO e SELECT range + 1000, range % 97 FROM range(300000)"):
        con.execute(sql)
        found = _change(con)
        assert (found.kind, found.proof) == ("append", "log")
        cur = reg.cursor(quiet=False)
        try:
            want = table_check(cur, "e", "src", "dst")
        finally:
            cur.close()
        assert (found.check["rows"], found.check["hash"]) == (want["rows"], want["hash"])
    assert con.execute("SELECT reaches(501, 99), reaches(1097, 0), reaches(0, 1097)"
                       ).fetchall() == [(True, True, False)]
    con.close()


def test_a_checkpoint_sends_the_check_to_the_scan(tmp_path, monkeypatch):
    con, _ = _chain(tmp_path, monkeypatch, 100)
    con.execute("INSERT INTO e VALUES (500, 3)")
    con.execute("CHECKPOINT")
    found = _change(con)
    assert (found.kind, found.proof) == ("append", "scan")
    assert con.execute("SELECT reaches(500, 99)").fetchall() == [(True,)]
    con.execute("INSERT INTO e VALUES (501, 500)")  # the scan gave the log back its mark
    assert (_change(con).kind, _change(con).proof) == ("append", "log")
    con.close()


def test_duckdb_numbers_rows_at_commit(tmp_path):
    """Fact 1: rows of a transaction that commits later get higher row ids."""
    con = duckdb.connect(str(tmp_path / "g.duckdb"))
    con.execute("CREATE TABLE e AS SELECT range AS src, range AS dst FROM range(1000)")
    early, late = con.cursor(), con.cursor()
    early.execute("BEGIN")
    early.execute("INSERT INTO e VALUES (-1, -1), (-1, -1)")
    late.execute("INSERT INTO e VALUES (-2, -2)")
    early.execute("COMMIT")
    assert con.execute("SELECT src, rowid FROM e WHERE src < 0 ORDER BY rowid").fetchall() == [
        (-2, 1000), (-1, 1001), (-1, 1002)]
    con.close()


def test_the_guard_holds_off_checkpoints(tmp_path):
    """Fact 3: the check's UPDATE of no row keeps DuckDB from checkpointing until it ends."""
    con = duckdb.connect(str(tmp_path / "g.duckdb"))
    con.execute("CREATE TABLE e AS SELECT range AS src, range AS dst FROM range(10)")
    cur, other = con.cursor(), con.cursor()
    with appends._checking(cur, "e", "src") as guarded:
        assert guarded
        with pytest.raises(duckdb.TransactionException, match="CHECKPOINT"):
            other.execute("CHECKPOINT")
    other.execute("CHECKPOINT")
    con.close()


@pytest.mark.parametrize("sql,what", [
    ("INSERT INTO e VALUES (1, 2)", "appends"),
    ("INSERT INTO e SELECT range, range FROM range(300000)", "appends"),
    ("UPDATE e SET dst = 5 WHERE src = 1", "rows updated"),
    ("DELETE FROM e WHERE src = 1", "rows deleted"),
    ("TRUNCATE e", "rows deleted"),
    ("UPDATE f SET x = 1", "appends"),
    ("ALTER TABLE f ADD COLUMN y INTEGER", "table altered"),
])
def test_the_log_names_what_a_commit_did(tmp_path, sql, what):
    """Fact 4, on DuckDB's own log."""
    path = tmp_path / "g.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE e AS SELECT range AS src, range AS dst FROM range(10)")
    con.execute("CREATE TABLE f AS SELECT 1 AS x")
    con.execute("CHECKPOINT")
    wal = tmp_path / "g.duckdb.wal"
    _, start = duckdb_api.read_log(wal, 0, ("main", "e"))
    con.execute(sql)
    assert duckdb_api.read_log(wal, start, ("main", "e"))[0] == what
    con.close()


def test_a_check_adds_its_own_catalog_versions(tmp_path):
    con = duckdb.connect(str(tmp_path / "g.duckdb"))
    con.execute("CREATE TABLE e AS SELECT range AS src, range AS dst FROM range(10)")
    cur = con.cursor()
    before = con._catalog_version()
    with appends._checking(cur, "e", "src"):
        cur.execute("SELECT count(*) FROM e").fetchall()
    assert con._catalog_version() - before == appends.CHECK_VERSIONS
    con.close()


def test_concurrent_appends_stay_exact(tmp_path, monkeypatch):
    con, _ = _chain(tmp_path, monkeypatch, 50)
    errors = []

    def writer(k):
        try:
            w = con.cursor()
            for i in range(15):
                w.execute("INSERT INTO e VALUES (?, ?)", [1000 * (k + 1) + i, i])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for _ in range(20):
        con.execute("SELECT reaches(1000, 50)").fetchall()
    for t in threads:
        t.join()
    assert not errors
    got = con.execute("SELECT count(*) FILTER (WHERE reaches(src, 50)) FROM e "
                      "WHERE src >= 1000").fetchall()
    assert got == [(45,)]
    assert con.execute("SELECT edges FROM grail_index('e', labels := 2)").fetchall() == [(95,)]
    con.close()
