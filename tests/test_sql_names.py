"""Names mean what they mean on the calling connection: an index reads exactly the relation
its caller's session resolves (``USE``, ``search_path``), refuses what it cannot read as the
caller does (TEMP objects, views of session variables), and never takes the name of another
table's index."""
from __future__ import annotations

import duckdb
import pytest

import grail_duckdb as gd
from grail_duckdb.plugin import registry as _registry

PATH = "(VALUES (1, 2), (2, 3)) t(src, dst)"
OTHER = "(VALUES (5, 6)) t(src, dst)"


@pytest.fixture
def con():
    c = gd.install(duckdb.connect())
    yield c
    c.close()


def test_use_of_an_attached_database(con):
    con.execute("ATTACH ':memory:' AS x")
    con.execute(f"CREATE TABLE x.e AS SELECT * FROM {PATH}")
    con.execute(f"CREATE TABLE main.e AS SELECT * FROM {OTHER}")
    con.execute("USE x")
    summary = con.execute("SELECT grail_index('e')").fetchall()[0][0]
    assert (summary["edges"], summary["table_name"]) == (2, "x.main.e")
    assert con.execute("SELECT reaches(1, 3), reaches(5, 6)").fetchall() == [(True, False)]
    con.execute("USE memory")  # the index keeps reading x.e, as it was resolved
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
    con.execute("INSERT INTO x.e VALUES (3, 4)")
    with pytest.raises(gd.StaleIndexError, match="x.main.e"):
        con.execute("SELECT reaches(1, 4)").fetchall()


def test_search_path(con):
    con.execute("CREATE SCHEMA s")
    con.execute(f"CREATE TABLE s.e AS SELECT * FROM {PATH}")
    con.execute(f"CREATE TABLE main.e AS SELECT * FROM {OTHER}")
    con.execute("SET search_path = 's'")
    assert con.execute("SELECT grail_index('e').table_name").fetchall() == [("s.e",)]
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]


def test_python_build_resolves_on_the_connection(con):
    con.execute("CREATE SCHEMA s")
    con.execute(f"CREATE TABLE s.e AS SELECT * FROM {PATH}")
    con.execute(f"CREATE TABLE main.e AS SELECT * FROM {OTHER}")
    con.execute("USE memory.s")
    assert gd.plugin.build(con, "e")["edges"] == 2
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]


def test_a_view_of_session_variables_is_refused_with_the_way_around(con):
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 2, 1), (2, 3, 1), (3, 4, 2)) "
                "t(src, dst, g)")
    con.execute("SET VARIABLE g = 1")
    con.execute("CREATE VIEW v AS SELECT src, dst FROM t WHERE g = getvariable('g')")
    con.execute("CREATE VIEW w AS SELECT * FROM v")  # through another view too
    assert con.execute("SELECT count(*) FROM w").fetchall() == [(2,)]
    for name in ("v", "w"):
        with pytest.raises(gd.EdgeInputError, match=r"getvariable.*CREATE TABLE"):
            con.execute(f"SELECT grail_index('{name}')").fetchall()
    con.execute("CREATE TABLE v_edges AS SELECT * FROM v")  # the way around works
    assert con.execute("SELECT grail_index('v_edges').edges").fetchall() == [(2,)]


def test_a_temp_table_of_the_caller_is_refused_not_shadowed(con):
    con.execute(f"CREATE TABLE e AS SELECT * FROM {OTHER}")
    con.execute(f"CREATE TEMP TABLE e AS SELECT * FROM {PATH}")
    with pytest.raises(gd.EdgeInputError, match="TEMP.*CREATE TABLE"):
        con.execute("SELECT grail_index('e')").fetchall()
    assert con.execute("SELECT grail_index('main.e').edges").fetchall() == [(1,)]


def test_another_tables_index_is_not_replaced(con):
    con.execute("CREATE SCHEMA s1; CREATE SCHEMA s2")
    con.execute(f"CREATE TABLE s1.e AS SELECT * FROM {PATH}")
    con.execute("CREATE TABLE s2.e AS SELECT * FROM (VALUES (3, 2), (2, 1)) t(src, dst)")
    con.execute("SELECT grail_index('s1.e')").fetchall()
    for rebuild in ("false", "true"):
        with pytest.raises(gd.GrailError, match=r"already indexes s1\.e.*name := 's2_e'"):
            con.execute(f"SELECT grail_index('s2.e', rebuild := {rebuild})").fetchall()
    assert con.execute("SELECT reaches(1, 3, 'e')").fetchall() == [(True,)]
    assert con.execute("SELECT grail_index('s2.e', name := 's2_e').action").fetchall() == [
        ("built",)]
    assert con.execute("SELECT reaches(1, 3, 'e'), reaches(3, 1, 's2_e')").fetchall() == [
        (True, True)]
    with pytest.raises(gd.GrailError, match="rebuild := true"):
        con.execute("SELECT grail_index('s2.e', name := 'e')").fetchall()
    con.execute("SELECT grail_index('s2.e', name := 'e', rebuild := true)").fetchall()
    assert con.execute("SELECT reaches(1, 3, 'e'), reaches(3, 1, 'e')").fetchall() == [
        (False, True)]  # replaced, as asked


def test_another_tables_index_file_is_not_replaced(tmp_path):
    path = str(tmp_path / "g.duckdb")
    con = gd.install(duckdb.connect(path))
    con.execute("CREATE SCHEMA s1; CREATE SCHEMA s2")
    con.execute(f"CREATE TABLE s1.e AS SELECT * FROM {PATH}")
    con.execute("CREATE TABLE s2.e AS SELECT * FROM (VALUES (3, 2), (2, 1)) t(src, dst)")
    con.execute("SELECT grail_index('s1.e')").fetchall()
    con.close()
    _registry._REGISTRIES.clear()
    con = gd.install(duckdb.connect(path))
    with pytest.raises(gd.GrailError, match=r"already indexes s1\.e"):
        con.execute("SELECT grail_index('s2.e')").fetchall()
    assert con.execute("SELECT reaches(1, 3, 'e')").fetchall() == [(True,)]
    con.close()


@pytest.mark.parametrize("reader", ["'{f}.parquet'", "read_parquet('{f}.parquet')",
                                    "read_csv('{f}.csv')", "read_csv('{d}/*.csv')"])
def test_a_view_over_files_is_refused_with_the_way_around(con, tmp_path, reader):
    """Rewriting a file moves no catalog version: an index of a view over files could not
    tell that it is stale (reaches(1, 3) stayed false after the file gained 1 -> 2 -> 3).
    The view is refused, and the message's way around works."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "e"
    pq.write_table(pa.table({"src": [1], "dst": [2]}), f"{f}.parquet")
    (tmp_path / "e.csv").write_text("src,dst\n1,2\n")
    con.execute(f"CREATE VIEW ev AS SELECT * FROM {reader.format(f=f, d=tmp_path)}")
    with pytest.raises(gd.EdgeInputError, match=r"does not track.*CREATE TABLE ev_edges AS"):
        con.execute("SELECT grail_index('ev')").fetchall()
    con.execute("CREATE TABLE ev_edges AS SELECT * FROM ev")
    assert con.execute("SELECT grail_index('ev_edges').edges").fetchall() == [(1,)]
    con.execute("CREATE VIEW ok AS SELECT range AS src, range + 1 AS dst FROM range(3) "
                "UNION ALL SELECT * FROM ev_edges")  # fixed rows and tables: indexed
    assert con.execute("SELECT grail_index('ok').edges").fetchall() == [(4,)]


def test_a_view_that_starts_reading_files_is_stale(con, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"src": [1, 2], "dst": [2, 3]}), tmp_path / "e.parquet")
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("CREATE VIEW v AS SELECT * FROM t")
    con.execute("SELECT grail_index('v')").fetchall()
    con.execute(f"CREATE OR REPLACE VIEW v AS SELECT * FROM '{tmp_path}/e.parquet'")
    with pytest.raises(gd.StaleIndexError):
        con.execute("SELECT reaches(1, 3)").fetchall()
