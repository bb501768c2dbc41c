"""Index files and key types from SQL (issue 11, items 2, 3, 6, 7, 8, 13): files named after
the whole database file name, recorded and checked on load; renamed, copied and ATTACHed
databases; a folder that cannot be written; types and collations no index has."""
from __future__ import annotations

import shutil
import warnings

import duckdb
import pytest

import grail_duckdb as gd
from grail_duckdb.plugin import files


def database(path, edges, name="cites"):
    con = gd.install(duckdb.connect(str(path)))
    con.execute("CREATE OR REPLACE TABLE edges(src BIGINT, dst BIGINT)")
    con.executemany("INSERT INTO edges VALUES (?, ?)", edges)
    con.execute(f"SELECT grail_index('edges', name := '{name}')").fetchall()
    return con


def reopen(path):
    return gd.install(duckdb.connect(str(path)))


def test_databases_of_one_folder_never_share_files(tmp_path):
    a = database(tmp_path / "x.duckdb", [(1, 2)])
    b = database(tmp_path / "x.db", [(2, 1)])
    c = database(tmp_path / "x.y.duckdb", [(1, 2), (2, 3)], name="other")
    for con in (a, b, c):
        con.close()
    assert sorted(p.name for p in tmp_path.glob("*.grail.parquet")) == [
        "x.db.cites.grail.parquet", "x.duckdb.cites.grail.parquet",
        "x.y.duckdb.other.grail.parquet"]
    assert files.persisted_names(tmp_path / "x.duckdb") == ["cites"]  # no phantom 'other'
    a, b = reopen(tmp_path / "x.duckdb"), reopen(tmp_path / "x.db")
    assert a.execute("SELECT reaches(1, 2), reaches(2, 1)").fetchall() == [(True, False)]
    assert b.execute("SELECT reaches(1, 2), reaches(2, 1)").fetchall() == [(False, True)]
    a.close()
    b.close()


def test_a_file_copied_over_another_index_is_refused(tmp_path):
    con = database(tmp_path / "x.duckdb", [(1, 2)], name="a")
    con.execute("CREATE TABLE other AS SELECT 2 AS src, 1 AS dst")
    con.execute("SELECT grail_index('other', name := 'b')").fetchall()
    con.close()
    shutil.copy(tmp_path / "x.duckdb.a.grail.parquet", tmp_path / "x.duckdb.b.grail.parquet")
    con = reopen(tmp_path / "x.duckdb")
    with pytest.raises(gd.IndexFileError, match="holds the index 'a'") as info:
        con.execute("SELECT reaches(1, 2, 'b')").fetchall()
    fix = str(info.value).split("indexes: ")[1]  # the fix names 'b', never a's table
    assert "name := 'b', rebuild := true" in fix and "edges" not in fix
    assert con.execute("SELECT reaches(1, 2, 'a')").fetchall() == [(True,)]
    con.execute(fix.replace("<its edge table>", "other")).fetchall()
    assert con.execute("SELECT reaches(2, 1, 'b'), reaches(1, 2, 'b')").fetchall() == [
        (True, False)]
    con.close()


def test_an_index_file_of_other_label_pairs_is_loaded_unless_they_are_named(tmp_path):
    """The backends' default label pairs differ (a file built on a GPU has 9, the CPU builds
    3): a grail_index that names none loads the file as it is; one that names other pairs
    builds them."""
    path = tmp_path / "x.duckdb"
    con = gd.install(duckdb.connect(str(path)))
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    gpu_default = gd.DEFAULT_LABELS["gpu"]
    con.execute(f"SELECT grail_index('edges', labels := {gpu_default})").fetchall()
    con.close()
    con = reopen(path)
    row = con.execute("SELECT action, labels FROM grail_index('edges')").fetchall()
    assert row == [("loaded", gpu_default)]
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
    row = con.execute("SELECT action, labels FROM grail_index('edges', labels := 2)").fetchall()
    assert row == [("built", 2)]
    con.close()


def test_a_renamed_database_finds_its_index_and_a_changed_copy_says_why_not(tmp_path):
    database(tmp_path / "x.duckdb", [(1, 2), (2, 3)]).close()
    (tmp_path / "x.duckdb").rename(tmp_path / "y.duckdb")
    con = reopen(tmp_path / "y.duckdb")
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
    assert "x.duckdb.cites.grail.parquet" in con.execute(
        "SELECT note FROM grail_indexes()").fetchall()[0][0]
    con.execute("INSERT INTO edges VALUES (3, 4)")
    con.close()
    shutil.copy(tmp_path / "y.duckdb", tmp_path / "z.duckdb")
    con = reopen(tmp_path / "z.duckdb")
    with pytest.raises(gd.GrailError, match="belong to other tables or content"):
        con.execute("SELECT reaches(1, 3, 'cites')").fetchall()
    con.close()


def test_an_attached_database_keeps_its_indices_beside_its_file(tmp_path):
    con = gd.install(duckdb.connect())
    con.execute(f"ATTACH '{tmp_path / 'o.duckdb'}' AS o")
    con.execute("CREATE TABLE o.edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    s = con.execute("SELECT grail_index('o.edges', name := 'oe')").fetchall()[0][0]
    assert s["path"] == str(tmp_path / "o.duckdb.oe.grail.parquet")
    con.close()
    con = gd.install(duckdb.connect())
    con.execute(f"ATTACH '{tmp_path / 'o.duckdb'}' AS o")
    assert con.execute("SELECT reaches(1, 3, 'oe')").fetchall() == [(True,)]
    con.close()


def test_an_unwritable_folder_keeps_the_index_in_memory_and_says_so():
    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2)) t(src, dst)")
    with pytest.warns(files.GrailWarning, match="path :="):
        s = con.execute("SELECT grail_index('edges', path := '/proc/none/x.grail.parquet')"
                        ).fetchall()[0][0]
    assert s["path"] is None and "cannot be written" in s["note"]
    assert con.execute("SELECT reaches(1, 2)").fetchall() == [(True,)]
    con.close()


def test_grail_index_writes_its_file_as_the_build_goes(tmp_path, monkeypatch):
    """SQL's build takes the ETL path: the writer (with the table's description) is opened
    before the build, the children are written during the labels, and the save is the
    build's last phase; the file reopens (loaded, not rebuilt) to the same answers."""
    from grail_duckdb.plugin import registry
    seen = []

    def spy(*args, **kwargs):
        seen.append(registry.build_index.__wrapped__(*args, **kwargs))
        assert isinstance(kwargs["save_to"], gd.indexfile.IndexWriter)
        return seen[-1]

    spy.__wrapped__ = registry.build_index
    monkeypatch.setattr(registry, "build_index", spy)
    path = tmp_path / "p.duckdb"
    con = database(path, [(1, 2), (2, 3), (3, 1), (3, 4)])
    assert list(seen[0].build_seconds)[-1] == "save"
    con.close()
    con = reopen(path)
    s = con.execute("SELECT grail_index('edges', name := 'cites')").fetchall()[0][0]
    assert s["action"] == "loaded"
    got = con.execute("SELECT reaches(a, b, 'cites') FROM (VALUES (1, 4), (4, 1), (2, 1)) "
                      "t(a, b)").fetchall()
    assert got == [(True,), (False,), (True,)]
    con.close()


@pytest.mark.parametrize("fails", ["region", "groups"])
def test_a_full_disk_during_the_build_keeps_the_index_in_memory(tmp_path, monkeypatch, fails):
    """The file fails while the build writes it (children during the labels, or label columns
    after): the index is kept in memory with a note and a warning, answers, and the old file
    is as it was."""
    import errno

    from grail_duckdb.indexfile import writer as persistence
    path = tmp_path / "p.duckdb"
    con = database(path, [(1, 2)])
    index_file = files.index_path_for(path, "cites")
    before = index_file.read_bytes()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(persistence._Writer if fails == "region" else persistence.IndexWriter,
                        "write" if fails == "region" else "_write_groups", full)
    con.execute("INSERT INTO edges VALUES (2, 3)")
    with pytest.warns(files.GrailWarning, match="kept in memory"):
        s = con.execute("SELECT grail_index('edges', name := 'cites', rebuild := true)"
                        ).fetchall()[0][0]
    monkeypatch.undo()
    assert s["path"] is None and "No space left" in s["note"] and s["action"] == "built"
    assert con.execute("SELECT reaches(1, 3, 'cites')").fetchall() == [(True,)]
    assert index_file.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    con.close()


def test_a_file_that_is_not_an_index_is_never_overwritten(tmp_path):
    path = tmp_path / "data.duckdb"
    con = gd.install(duckdb.connect(str(path)))
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2)) t(src, dst)")
    user = tmp_path / "data.parquet"
    con.execute(f"COPY edges TO '{user}'")
    before = user.read_bytes()
    for target in (path, user):
        with pytest.raises(gd.GrailError, match="not a grail_duckdb index file"):
            con.execute("SELECT grail_index('edges', path := $p, rebuild := true)",
                        {"p": str(target)}).fetchall()
    assert user.read_bytes() == before
    con.close()
    assert duckdb.connect(str(path)).execute("SELECT count(*) FROM edges").fetchall() == [(1,)]


@pytest.mark.parametrize("ddl,message", [
    ("src VARCHAR COLLATE NOCASE, dst VARCHAR", "collation NOCASE"),
    ("src HUGEINT, dst HUGEINT", "is HUGEINT"),
    ("src DOUBLE, dst DOUBLE", "is DOUBLE"),
])
def test_key_types_no_index_has_are_refused_by_their_duckdb_names(ddl, message):
    con = gd.install(duckdb.connect())
    con.execute(f"CREATE TABLE edges({ddl})")
    with pytest.raises(gd.EdgeInputError, match=message):
        con.execute("SELECT grail_index('edges')").fetchall()
    con.close()


def test_list_form_and_summary_names():
    con = gd.install(duckdb.connect())
    con.execute('CREATE TABLE "My Edges"("From" BIGINT, "To" BIGINT)')
    con.execute('INSERT INTO "My Edges" VALUES (1, 2), (2, 3)')
    s = con.execute("""SELECT grail_index('"My Edges"', src := '"From"', dst := '"To"', name := 'm')"""
                    ).fetchall()[0][0]
    assert (s["table_name"], s["src"], s["dst"]) == ("My Edges", "From", "To")
    assert con.execute("SELECT reaches_list(NULL, [4]), reaches_list([1, 3], [3, 1]), "
                       "reaches_list([], [])").fetchall() == [(None, [True, False], [])]
    with pytest.raises(duckdb.Error, match="labels must be from 1 to 64"):
        con.execute("SELECT grail_index('\"My Edges\"', src := '\"From\"', dst := '\"To\"', "
                    "name := 'm', labels := 50000)").fetchall()
    con.close()


def test_warnings_do_not_escape_normal_use():
    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2)) t(src, dst)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        con.execute("SELECT grail_index('edges')").fetchall()
    con.close()
