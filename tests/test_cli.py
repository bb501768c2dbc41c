"""The command line: build (files and file.duckdb:table), query, demo, bench registration."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

import grail_duckdb as gd
from grail_duckdb.plugin import registry as _registry
from grail_duckdb.tools import cli

ROOT = Path(__file__).resolve().parents[1]


def write_tsv(path: Path, edges) -> Path:
    path.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    return path


def test_default_index_path():
    assert cli.default_index_path("/d/cit-HepTh.tsv.gz") == Path("/d/cit-HepTh.grail.parquet")
    assert cli.default_index_path("g.gra") == Path("g.grail.parquet")


def test_build_then_query_csv_and_parquet(tmp_path, capsys):
    edges = write_tsv(tmp_path / "g.tsv", [(1, 2), (2, 3), (3, 1), (3, 4)])
    assert cli.main(["build", str(edges), "--backend", "cpu"]) == 0
    index = tmp_path / "g.grail.parquet"
    assert index.exists()
    err = capsys.readouterr().err
    assert "scc" in err and "ids" in err  # progress lines, one per phase
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


def test_bench_subcommand_is_registered():
    p = cli.parser()
    args = p.parse_args(["bench", "--quick"]) if "--quick" in _bench_help() else None
    assert args is None or args.command == "bench"


def _bench_help() -> str:
    r = subprocess.run([sys.executable, "-m", "grail_duckdb", "bench", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_module_entry_point_help():
    r = subprocess.run([sys.executable, "-m", "grail_duckdb", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "demo" in r.stdout and "build" in r.stdout
