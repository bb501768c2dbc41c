"""Connections, cursors and the plugin's state: no order of close() crashes (issue 11, item 1),
a database's indices are released with its last connection (item 4), and nothing prints
"nanobind: leaked" at exit (item 10). Crashes are looked for in subprocesses."""
from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref

import duckdb
import pytest

import grail_duckdb as gd
from grail_duckdb.plugin import connections
from harness import ROOT, child_env


PRELUDE = """
import itertools, os, sys, duckdb
import grail_duckdb as gd

def graph(con):
    con.execute("CREATE OR REPLACE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3), (3, 1), (3, 4)) t(src, dst)")
    con.execute("CREATE OR REPLACE TABLE pairs AS SELECT range AS a, 4 AS b FROM range(6)")
    con.execute("SELECT grail_index('edges')").fetchall()

def use(obj):
    assert obj.execute("SELECT reaches(1, 4), reaches(4, 1)").fetchall() == [(True, False)]
    assert obj.execute("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs").fetchall() == [(4,)]
    assert obj.execute("SELECT count(*) FROM ancestors(4)").fetchall() == [(4,)]
"""


def run_script(body: str, tmp_path, timeout=240) -> subprocess.CompletedProcess:
    env = child_env(GRAIL_DUCKDB_PROGRESS="0")
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=timeout)


def check(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "nanobind" not in proc.stderr, proc.stderr[-2000:]


def test_the_issues_crash_closing_the_installing_connection(tmp_path):
    check(run_script("""
        c1 = gd.install(duckdb.connect("x.duckdb"))
        c2 = gd.install(duckdb.connect("x.duckdb"))
        graph(c1)
        c1.close()
        use(c2)
        k = c2.cursor(); use(k); k.close()   # the cursor install was first called on
        use(c2)
        with duckdb.connect("y.duckdb") as c3:
            gd.install(c3); graph(c3); use(c3)
        c4 = gd.install(duckdb.connect("y.duckdb")); graph(c4); use(c4)
        print("ok")
    """, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "memory"])
def test_every_close_order_of_four_connections_and_cursors(tmp_path, mode):
    """All 24 orders of closing c1, c2 (or a cursor of a cursor), k1, k2; after each close,
    every object still open answers through its own macros, and some are left open at exit."""
    check(run_script(f"""
        mode = {mode!r}
        for n, order in enumerate(itertools.permutations(range(4))):
            path = f"db{{n}}.duckdb"
            if mode == "file":
                c1 = gd.install(duckdb.connect(path)); c2 = gd.install(duckdb.connect(path))
                objs = [c1, c2, c1.cursor(), c2.cursor()]
            else:
                c1 = gd.install(duckdb.connect())
                k1 = c1.cursor(); objs = [c1, k1, c1.cursor(), k1.cursor()]
            graph(objs[0])
            for o in objs:
                gd.install(o)
            # closing a connection closes its cursors (and theirs)
            children = {{0: {{2}}, 1: {{3}}}} if mode == "file" else {{0: {{1, 2, 3}}, 1: {{3}}}}
            closed = set()
            for i in order[: 4 if n % 2 else 2]:
                objs[i].close(); closed |= {{i}} | children.get(i, set())
                for j, o in enumerate(objs):
                    if j not in closed:
                        use(o)
        print("orders ok")
    """, tmp_path))


def test_a_closed_connections_function_names_stay_safe(tmp_path):
    """A connection closed by a with block removes its functions (calling their names from
    another connection is DuckDB's CatalogException); one dropped without closing leaves
    them in the database, and calling them from another connection is still safe."""
    check(run_script("""
        from grail_duckdb.plugin import connections
        c2 = gd.install(duckdb.connect("z.duckdb"))
        with duckdb.connect("z.duckdb") as c1:
            gd.install(c1); graph(c1)
            closed = connections.installation(c1).prefix + "reaches_int_only"
        c3 = gd.install(duckdb.connect("z.duckdb"))
        dropped = connections.installation(c3).prefix + "reaches_int_only"
        del c1, c3
        import gc; gc.collect()
        try:
            c2.execute(f"SELECT {closed}(1, 4)").fetchall()
            raise AssertionError("the function of a closed connection answered")
        except duckdb.CatalogException:
            pass
        assert c2.execute(f"SELECT {dropped}(1, 4)").fetchall() == [(True,)]
        use(c2)
    """, tmp_path))


@pytest.mark.slow  # a Python process of its own: seconds
def test_no_leak_messages_at_exit_with_connections_left_open(tmp_path):
    proc = run_script("""
        con = gd.install(duckdb.connect())
        graph(con); use(con)
        cur = con.cursor(); use(cur)
        other = gd.install(duckdb.connect("w.duckdb")); graph(other); use(other)
        r = con.execute("SELECT a, reaches(a, b) FROM pairs")   # an unfinished result
    """, tmp_path)
    check(proc)


def test_a_databases_indices_are_released_with_its_last_connection():
    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT range AS src, range + 1 AS dst FROM range(1000)")
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute("SELECT count(*) FROM range(10) WHERE reaches(range, 5)").fetchall()
    cur = con.cursor()
    gd.install(cur)
    reg = connections.installed_registry(con)
    index = weakref.ref(reg.get("").index)
    reg_ref = weakref.ref(reg)
    del reg
    cur.close()
    con.close()
    del con, cur
    gc.collect()
    assert index() is None and reg_ref() is None


def test_install_on_the_default_connection_routes_module_functions():
    con = gd.install()
    assert con is duckdb.default_connection()
    duckdb.execute("CREATE OR REPLACE TABLE lt_edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    duckdb.execute("SELECT grail_index('lt_edges', name := 'lt')").fetchall()
    assert duckdb.sql("SELECT reaches(1, 3, 'lt'), reaches(3, 1, 'lt')").fetchall() == [(True, False)]
    assert duckdb.execute("SELECT count(*) FROM range(5) WHERE reaches(range, 3, 'lt')").fetchall() == [(3,)]
    assert "IN ancestors(3, 'lt')" in gd.explain(con, "SELECT reaches(range, 3, 'lt') FROM range(5)")


def test_cursors_of_an_installed_connection_need_no_install():
    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("SELECT grail_index('edges')").fetchall()
    cur = con.cursor().cursor()
    assert cur.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
    other = duckdb.connect()  # not installed: its statements are DuckDB's own
    with pytest.raises(duckdb.CatalogException):
        other.execute("SELECT reaches(1, 3)")
    con.close()


@pytest.mark.parametrize("mode", ["file", "memory"])
def test_install_again_after_the_installed_connection_closed(tmp_path, mode):
    """Install on a cursor, close it, install on its connection (or on a second connection
    of the same database): the second install works, shares nothing stale, and answers."""
    path = str(tmp_path / "a.duckdb") if mode == "file" else ":memory:"
    con = duckdb.connect(path)
    cur = con.cursor()
    gd.install(cur)
    cur.execute("CREATE TABLE e AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    cur.execute("SELECT grail_index('e')").fetchall()
    cur.close()
    gd.install(con)
    assert con.execute("SELECT grail_index('e').edges, reaches(1, 3)").fetchall() == [(2, True)]
    if mode == "file":
        other = gd.install(duckdb.connect(path))
        assert other.execute("SELECT reaches(1, 3), reaches(3, 1)").fetchall() == [
            (True, False)]
        con.close()
        assert other.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
        other.close()
    else:
        con.close()


@pytest.mark.slow  # a Python process of its own: seconds
def test_install_on_the_default_connection_without_keeping_it(tmp_path):
    """gd.install() then duckdb.execute(...), as the README shows: the caller keeps nothing."""
    check(run_script("""
        gd.install()
        duckdb.execute("CREATE TABLE e AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
        import gc; gc.collect()
        assert duckdb.execute("SELECT grail_index('e').edges").fetchall() == [(2,)]
        assert duckdb.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
        assert duckdb.sql("SELECT count(*) FROM range(4) WHERE reaches(range, 3)").fetchall() == [(3,)]
        print("ok")
    """, tmp_path))


def _kept_objects() -> int:
    gc.collect()
    return len(gc.get_objects())


@pytest.mark.slow
def test_install_and_close_keep_nothing():
    """install() + close() in a loop (a server opening a connection per request) keeps no
    Python object per cycle, like plain DuckDB: with with-blocks and close() alike."""
    def cycle(n):
        if n % 2:
            with duckdb.connect() as c:
                gd.install(c)
                c.execute("CREATE TABLE e AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
                c.execute("SELECT grail_index('e')").fetchall()
                assert c.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]
        else:
            c = gd.install(duckdb.connect())
            c.execute("SELECT 1").fetchall()
            c.close()

    def udfs():
        gc.collect()        # the Udfs of earlier tests' dropped connections go first
        return sum(type(o) is connections.Udf for o in gc.get_objects())

    for n in range(10):
        cycle(n)
    udfs_before = udfs()
    kept = []
    for _ in range(2):  # two windows: what grows once (a first import) grows in one only
        before = _kept_objects()
        for n in range(60):
            cycle(n)
        kept.append(_kept_objects() - before)
    assert min(kept) < 60, f"{kept} objects kept by two windows of 60 install/close cycles"
    assert udfs() <= udfs_before


def test_a_connection_dropped_after_an_error_is_released_at_once(tmp_path):
    """After StaleIndexError (as after DuckDB's own CatalogException) the connection goes
    with its last reference, without waiting for the garbage collector, so another process
    can open the database file."""
    path = str(tmp_path / "g.duckdb")
    con = gd.install(duckdb.connect(path))
    con.execute("CREATE TABLE e AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(src, dst)")
    con.execute("CREATE TABLE p AS SELECT range AS a FROM range(4)")
    con.execute("SELECT grail_index('e')").fetchall()
    con.close()
    for statement in ("SELECT reaches(1, 3)", "SELECT count(*) FROM p WHERE reaches(a, 3)",
                      "SELECT count(*) FILTER (WHERE reaches(a, 3 - a)) FROM p"):
        with duckdb.connect(path) as plain:
            plain.execute("INSERT INTO e VALUES (3, 4)")
        con = gd.install(duckdb.connect(path))
        gc.disable()
        try:
            try:
                con.execute(statement).fetchall()
            except gd.StaleIndexError:
                pass
            else:
                raise AssertionError("not stale")
            ref = weakref.ref(con)
            del con
            assert ref() is None, statement
        finally:
            gc.enable()
        opened = subprocess.run([sys.executable, "-c", f"import duckdb; duckdb.connect({path!r})"],
                                capture_output=True, text=True, timeout=60)
        assert opened.returncode == 0, opened.stderr[-500:]
        with duckdb.connect(path) as plain:
            plain.execute("DELETE FROM e WHERE src = 3")
        _registry_reset()


def _registry_reset():
    from grail_duckdb.plugin import registry
    registry._REGISTRIES.clear()


EXIT_WITH_A_UDF = """
import os
os.environ["GRAIL_DUCKDB_BACKEND"] = {backend!r}
import pyarrow.compute as pc
con = gd.install(duckdb.connect())
con.create_function("plus1", lambda x: pc.add(x, 1), ["BIGINT"], "BIGINT", type="arrow")
graph(con); use(con)
assert con.execute("SELECT grail_index('edges').backend").fetchall() == [({backend!r},)]
assert con.execute("SELECT count(*) FROM range(5) WHERE reaches(plus1(range), 4)").fetchall() == [(4,)]
other = gd.install(duckdb.connect("u.duckdb"))
other.create_function("twice", lambda x: pc.multiply(x, 2), ["BIGINT"], "BIGINT", type="arrow")
graph(other); use(other)
r = con.execute("SELECT plus1(a), reaches(a, b) FROM pairs")   # an unfinished result
print("ok")
"""


@pytest.mark.parametrize("kind", [pytest.param("cpu", marks=pytest.mark.slow), pytest.param("gpu", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not gd.kernels.gpu_available(),
                                        reason="no CUDA device visible to CuPy")])])
def test_exit_is_quiet_with_an_arrow_udf_and_an_index_left_open(tmp_path, kind):
    """A script that registers an Arrow UDF of its own and builds an index (a GPU index too)
    exits without closing anything: no "nanobind: leaked" lines, status 0."""
    proc = run_script(EXIT_WITH_A_UDF.format(backend=kind), tmp_path)
    check(proc)
    assert proc.stdout.strip().endswith("ok") and "leaked" not in proc.stderr, proc.stderr[-2000:]
