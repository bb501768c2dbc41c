"""The SQL surface: grail_index, reaches, reaches_pairs, against DuckDB's own recursive CTE and a
networkx oracle; NULLs, unknown keys, strings, empty tables, cycles, staleness, corrupt files,
injection, threads."""
from __future__ import annotations

import threading

import duckdb
import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.plugin import files as _files, registry as _registry

CTE = """
WITH RECURSIVE walk(start, v) USING KEY (start, v) AS (
    SELECT DISTINCT src, src FROM edges
    UNION
    SELECT w.start, e.dst FROM walk AS w JOIN edges AS e ON e.src = w.v)
SELECT start, v FROM walk"""


def fresh(edges=None, *, key="BIGINT", con=None):
    """An in-memory database with table edges(src, dst) and the plugin installed."""
    con = con or duckdb.connect()
    gd.install(con)
    con.execute(f"CREATE TABLE edges(src {key}, dst {key})")
    if edges:
        con.executemany("INSERT INTO edges VALUES (?, ?)", list(edges))
    return con


def closure_by_cte(con) -> set:
    """All reachable (u, v) pairs among edge endpoints, by DuckDB's recursive CTE (USING KEY)."""
    return set(con.execute(CTE).fetchall())


def all_pairs(con, extra=()):
    keys = [r[0] for r in con.execute(
        "SELECT src FROM edges UNION SELECT dst FROM edges ORDER BY 1").fetchall()]
    keys += list(extra)
    return [(a, b) for a in keys for b in keys]


def test_grail_index_summary_and_scalar_answers():
    con = fresh([(1, 2), (2, 3), (3, 1), (3, 4), (5, 5)])
    s = con.execute("SELECT * FROM grail_index('edges')").fetchall()
    names = [d[0] for d in con.description]
    row = dict(zip(names, s[0]))
    assert (row["vertices"], row["edges"], row["components"]) == (5, 5, 3)
    assert row["action"] == "built" and row["path"] is None
    got = con.execute("SELECT reaches(1, 4), reaches(4, 1), reaches(2, 1), reaches(5, 5), "
                      "reaches(NULL, 1), reaches(1, NULL), reaches(9, 9), reaches(1, 9), "
                      "reaches(9, 1)").fetchall()[0]
    assert got == (True, False, True, True, None, None, True, False, False)


def test_matches_recursive_cte_on_a_graph_with_cycles_and_self_loops():
    g = nx.gnp_random_graph(40, 0.06, seed=3, directed=True)
    edges = list(g.edges()) + [(7, 7), (11, 11)]
    con = fresh(edges)
    con.execute("SELECT grail_index('edges')").fetchall()
    want = closure_by_cte(con)
    pairs = all_pairs(con, extra=[1000])
    con.execute("CREATE TABLE pairs(a BIGINT, b BIGINT)")
    con.executemany("INSERT INTO pairs VALUES (?, ?)", pairs)
    got = {(a, b): r for a, b, r in con.execute("SELECT a, b, reaches(a, b) FROM pairs").fetchall()}
    for (a, b), r in got.items():
        assert r == ((a, b) in want or a == b), (a, b)
    whole = {(a, b): r for a, b, r in con.execute(
        "SELECT * FROM reaches_pairs('pairs', 'a', 'b')").fetchall()}
    assert whole == got


def test_string_keys_and_type_mismatch():
    con = fresh([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], key="VARCHAR")
    con.execute("SELECT grail_index('edges')").fetchall()
    assert con.execute("SELECT reaches('a', 'd'), reaches('d', 'a'), reaches('zz', 'zz'), "
                       "reaches('a', NULL)").fetchall()[0] == (True, False, True, None)
    with pytest.raises(duckdb.Error, match="KeyTypeError"):
        con.execute("SELECT reaches(1, 2)").fetchall()
    with pytest.raises(duckdb.Error, match="both integers or both VARCHAR"):
        con.execute("SELECT reaches('a', 2)").fetchall()
    with pytest.raises(duckdb.Error, match="both integers or both VARCHAR"):
        con.execute("SELECT reaches(1.5, 2.5)").fetchall()


def test_the_key_kind_of_every_pair_of_types():
    """__grail_pair_kind (a table of pairs) gives the kind its comment promises for every
    pair of key types: each side's kind, a NULL taking the other's, 'bad' for two kinds."""
    ints = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT"]
    types = ints + ["VARCHAR", '"NULL"', "DOUBLE", "DATE", "BOOLEAN", "BIGINT[]", "HUGEINT"]

    def kind(t):
        return ("str" if t == "VARCHAR" else "int" if t in ints else "null" if t == '"NULL"'
                else "other")

    def want(a, b):
        ka, kb = kind(a), kind(b)
        return ka if ka == kb or kb == "null" else kb if ka == "null" else "bad"

    con = fresh()
    pairs = [(a, b) for a in types for b in types]
    got = con.execute("SELECT a, b, __grail_pair_kind(a, b) FROM (SELECT unnest($1) AS a, "
                      "unnest($2) AS b)", [[a for a, _ in pairs], [b for _, b in pairs]]
                      ).fetchall()
    assert got == [(a, b, want(a, b)) for a, b in pairs]


def test_integer_types_all_work():
    con = fresh([(1, 2), (2, 3)], key="INTEGER")
    con.execute("SELECT grail_index('edges')").fetchall()
    got = con.execute("SELECT reaches(1::TINYINT, 3::UBIGINT), reaches(3::SMALLINT, 1)").fetchall()
    assert got == [(True, False)]


def test_empty_table_and_nulls_in_pairs():
    con = fresh()
    s = con.execute("SELECT grail_index('edges').vertices").fetchall()
    assert s == [(0,)]
    assert con.execute("SELECT reaches(1, 1), reaches(1, 2), reaches(NULL, NULL)").fetchall() == [
        (True, False, None)]
    con.execute("CREATE TABLE pairs AS SELECT * FROM (VALUES (1, NULL), (NULL, 2), (3, 3)) t(a, b)")
    assert con.execute("SELECT * FROM reaches_pairs('pairs', 'a', 'b') ORDER BY ALL").fetchall() == [
        (1, None, None), (3, 3, True), (None, 2, None)]
    con.execute("CREATE TABLE nothing(a BIGINT, b BIGINT)")
    assert con.execute("SELECT count(*) FROM reaches_pairs('nothing', 'a', 'b')").fetchall() == [(0,)]


def test_null_endpoint_in_edge_table_is_refused():
    con = fresh([(1, 2)])
    con.execute("INSERT INTO edges VALUES (2, NULL)")
    with pytest.raises(duckdb.Error, match="NULL endpoint"):
        con.execute("SELECT grail_index('edges')").fetchall()


def test_no_index_and_unknown_index_say_what_to_do():
    con = fresh([(1, 2)])
    with pytest.raises(duckdb.Error, match=r"grail_index\('edge_table'"):
        con.execute("SELECT reaches(1, 2)").fetchall()
    con.execute("SELECT grail_index('edges', name := 'a')").fetchall()
    con.execute("SELECT grail_index('edges', name := 'b')").fetchall()
    with pytest.raises(duckdb.Error, match="several reachability indices"):
        con.execute("SELECT reaches(1, 2)").fetchall()
    assert con.execute("SELECT reaches(1, 2, 'a'), reaches(2, 1, 'b')").fetchall() == [(True, False)]
    with pytest.raises(duckdb.Error, match="no reachability index named 'c'"):
        con.execute("SELECT reaches(1, 2, 'c')").fetchall()
    assert {r[0] for r in con.execute("SELECT name FROM grail_indexes()").fetchall()} == {"a", "b"}


def test_named_indices_over_different_tables():
    con = fresh([(1, 2)])
    con.execute("CREATE TABLE other(x BIGINT, y BIGINT)")
    con.execute("INSERT INTO other VALUES (2, 1)")
    con.execute("SELECT grail_index('edges', name := 'fwd')").fetchall()
    con.execute("SELECT grail_index('other', src := 'x', dst := 'y', name := 'bwd')").fetchall()
    assert con.execute("SELECT reaches(1, 2, 'fwd'), reaches(1, 2, 'bwd'), reaches(2, 1, 'bwd')"
                       ).fetchall() == [(True, False, True)]


@pytest.mark.parametrize("bad", ["x; DROP TABLE edges", "edges; --", "f()", "edges AS e",
                                 "edges WHERE 1=1", ""])
def test_injection_attempts_are_errors_and_drop_nothing(bad):
    con = fresh([(1, 2)])
    with pytest.raises(duckdb.Error):
        con.execute("SELECT grail_index($t)", {"t": bad}).fetchall()
    with pytest.raises(duckdb.Error):
        con.execute("SELECT grail_index('edges', src := $c)", {"c": "src FROM edges; DROP TABLE edges; --"}).fetchall()
    with pytest.raises(duckdb.Error):
        con.execute("SELECT grail_index('edges', name := $n)", {"n": "../../etc/x"}).fetchall()
    with pytest.raises(duckdb.Error):
        con.execute("SELECT * FROM reaches_pairs($t, 'src', 'dst')", {"t": bad}).fetchall()
    assert con.execute("SELECT count(*) FROM edges").fetchall() == [(1,)]


def test_quoted_names_work():
    con = duckdb.connect()
    gd.install(con)
    con.execute('CREATE TABLE "My Edges"("From" BIGINT, "To" BIGINT)')
    con.execute('INSERT INTO "My Edges" VALUES (1, 2)')
    s = con.execute("""SELECT grail_index('"My Edges"', src := '"From"', dst := '"To"', name := 'm')""").fetchall()
    assert s[0][0]["vertices"] == 2
    assert con.execute("SELECT reaches(1, 2)").fetchall() == [(True,)]


def test_file_database_persists_and_a_new_process_reloads(tmp_path):
    db = tmp_path / "papers.duckdb"
    con = fresh([(1, 2), (2, 3)], con=duckdb.connect(str(db)))
    s = con.execute("SELECT grail_index('edges', name := 'cites')").fetchall()[0][0]
    assert s["path"] == str(tmp_path / "papers.duckdb.cites.grail.parquet")
    assert _files.read_source(tmp_path / "papers.duckdb.cites.grail.parquet")["table"] == '"edges"'
    con.close()
    _registry._REGISTRIES.clear()  # what a new process starts with
    con = duckdb.connect(str(db))
    gd.install(con)
    assert con.execute("SELECT reaches(1, 3), reaches(3, 1)").fetchall() == [(True, False)]
    row = con.execute("SELECT action FROM grail_indexes()").fetchall()
    assert row == [("loaded",)]
    assert con.execute("SELECT action FROM grail_index('edges', name := 'cites')").fetchall() == [
        ("cached",)]


def test_stale_index_is_refused_until_rebuilt(tmp_path):
    db = tmp_path / "g.duckdb"
    con = fresh([(1, 2), (2, 3)], con=duckdb.connect(str(db)))
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute("UPDATE edges SET dst = 1 WHERE src = 2")  # same row count, other content
    with pytest.raises(duckdb.Error, match="stale.*rebuild := true"):
        con.execute("SELECT grail_index('edges')").fetchall()
    con.close()
    _registry._REGISTRIES.clear()
    con = duckdb.connect(str(db))
    gd.install(con)
    with pytest.raises(duckdb.Error, match="StaleIndexError"):
        con.execute("SELECT reaches(1, 3)").fetchall()
    con.execute("SELECT grail_index('edges', rebuild := true)").fetchall()
    assert con.execute("SELECT reaches(1, 3), reaches(2, 1)").fetchall() == [(False, True)]


def test_stale_index_full_fingerprint_check_when_duckdb_version_differs(tmp_path):
    db = tmp_path / "g.duckdb"
    con = fresh([(1, 2), (2, 3)], con=duckdb.connect(str(db)))
    con.execute("SELECT grail_index('edges')").fetchall()
    path = tmp_path / "g.duckdb.edges.grail.parquet"
    source = {k: v for k, v in _files.read_source(path).items() if k != "fingerprint"}
    gd.load_index(path).save(path, source={**source, "duckdb": "0.0.0", "hash": "other"})
    con.close()
    _registry._REGISTRIES.clear()
    con = duckdb.connect(str(db))
    gd.install(con)
    assert con.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]  # content unchanged
    con.execute("INSERT INTO edges VALUES (3, 4)")
    con.close()
    _registry._REGISTRIES.clear()
    con2 = duckdb.connect(str(db))
    gd.install(con2)
    with pytest.raises(duckdb.Error, match="stale"):
        con2.execute("SELECT reaches(1, 3)").fetchall()


def test_corrupt_index_file_is_refused(tmp_path):
    path = tmp_path / "idx.grail.parquet"
    con = fresh([(1, 2), (2, 3)])
    con.execute("SELECT grail_index('edges', path := $p)", {"p": str(path)}).fetchall()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _registry._REGISTRIES.clear()
    con2 = fresh([(1, 2), (2, 3)])
    with pytest.raises(duckdb.Error, match="IndexFileError|corrupt|damaged"):
        con2.execute("SELECT grail_index('edges', path := $p)", {"p": str(path)}).fetchall()
    s = con2.execute("SELECT action FROM grail_index('edges', path := $p, rebuild := true)",
                     {"p": str(path)}).fetchall()
    assert s == [("built",)]


def test_in_memory_explicit_path_round_trip(tmp_path):
    path = tmp_path / "x.grail.parquet"
    con = fresh([(1, 2), (2, 3)])
    assert con.execute("SELECT action FROM grail_index('edges', path := $p)",
                       {"p": str(path)}).fetchall() == [("built",)]
    _registry._REGISTRIES.clear()
    con2 = fresh([(1, 2), (2, 3)])
    assert con2.execute("SELECT action FROM grail_index('edges', path := $p)",
                        {"p": str(path)}).fetchall() == [("loaded",)]
    assert con2.execute("SELECT reaches(1, 3)").fetchall() == [(True,)]


def test_install_is_idempotent_and_cursors_share_the_registry():
    con = fresh([(1, 2)])
    gd.install(con)
    con.execute("SELECT grail_index('edges')").fetchall()
    cur = con.cursor()
    gd.install(cur)
    assert cur.execute("SELECT reaches(1, 2)").fetchall() == [(True,)]
    other = fresh([(2, 1)])  # another database: its own registry
    with pytest.raises(duckdb.Error, match="no reachability index"):
        other.execute("SELECT reaches(1, 2)").fetchall()


def test_four_threads_query_through_cursors():
    g = nx.gnp_random_graph(300, 0.01, seed=5, directed=True)
    con = fresh(list(g.edges()))
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b "
                "FROM range(300) a, range(0, 300, 3) b")
    want = con.execute("SELECT count(*) FROM pairs WHERE reaches(a, b)").fetchall()
    results, errors = [], []

    def work():
        try:
            cur = con.cursor()
            gd.install(cur)
            for _ in range(3):
                results.append(cur.execute(
                    "SELECT count(*) FROM pairs WHERE reaches(a, b)").fetchall())
                results.append(cur.execute(
                    "SELECT count(*) FROM reaches_pairs('pairs', 'a', 'b') WHERE reaches").fetchall())
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 24 and all(r == want for r in results)
    reach = {(a, b) for a in g for b in nx.descendants(g, a)}
    assert want[0][0] == sum(1 for a in range(300) for b in range(0, 300, 3)
                             if a == b or (a, b) in reach)


edge_lists = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=edge_lists)
def test_hypothesis_small_graphs_scalar_whole_column_and_cte_agree(edges):
    con = fresh(edges)
    con.execute("SELECT grail_index('edges')").fetchall()
    want = closure_by_cte(con)
    con.execute("CREATE TABLE pairs AS SELECT a.range AS a, b.range AS b "
                "FROM range(-1, 14) a, range(-1, 14) b")
    scalar = con.execute("SELECT a, b, reaches(a, b) FROM pairs ORDER BY ALL").fetchall()
    whole = con.execute("SELECT * FROM reaches_pairs('pairs', 'a', 'b') ORDER BY ALL").fetchall()
    assert scalar == whole
    for a, b, r in scalar:
        assert r == (a == b or (a, b) in want)


def test_few_distinct_keys_of_mixed_integer_types():
    """A BIGINT column holding a key beyond INTEGER's range (no vertex) against an INTEGER
    column, with few distinct keys (one traversal per key): the per-chunk path's answers."""
    con = fresh([(1, 2), (2, 3)])
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute("CREATE TABLE p AS SELECT CASE WHEN range % 2 = 0 THEN 5000000000 ELSE 1 END::BIGINT "
                "AS a, (range % 3 + 1)::INTEGER AS b FROM range(1000)")
    for q, want in (("SELECT count(*) FILTER (WHERE reaches(a, b)) FROM p", 500),
                    ("SELECT count(*) FILTER (WHERE reaches(b, a)) FROM p", 167),
                    ("SELECT count(*) FILTER (WHERE reaches(a, a)) FROM p", 1000)):
        assert con.execute(q).fetchall() == [(want,)], q
        with gd.per_chunk(con):
            assert con.execute(q).fetchall() == [(want,)], q


def test_ubigint_keys_beyond_bigint_are_no_vertices():
    """A UBIGINT key above 2**63 - 1 is never a vertex: false against any other key, true
    against itself, NULL with NULL; on every path, in lists beside signed keys, and in
    Python."""
    big = 2**64 - 1
    con = fresh([(1, 2), (2, 3)])
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute(f"CREATE TABLE u AS SELECT * FROM (VALUES ({big}::UBIGINT, 1::UBIGINT), "
                f"(1, 3), ({big}, {big}), (NULL, {big}), (3, {big})) t(x, y)")
    want = [(big, 1, False), (1, 3, True), (big, big, True), (None, big, None), (3, big, False)]
    for q in ("SELECT x, y, reaches(x, y) FROM u", "SELECT x, y, reaches(x, y, 'edges') FROM u"):
        assert con.execute(q).fetchall() == want, q
        with gd.per_chunk(con):
            assert con.execute(q).fetchall() == want, q
    for q, rows in ((f"SELECT reaches({big}::UBIGINT, 3), reaches(1, {big}::UBIGINT), "
                     f"reaches({big}::UBIGINT, {big}::UBIGINT), reaches(-1, {big}::UBIGINT)",
                     [(False, False, True, False)]),
                    ("SELECT x, reaches(x, 3), reaches(1, x) FROM u",
                     [(big, False, False), (1, True, True), (big, False, False), (None, None, None),
                      (3, True, True)]),
                    (f"SELECT key FROM descendants({big}::UBIGINT)", [(big,)]),
                    (f"SELECT ancestors_count({big}::UBIGINT)", [(1,)])):
        assert con.execute(q).fetchall() == rows, q
        with gd.per_chunk(con):
            assert con.execute(q).fetchall() == rows, q
    lists = con.execute("SELECT reaches_list(list(x ORDER BY rowid), list(y ORDER BY rowid)), "
                        "reaches_list(list(x ORDER BY rowid), [1, -1, 2, 3, 3]), "
                        "reaches_list([-1, 1, 2, 3, 3], list(y ORDER BY rowid)) FROM u").fetchall()
    assert lists == [([w for *_, w in want], [False, False, False, None, True],
                      [False, True, False, False, False])]
    index = gd.build_index([1, 2], [2, 3], backend="cpu")
    assert index.reaches(big, big) is True and index.reaches(big, 1) is False
    import pyarrow as pa
    got = index.reaches(pa.array([big, 1, None], pa.uint64()), pa.array([-1, 3, 2], pa.int64()))
    assert got.to_pylist() == [False, True, None]


def test_messages_say_what_to_do(tmp_path):
    """The labels error is the project's, with the real default; reaches_pairs takes quoted
    column names as it takes a quoted table name; path := naming the user's database is
    refused without advice to delete it."""
    path = tmp_path / "g.duckdb"
    con = fresh([(1, 2), (2, 3)], con=duckdb.connect(str(path)))
    real = rf"the default: {gd.DEFAULT_LABELS['cpu']} on the CPU, {gd.DEFAULT_LABELS['gpu']} on a GPU"
    with pytest.raises(gd.EdgeInputError, match=rf"from 1 to 64, got 100 \({real}"):
        con.execute("SELECT grail_index('edges', labels := 100)").fetchall()
    with pytest.raises(gd.EdgeInputError, match=real):
        gd.build_index([1], [2], labels=0)
    with pytest.raises(gd.GrailError, match="is not a grail_duckdb index file") as info:
        con.execute("SELECT grail_index('edges', path := $p)", {"p": str(path)}).fetchall()
    assert "delete" not in str(info.value)
    con.execute("SELECT grail_index('edges')").fetchall()
    con.execute('CREATE TABLE "my pairs" AS SELECT 1 AS "a b", 3 AS "c""d"')
    for q in ("SELECT * FROM reaches_pairs('\"my pairs\"', '\"a b\"', '\"c\"\"d\"')",
              "SELECT * FROM reaches_pairs('\"my pairs\"', '\"c\"\"d\"', '\"a b\"', 'edges')"):
        got = con.execute(q).fetchall()
        with gd.per_chunk(con):
            assert con.execute(q).fetchall() == got
        assert got in ([(1, 3, True)], [(3, 1, False)])
    con.close()
