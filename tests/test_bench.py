"""The bench command's smoke test: ``--quick`` produces every figure and all three files.

Speed is never asserted here (that is what the bench itself reports); the answers behind the
figures are: every baseline must agree with the engine on the pairs it ran, and the engine's
cut statistics must add up to the number of queries.
"""
from __future__ import annotations

import argparse
import json

import pytest

from benchmarks import bench, sql_paths
from benchmarks import report as bench_report
from benchmarks import baselines as bl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One ``--quick`` run (CPU) shared by the tests of this module."""
    out = tmp_path_factory.mktemp("bench")
    parser = bench.add_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--quick", "--backend", "cpu", "--out", str(out)])
    assert bench.run(args) == 0
    return out, json.loads((out / "bench.json").read_text())


def test_files_exist(quick_run):
    out, _ = quick_run
    for name in ("bench.md", "bench.json", "bench.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_workload_has_every_figure(quick_run):
    _, report = quick_run
    assert report["machine"]["cpu"] and report["machine"]["cores"] >= 1
    assert [w["spec"] for w in report["workloads"]] == bench.QUICK_DATASETS
    for w in report["workloads"]:
        cpu = w["backends"]["cpu"]
        build = cpu["build"]
        for phase in ("ingest", "ids", "csr", "scc", "fingerprint"):
            assert phase in build["phases_seconds"]
        assert sum("labels" in p for p in build["phases_seconds"]) >= 1
        assert build["memory"]["rss_peak_bytes"] >= build["memory"]["rss_start_bytes"] > 0
        assert build["persistence"]["size_bytes"] > 0
        assert build["persistence"]["save_seconds"] > 0
        assert build["persistence"]["etl_save_seconds"] > 0
        assert build["persistence"]["etl_build_seconds"] > 0
        for graph in ("input graph", "condensed DAG"):
            assert cpu["gteps"][graph]["roots"] <= 64
        assert cpu["gteps"]["input graph"]["gteps"] > 0
        for qset in bench_report.QUERY_SETS:
            eng = cpu["queries"]["grail_duckdb"][qset]
            assert eng["seconds"] > 0 and eng["total_pairs"] == bench.QUICK_QUERIES
            assert cpu["queries"]["plain bitmask BFS (no cuts)"][qset]["agree"] is True
            for name in ("networkx has_path", "scipy BFS", "duckdb recursive CTE"):
                fig = w["baselines"][name][qset]
                assert fig["agree"] is True, (w["name"], name, qset)
                assert fig["seconds"] > 0 and fig["run_pairs"] >= 1
            assert w["baselines"]["identity arrow UDF (floor)"][qset]["seconds"] > 0
            if cpu.get("sql_note") is None:  # the SQL layer is there: its counts must agree
                for method in sql_paths._SQL_QUERIES:
                    assert cpu["queries"][method][qset]["agree"] is True, (method, qset)


def test_cut_statistics_add_up(quick_run):
    _, report = quick_run
    for w in report["workloads"]:
        for qset, fig in w["backends"]["cpu"]["queries"]["grail_duckdb"].items():
            st = dict(fig["stats"])
            total = st.pop("queries")
            parts = [st.pop(k) for k in ("bounded_search", "deep_search")]
            assert sum(parts) == st["searched"] >= st.pop("search_reachable")
            assert sum(st.values()) == total == bench.QUICK_QUERIES
        reach = w["backends"]["cpu"]["queries"]["grail_duckdb"]["reachable"]
        assert reach["reachable_fraction"] == 1.0


def test_markdown_names_machine_and_command(quick_run):
    out, report = quick_run
    md = (out / "bench.md").read_text()
    assert report["machine"]["cpu"] in md
    assert report["command"] in md and "--quick" not in report["command"]
    for w in report["workloads"]:
        assert f"### Queries: {w['name']}" in md


def test_command_line_reproduces_settings():
    parser = bench.add_arguments(argparse.ArgumentParser())
    s = bench.settings(parser.parse_args(["--quick"]))
    assert bench.command_line(s).startswith("python -m benchmarks run --datasets")
    again = bench.settings(parser.parse_args(bench.command_line(s).split()[4:]))
    assert again == {**s, "quick": False}


@pytest.mark.parametrize("spec", ["gen:citation", "gen:random:100", "gen:rmat:x", "gen:tree:5"])
def test_bad_generator_spec_is_refused(spec):
    with pytest.raises(bench.BenchInputError, match="gen:citation:N"):
        bench.check_workload(spec)


def test_unknown_workload_is_refused_before_any_work(tmp_path, capsys):
    parser = bench.add_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--datasets", "gen:citation:100", "no-such-graph",
                              "--out", str(tmp_path)])
    assert bench.run(args) == 2
    assert "unknown workload 'no-such-graph'" in capsys.readouterr().err
    assert not (tmp_path / "bench.json").exists()


def test_measure_scales_a_sample():
    import numpy as np
    import pyarrow as pa

    src = pa.array(range(1000))
    calls = []

    def slow_identity(s, d):
        calls.append(len(s))
        return np.asarray(pa.compute.equal(s, d))

    m = bl.measure(slow_identity, src, src, np.ones(1000, bool), budget=0.0, probe=10)
    assert m.sampled and m.run_pairs == 10 and m.total == 1000 and m.agree
    m = bl.measure(slow_identity, src, src, np.ones(1000, bool), budget=60.0, probe=10)
    assert not m.sampled and m.run_pairs == 1000 and m.agree
