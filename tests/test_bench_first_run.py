"""``python -m benchmarks first-run``: each measurement is a fresh process on a Numba cache of
its own, in the package's default mode (not the tests' compiled one); the small graph's run
answers as the library does here; the report renders, as do the committed results of its kind.

Speed is never asserted here: the figures are the bench's to report.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import grail_duckdb as gd
from benchmarks import docs, first_run
from grail_duckdb.tools.generators import citation_dag


def test_each_run_is_a_fresh_process_on_its_own_cache(tmp_path):
    code = ("import os; print(os.environ['NUMBA_CACHE_DIR'], "
            "os.environ.get('GRAIL_DUCKDB_JIT', 'auto'))")
    rec = first_run._timed(["-c", code], tmp_path, first_run.ROOT)
    assert rec["stdout"] == [f"{tmp_path} auto"]
    assert rec["wall_s"] > 0 and rec["cpu_s"] >= 0 and rec["load"] >= 0


@pytest.mark.slow
def test_the_small_run_answers_as_the_library_does(tmp_path):
    rec = first_run._timed(["-c", first_run._SMALL], tmp_path, first_run.ROOT)
    got = json.loads(rec["stdout"][0])
    edges = citation_dag(5000, seed=0)
    idx = gd.build_index(edges, progress=False)
    keys = idx.ids.keys
    pick = np.random.default_rng(1).integers(0, len(keys), (2, 10_000))
    want = idx.reaches(keys.take(pick[0]), keys.take(pick[1])).true_count
    assert got["edges"] == edges.num_rows and got["reachable"] == want
    assert got["build_s"] > 0 and got["reaches_s"] > 0


def test_a_report_renders_with_its_targets():
    figures = {name: {"wall_s": [2.0, 1.5], "cpu_s": [3.0, 2.5], "load": [1.0, 0.5]}
               for name in ("demo (cold)", "warm_up (cached)")}
    report = {"kind": "first_run", "command": "python -m benchmarks first-run",
              "commit": "abc", "machine": {"date": "2026-01-01", "cpu": "x", "cores": 2},
              "repeat": 2, "figures": figures, "targets": first_run.TARGETS}
    text = docs.section("first", report)
    assert "| demo (cold) | 1.5 | 30 | 2.0 / 3.0 (1.0); 1.5 / 2.5 (0.5) |" in text
    assert "| warm_up (cached) | 1.5 | – |" in text
