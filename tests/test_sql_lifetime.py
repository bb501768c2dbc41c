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
    """A connection closed by a with block (no wrapper sees it) leaves its function names in
    the database; calling them from another connection is still safe."""
    check(run_script("""
        from grail_duckdb.plugin import connections
        c2 = gd.install(duckdb.connect("z.duckdb"))
        with duckdb.connect("z.duckdb") as c1:
            gd.install(c1); graph(c1)
            name = connections.installation(c1).prefix + "reaches_int_only"
        del c1
        import gc; gc.collect()
        assert c2.execute(f"SELECT {name}(1, 4)").fetchall() == [(True,)]
        use(c2)
    """, tmp_path))


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
