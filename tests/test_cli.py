"""The command line: build (files and file.duckdb:table), query, demo."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
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


@pytest.mark.slow    # processes of the command line, a few seconds each
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


@pytest.mark.slow    # processes of the command line, a few seconds each
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


# --- issue 43: the command line's own findings ------------------------------------------------
def test_header_less_text_keys(tmp_path, capsys):
    """A CSV of text keys without a header: --no-header reads every row as an edge (by
    default the first row is taken as the header, as DuckDB's sniffer does, and said so)."""
    edges = tmp_path / "t.csv"
    edges.write_text("a,b\nb,c\n")
    pairs = tmp_path / "q.csv"
    pairs.write_text("a,c\nc,a\n")
    assert cli.main(["build", str(edges)]) == 0
    out = capsys.readouterr().out
    assert "read 1 edges" in out and "'a,b', taken as the header: --no-header" in out
    assert cli.main(["build", str(edges), "--no-header"]) == 0
    assert "read 2 edges" in capsys.readouterr().out
    assert cli.main(["query", str(tmp_path / "t.grail.parquet"), str(pairs), "--no-header",
                     "--out", str(tmp_path / "a.csv")]) == 0
    assert (tmp_path / "a.csv").read_text().splitlines()[1:] == ['"a","c",true',
                                                                  '"c","a",false']


@pytest.mark.slow    # processes of the command line, a few seconds each
def test_a_bad_cell_does_not_change_the_key_type(tmp_path, capsys):
    """An integer column with a bad cell is refused with the line at fault (it would have
    built a VARCHAR-keyed index, and integer queries would have failed later); --string-keys
    asks for text keys; the key type is shown by the summary and by repr(GrailIndex)."""
    for cell, words in (("x3", ("line 3", "'x3'", "--string-keys")),
                        ("4.5", ("line 3", "'4.5'", "--string-keys")),
                        ("99999999999999999999", ("line 3", "64-bit", "--string-keys"))):
        edges = tmp_path / "k.csv"
        edges.write_text(f"src,dst\n1,2\n2,{cell}\n3,4\n")
        assert_input_error(run_cli("build", edges), *words)
        assert not (tmp_path / "k.grail.parquet").exists()
    assert cli.main(["build", str(edges), "--string-keys"]) == 0
    assert "key_type str" in capsys.readouterr().out
    edges.write_text("src,dst\n1,2\n2,3\n")
    assert cli.main(["build", str(edges)]) == 0
    out = capsys.readouterr().out
    assert "keys: integer" in out and "key_type int" in out
    assert "key_type='int'" in repr(gd.load_index(tmp_path / "k.grail.parquet"))
    words = tmp_path / "w.csv"
    words.write_text("src,dst\np1,p2\np2,3\n")  # mostly text: text keys, and why
    assert cli.main(["build", str(words)]) == 0
    assert "keys: text: line 2 holds 'p1', not an integer" in capsys.readouterr().out


def test_query_out_never_overwrites_an_index_the_input_or_a_database(tmp_path, capsys):
    edges = write_tsv(tmp_path / "e.tsv", [(1, 2), (2, 3)])
    assert cli.main(["build", str(edges)]) == 0
    index = tmp_path / "e.grail.parquet"
    other = tmp_path / "o.grail.parquet"
    assert cli.main(["build", str(edges), "--out", str(other)]) == 0
    db = tmp_path / "g.duckdb"
    duckdb.connect(str(db)).close()
    data = tmp_path / "data.csv"
    data.write_text("x,y\n1,2\n")
    kept = {p: p.read_bytes() for p in (index, other, edges, db, data)}
    for out in kept:
        assert cli.main(["query", str(index), str(edges), "--out", str(out)]) == 2
        assert "not overwritten" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in kept} == kept
    answers = tmp_path / "answers.csv"
    for _ in range(2):  # an answers file is replaced
        assert cli.main(["query", str(index), str(edges), "--out", str(answers)]) == 0
    assert answers.read_text().splitlines()[0] == '"src","dst","reaches"'
    answers_pq = tmp_path / "answers.parquet"
    for _ in range(2):
        assert cli.main(["query", str(index), str(edges), "--out", str(answers_pq)]) == 0


def test_two_inputs_of_one_stem_do_not_share_an_index(tmp_path, capsys):
    edges = write_tsv(tmp_path / "e.tsv", [(1, 2), (2, 3)])
    pq.write_table(pa.table({"src": [3, 2], "dst": [2, 1]}), tmp_path / "e.parquet")
    assert cli.main(["build", str(edges)]) == 0
    index = tmp_path / "e.grail.parquet"
    before = index.read_bytes()
    assert cli.main(["build", str(tmp_path / "e.parquet")]) == 2
    err = capsys.readouterr().err
    assert "holds the index of e.tsv" in err and "--out" in err and "e.parquet.grail.parquet" in err
    assert index.read_bytes() == before
    assert cli.main(["build", str(edges)]) == 0  # the same input: rebuilt in place
    assert cli.main(["build", str(tmp_path / "e.parquet"), "--out",
                     str(tmp_path / "e.parquet.grail.parquet")]) == 0
    assert gd.load_index(index).reaches(1, 3) is True
    assert gd.load_index(tmp_path / "e.parquet.grail.parquet").reaches(3, 1) is True


@pytest.mark.slow    # processes of the command line, a few seconds each
def test_build_of_a_folder_named_dot(tmp_path):
    """``build .`` in a folder of Parquet edges builds (the index beside the folder); in a
    folder of none it is an input error, never a traceback."""
    work = tmp_path / "edges"
    work.mkdir()
    pq.write_table(pa.table({"src": [1, 2], "dst": [2, 3]}), work / "part-0.parquet")
    r = run_cli("build", ".", cwd=work)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert gd.load_index(tmp_path / "edges.grail.parquet").reaches(1, 3) is True
    r = run_cli("build", ".", cwd=work)  # its own earlier index beside it is no edge file
    assert r.returncode == 0, r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_input_error(run_cli("build", ".", cwd=empty), "no *.parquet")


def test_messages_of_the_command_line(tmp_path, capsys, monkeypatch):
    """'wrote X' once; the program named as it was run; a database given as the index is not
    advised to be deleted; an empty CSV names its file."""
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2)])
    assert cli.main(["build", str(edges)]) == 0
    assert capsys.readouterr().out.count("wrote ") == 1
    db = tmp_path / "g.duckdb"
    duckdb.connect(str(db)).close()
    assert cli.main(["query", str(db), str(edges)]) == 2
    err = capsys.readouterr().err
    assert "not a grail_duckdb index file" in err and "delete" not in err
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert cli.main(["build", str(empty)]) == 2
    assert "empty.csv" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/grail-duckdb"])
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: grail-duckdb ")
    monkeypatch.setattr(sys, "argv", [str(ROOT / "grail_duckdb" / "__main__.py")])
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m grail_duckdb ")
