"""Every DuckDB internal the plugin relies on (:mod:`grail_duckdb.plugin.duckdb_api`) does what
the plugin expects of it, one test each; a DuckDB that lacks one is refused with a message
that names it and the DuckDB version; the installed DuckDB is one the project declares."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from grail_duckdb.plugin import duckdb_api

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def con():
    c = duckdb.connect()
    yield c
    c.close()


def test_the_installed_duckdb_is_within_the_declared_bounds():
    declared = re.search(r'"duckdb(>=[^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f"duckdb{declared}" == duckdb_api.SUPPORTED
    low, high = re.fullmatch(r">=([\d.]+),<([\d.]+)", declared).groups()
    version = tuple(int(x) for x in duckdb.__version__.split(".")[:3])
    assert tuple(map(int, low.split("."))) <= version < tuple(map(int, high.split(".")))


def test_check_passes_on_this_duckdb():
    duckdb_api.check()


def test_a_missing_internal_is_named_with_the_version(monkeypatch):
    cls = duckdb_api.connection_class()
    monkeypatch.delattr(cls, "_catalog_version")
    with pytest.raises(duckdb_api.MissingInternalError) as info:
        duckdb_api.check()
    text = str(info.value)
    assert "DuckDBPyConnection._catalog_version" in text and duckdb.__version__ in text
    assert duckdb_api.SUPPORTED in text


def test_bind_gives_columns_and_types_without_running(con):
    con.execute("CREATE TABLE t(a INTEGER, b VARCHAR)")
    bound = duckdb_api.bind(con, "SELECT a, b || 'x' AS c FROM t WHERE a > $lo",
                            values={"lo": 3})
    assert bound.names == ["a", "c"] and [str(t) for t in bound.types] == ["INTEGER", "VARCHAR"]
    with pytest.raises(duckdb.Error):
        duckdb_api.bind(con, "SELECT nope FROM t")
    duckdb_api.bind(con, "INSERT INTO t VALUES (1, 'x')")
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(0,)]  # nothing ran


def test_bind_captures_the_callers_python_variables(con):
    my_table = pa.table({"k": [1, 2, 3]})  # noqa: F841 (read by DuckDB)
    bound = duckdb_api.bind(con, "SELECT k FROM my_table", capture=True)
    (name, handle), = bound.captured
    assert name == "my_table"
    assert con.execute(f'SELECT sum(k) FROM "{handle.name}"').fetchall() == [(6,)]


def test_register_source_is_readable_while_its_handle_lives(con):
    handle = duckdb_api.register_source(con, pa.table({"x": [5, 7]}))
    assert handle.name.startswith("__duckdb_source_")
    assert con.execute(f'SELECT sum(x) FROM "{handle.name}"').fetchall() == [(12,)]
    assert con.cursor().execute(f'SELECT count(*) FROM "{handle.name}"').fetchall() == [(2,)]


def test_catalog_version_counts_writes_of_the_database(con):
    v0 = duckdb_api.catalog_version(con)
    con.execute("SELECT 1").fetchall()
    assert duckdb_api.catalog_version(con) == v0
    con.execute("CREATE TABLE t(a INTEGER)")
    v1 = duckdb_api.catalog_version(con)
    con.cursor().execute("INSERT INTO t VALUES (1)")  # another connection of the database
    assert v0 < v1 < duckdb_api.catalog_version(con)
    con.close()
    with pytest.raises(duckdb.Error):
        duckdb_api.catalog_version(con)


def test_collation_of_a_varchar_type(con):
    con.execute("CREATE TABLE t(a VARCHAR COLLATE NOCASE, b VARCHAR, c INTEGER)")
    types = con.sql("SELECT a, b, c FROM t").types
    assert [duckdb_api.collation(t).lower() for t in types] == ["nocase", "", ""]


def test_replace_method_swaps_the_connection_class_method():
    cls = duckdb_api.connection_class()
    own = cls.interrupt
    calls = []

    def spy(self):
        calls.append(self)
        return own(self)

    assert duckdb_api.replace_method("interrupt", spy) is own
    try:
        c = duckdb.connect()
        c.interrupt()
        assert calls == [c]
        c.close()
    finally:
        assert duckdb_api.replace_method("interrupt", own) is spy


def test_in_duckdb_frame_lets_duckdb_see_the_callers_variables(con):
    def plain(c):
        return c.execute("SELECT count(*) FROM caller_table").fetchall()

    def caller(fn):
        caller_table = pa.table({"x": [1, 2]})  # noqa: F841 (read by DuckDB)
        return fn(con)

    with pytest.raises(duckdb.CatalogException):
        caller(plain)
    assert caller(duckdb_api.in_duckdb_frame(plain)) == [(2,)]


def test_udf_error_text_names_the_python_exception(con):
    def boom(x):
        raise KeyError("no such key")

    con.create_function("boom", boom, ["BIGINT"], "BIGINT", type="native")
    with pytest.raises(duckdb.Error) as info:
        con.execute("SELECT boom(1)").fetchall()
    found = duckdb_api.UDF_ERROR.search(str(info.value))
    assert found and found.group(1) == "KeyError" and "no such key" in found.group(2)


def test_plan_names_the_tables_and_functions_it_scans(con, tmp_path):
    import pyarrow.parquet as pq

    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.t AS SELECT 1 AS a")
    con.execute("CREATE TABLE t AS SELECT 2 AS a")
    con.execute("SET search_path = 's'")
    assert '"memory.s.t"' in duckdb_api.plan(con, "SELECT * FROM t")
    assert duckdb_api.plan(con, "SELECT * FROM t") != duckdb_api.plan(con, "SELECT * FROM main.t")
    assert duckdb_api.plan(con, "SELECT * FROM nope") is None
    pq.write_table(pa.table({"a": [1]}), tmp_path / "f.parquet")
    (tmp_path / "f.csv").write_text("a\n1\n")
    text = duckdb_api.plan(con, f"SELECT * FROM '{tmp_path}/f.parquet' UNION ALL "
                                f"SELECT * FROM read_csv('{tmp_path}/f.csv') UNION ALL "
                                "SELECT range FROM range(3) UNION ALL SELECT a FROM t")
    assert sorted(duckdb_api.scanned_functions(text)) == ["PARQUET_SCAN", "RANGE", "READ_CSV"]
