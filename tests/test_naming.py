"""One naming for the edge columns: ``src`` and ``dst`` in SQL, Python and on the command line
(issue 11, item 9)."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import grail_duckdb as gd
from benchmarks import workloads
from grail_duckdb.tools import cli
from grail_duckdb.tools.readers import read_edges

CITES = pa.table({"citing": [1, 2, 3, 3], "cited": [2, 3, 1, 4]})
PAIRS = ([1, 4, 2, 1], [4, 1, 1, 9])
EXPECTED = [True, False, True, False]


def test_python_names_columns_with_src_and_dst():
    idx = gd.build_index(CITES, src="citing", dst="cited", backend="cpu")
    assert idx.reaches(*PAIRS).to_pylist() == EXPECTED
    rel = duckdb.connect().sql("SELECT 1 AS citing, 2 AS cited")
    assert gd.build_index(rel, src="citing", dst="cited", backend="cpu").reaches(1, 2) is True


def test_two_key_columns_stay_positional():
    idx = gd.build_index(CITES.column("citing"), CITES.column("cited"), backend="cpu")
    assert idx.reaches(*PAIRS).to_pylist() == EXPECTED


def test_the_old_keywords_are_gone():
    with pytest.raises(TypeError):
        gd.build_index(CITES, src_col="citing", dst_col="cited", backend="cpu")


def test_missing_column_error_names_the_keywords_that_exist():
    with pytest.raises(gd.EdgeInputError) as err:
        gd.build_index(CITES, backend="cpu")
    message = str(err.value)
    assert "no column 'src'" in message and "src=" in message and "dst=" in message
    gd.build_index(CITES, src="citing", dst="cited", backend="cpu")   # the advice works


def test_readers_and_workloads_use_the_same_names(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("citing,cited\n1,2\n2,3\n")
    t = read_edges(path, src="cited", dst="citing")
    assert t.column("src").to_pylist() == [2, 3]
    rel = duckdb.connect().sql("SELECT * FROM (VALUES (1, 2), (2, 3)) t(citing, cited)")
    assert workloads.vertex_keys(rel, src="citing", dst="cited").to_pylist() == [1, 2, 3]
    p = workloads.reachable_pairs(rel, 5, src="citing", dst="cited")
    assert set(zip(p["src"].to_pylist(), p["dst"].to_pylist())) <= {(1, 2), (2, 3), (1, 3)}


def test_sql_python_and_cli_agree(tmp_path):
    db = tmp_path / "papers.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE cites AS SELECT * FROM CITES")
    con.close()
    con = gd.install(duckdb.connect())
    con.execute("CREATE TABLE cites AS SELECT * FROM CITES")
    con.execute("SELECT grail_index('cites', src := 'citing', dst := 'cited')")
    sql = [r[0] for r in con.execute(
        "SELECT reaches(a, b) FROM (SELECT unnest($a) AS a, unnest($b) AS b)",
        {"a": PAIRS[0], "b": PAIRS[1]}).fetchall()]
    con.close()
    assert sql == EXPECTED
    out = tmp_path / "i.grail.parquet"
    assert cli.main(["build", f"{db}:cites", "--src", "citing", "--dst", "cited",
                     "--out", str(out)]) == 0
    assert gd.load_index(out).reaches(*PAIRS).to_pylist() == EXPECTED
