"""The command line: build (files and file.duckdb:table), query, demo."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import grail_duckdb as gd
from grail_duckdb.plugin import registry as _registry
from grail_duckdb.tools import cli
from grail_duckdb.progress import BUILD_PHASES
from harness import ROOT, child_env



def write_tsv(path: Path, edges) -> Path:
    path.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    return path


def test_default_index_path():
    assert cli.default_index_path("/d/cit-HepTh.tsv.gz") == Path("/d/cit-HepTh.grail.parquet")
    assert cli.default_index_path("g.gra") == Path("g.grail.parquet")


def test_build_then_query_csv_and_parquet(tmp_path, capsys, monkeypatch):
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2), (2, 3), (3, 1), (3, 4)])
    monkeypatch.setenv("GRAIL_DUCKDB_PROGRESS", "1")           # show progress however short
    assert cli.main(["build", str(edges), "--backend", "cpu"]) == 0
    index = tmp_path / "g.grail.parquet"
    assert index.exists()
    err = capsys.readouterr().err
    last = BUILD_PHASES + 1  # the save, written as the build goes
    assert "building the index" in err and f"phase {last}/{last} done (save" in err
    monkeypatch.setenv("GRAIL_DUCKDB_PROGRESS", "0")
    assert cli.main(["build", str(edges), "--backend", "cpu"]) == 0
    assert capsys.readouterr().err == ""
    pairs = write_tsv(tmp_path / "pairs.tsv", [(1, 4), (4, 1), (2, 1), (9, 9), (1, 9)])
    out = tmp_path / "answers.parquet"
    assert cli.main(["query", str(index), str(pairs), "--out", str(out)]) == 0
    t = pq.read_table(out)
    assert t.column("reaches").to_pylist() == [True, False, True, True, False]
    assert cli.main(["query", str(index), str(pairs), "--out", str(tmp_path / "a.csv")]) == 0
    assert (tmp_path / "a.csv").read_text().count("true") == 3


def test_build_from_duckdb_table_is_found_by_sql(tmp_path):
    db = tmp_path / "papers.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(citing, cited)")
    con.close()
    assert cli.main(["build", f"{db}:cites", "--src", "citing", "--dst", "cited"]) == 0
    assert (tmp_path / "papers.duckdb.cites.grail.parquet").exists()
    _registry._REGISTRIES.clear()
    con = gd.install(duckdb.connect(str(db)))
    assert con.execute("SELECT reaches(1, 3), reaches(3, 1)").fetchall() == [(True, False)]
    con.close()


def test_input_errors_exit_2(tmp_path, capsys):
    assert cli.main(["build", str(tmp_path / "missing.tsv")]) == 2
    assert "missing.tsv" in capsys.readouterr().err
    bad = tmp_path / "bad.grail.parquet"
    bad.write_bytes(b"not parquet")
    pairs = write_tsv(tmp_path / "p.tsv", [(1, 2)])
    assert cli.main(["query", str(bad), str(pairs)]) == 2


def test_key_type_mismatch_in_query_is_an_error(tmp_path, capsys):
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2)])
    assert cli.main(["build", str(edges)]) == 0
    pairs = tmp_path / "p.csv"
    pairs.write_text("a,b\nx,y\n")
    assert cli.main(["query", str(tmp_path / "g.grail.parquet"), str(pairs),
                     "--src", "a", "--dst", "b"]) == 2
    assert "key" in capsys.readouterr().err.lower()


def test_demo_small_generated_graph(capsys):
    assert cli.main(["demo", "--papers", "3000", "--scalar"]) == 0
    out = capsys.readouterr().out
    assert "generated a citation graph: 3,000 papers" in out
    assert "DIFFERENT" not in out and out.count("same answer") == 3
    assert "UNEQUAL" not in out and out.count("equal rows") == 3  # each beside its recursive CTE


def test_the_bench_is_not_a_command_of_the_package():
    """The benchmark harness lives outside the installed package (``python -m benchmarks``)."""
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["bench", "--quick"])


def test_benchmarks_entry_point_help():
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for command in ("run", "scale", "sql", "docs"):
        assert command in r.stdout


def test_module_entry_point_help():
    r = subprocess.run([sys.executable, "-m", "grail_duckdb", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "demo" in r.stdout and "build" in r.stdout


# --- every input error: a message on stderr, status 2, no traceback (issue 11, item 9) -------
def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``python -m grail_duckdb ARGS`` in a fresh process."""
    env = child_env()
    return subprocess.run([sys.executable, "-m", "grail_duckdb", *map(str, args)], cwd=cwd or ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def assert_input_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr


def test_labels_out_of_range(tmp_path):
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2)])
    assert_input_error(run_cli("build", edges, "--labels", "0"), "--labels", "1", "64")
    assert_input_error(run_cli("build", edges, "--labels", "65"), "--labels")
    assert_input_error(run_cli("build", edges, "--seed", "-1"), "--seed")
    assert_input_error(run_cli("demo", "--papers", "0"), "--papers")
    assert not (tmp_path / "g.grail.parquet").exists()


def test_unwritable_out(tmp_path, capsys):
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2)])
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for out in (tmp_path / "no" / "such" / "i.grail.parquet", blocker / "i.grail.parquet"):
        assert cli.main(["build", str(edges), "--out", str(out)]) == 2
        assert str(out.parent) in capsys.readouterr().err
    assert cli.main(["build", str(edges)]) == 0
    index = tmp_path / "g.grail.parquet"
    assert cli.main(["query", str(index), str(edges), "--out", str(blocker / "a.csv")]) == 2
    assert "a-file" in capsys.readouterr().err
    assert cli.main(["demo", "--papers", "100", "--write-edges", str(blocker / "e.parquet")]) == 2
    assert "a-file" in capsys.readouterr().err
    assert cli.main(["demo", "--papers", "100", "--index", str(blocker / "i.grail.parquet")]) == 2
    assert "a-file" in capsys.readouterr().err
    assert_input_error(run_cli("build", edges, "--out", tmp_path / "no" / "x.grail.parquet"),
                       "does not exist")                       # the whole command: no traceback


def test_missing_database_is_not_created(tmp_path):
    db = tmp_path / "nosuch.duckdb"
    assert_input_error(run_cli("build", f"{db}:t"), "nosuch.duckdb", "does not exist")
    assert not db.exists() and not list(tmp_path.iterdir())


def test_database_is_opened_read_only(tmp_path):
    db = tmp_path / "papers.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE cites AS SELECT * FROM (VALUES (1, 2), (2, 3)) t(citing, cited)")
    con.close()
    before = db.read_bytes()
    r = run_cli("build", f"{db}:cites", "--src", "citing", "--dst", "cited")
    assert r.returncode == 0, r.stderr
    assert db.read_bytes() == before
    assert_input_error(run_cli("build", f"{db}:nosuch"), "nosuch")


def test_messages_name_the_command_line_flags(tmp_path):
    odd = tmp_path / "g.dat"
    odd.write_text("a;b\n")
    r = run_cli("build", odd)
    assert_input_error(r, "--format")
    assert "fmt=" not in r.stderr
    table = tmp_path / "g.csv"
    table.write_text("citing,cited\n1,2\n")
    r = run_cli("build", table, "--src", "from")
    assert_input_error(r, "'from'")
    assert "src=" not in r.stderr


def test_write_edges_then_build_and_query_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--papers", "2000", "--write-edges", "papers.parquet",
                     "--write-edges", "papers.duckdb"]) == 0
    t = pq.read_table(tmp_path / "papers.parquet")
    assert t.column_names == ["citing", "cited"] and t.num_rows > 2000
    con = duckdb.connect(str(tmp_path / "papers.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM cites").fetchone()[0] == t.num_rows
    assert con.execute("SELECT count(*) FROM papers").fetchone()[0] >= 1990
    con.close()
    assert cli.main(["build", "papers.parquet", "--src", "citing", "--dst", "cited"]) == 0
    assert cli.main(["query", "papers.grail.parquet", "papers.parquet", "--src", "citing",
                     "--dst", "cited", "--out", "answers.csv"]) == 0
    answers = (tmp_path / "answers.csv").read_text().splitlines()
    assert len(answers) == t.num_rows + 1 and all(a.endswith("true") for a in answers[1:])
