"""``python -m benchmarks layouts`` on a small generated graph: every layout is measured (with
answers checked against the other layouts inside the run), the per-chunk statement agrees with
the whole-column one, and the report renders, as do the committed results of its kind.

Speed is never asserted here: the figures are the bench's to report.
"""
from __future__ import annotations

import argparse
import json

import pytest

from benchmarks import docs, layouts


@pytest.mark.slow
def test_a_small_run_measures_every_layout_and_renders(tmp_path):
    args = layouts.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--workloads", "gen:citation:3000", "--pairs", "4000", "--chunk-pairs", "5000",
         "--threads", "1", "--repeat", "1", "--out", str(tmp_path)])
    assert layouts.run(args) == 0
    report = json.loads((tmp_path / "layouts.json").read_text())
    assert report["kind"] == "layouts" and report["backend"] == "cpu"
    rec = report["graphs"]["citation:3000"]
    figures = rec["layouts 4000"]
    for name in ("int64", "int32", "uint64", "strided int64 view", "DuckDB relation", "int8"):
        assert figures[name]["seconds"] > 0 and figures[name]["ratio"] > 0, name
    assert figures["int64"]["ratio"] == 1.0
    chunk = rec["per chunk 1"]
    assert chunk["pairs"] == 5000 and chunk["per_chunk_seconds"] > 0
    text = docs.section("run", report)
    assert "| DuckDB relation |" in text and "per chunk / whole column" in text
