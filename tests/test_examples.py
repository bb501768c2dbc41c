"""The examples on the real cit-HepTh graph (skipped without the datasets folder:
$GRAIL_DUCKDB_DATASETS or ../shared/datasets): answers equal to networkx and to the recursive
CTE; the scalar and whole-column paths agree."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import networkx as nx
import pytest

from benchmarks.datasets import DATASETS
from harness import ROOT, child_env

HEPTH = DATASETS["cit-HepTh"].file() or Path("/nonexistent")

pytestmark = pytest.mark.datasets


@pytest.fixture(scope="module")
def hepth():
    if not HEPTH.exists():
        pytest.skip("the datasets folder is absent")
    from grail_duckdb.tools.readers import read_edges

    return read_edges(HEPTH)


@pytest.fixture(scope="module")
def answers(hepth):
    spec = importlib.util.spec_from_file_location("citation_analytics",
                                                  ROOT / "examples" / "citation_analytics.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(["--edges", str(HEPTH)])  # asserts scalar == whole column itself


@pytest.mark.slow
def test_examples_match_networkx(hepth, answers):
    g = nx.DiGraph()
    g.add_edges_from(zip(hepth.column("src").to_pylist(), hepth.column("dst").to_pylist()))
    paper, direct = answers["most_cited"][0]
    assert direct == sum(1 for _ in g.predecessors(paper))
    later = nx.ancestors(g, paper)  # papers with a citation chain to `paper`
    assert answers["builds_on"] == [(len(later),)]
    assert answers["builds_on_cte"] == answers["builds_on"]
    best, influenced = answers["most_influential"][0]
    import duckdb

    sample = {r[0] for r in duckdb.execute(
        "SELECT id FROM (SELECT unnest($ids) AS id) WHERE hash(id) % 10 = 0",
        {"ids": list(g.nodes)}).fetchall()}
    assert influenced == len(nx.ancestors(g, best) & sample - {best})


@pytest.mark.slow
def test_demo_on_hepth_runs_both_paths(capsys):
    if not HEPTH.exists():
        pytest.skip("the datasets folder is absent")
    from grail_duckdb.tools.cli import main

    assert main(["demo", "--edges", str(HEPTH), "--scalar"]) == 0
    out = capsys.readouterr().out
    assert "13199" in out and "DIFFERENT" not in out and out.count("same answer") == 3


@pytest.mark.slow
def test_example_script_closes_what_it_opens():
    """Run as a script: no "nanobind: leaked ..." lines at exit (a connection left open)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "examples" / "citation_analytics.py"),
                        "--papers", "2000"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=child_env())
    assert r.returncode == 0, r.stderr
    assert "leaked" not in r.stderr and "builds_on" in r.stdout
