"""The scale tooling at small scale: the Parquet generator, replicas splitting a call, and the
`python -m benchmarks scale` command (its answers are checked inside it)."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import grail_duckdb as gd
from benchmarks.__main__ import main as benchmarks_main
from grail_duckdb import kernels as _backend
from grail_duckdb.engine.replicas import Replicas
from grail_duckdb.tools import cli
from grail_duckdb.tools.generators import citation_dag, write_citation_parquet
from oracle import bfs_pairs


def test_parquet_generator_writes_the_in_memory_graph_whatever_the_threads(tmp_path):
    a = write_citation_parquet(tmp_path / "a", 3_000_000, mean_citations=1.0, seed=4, threads=1)
    b = write_citation_parquet(tmp_path / "b", 3_000_000, mean_citations=1.0, seed=4, threads=3)
    assert a["files"] == b["files"] == 3
    ta, tb = pq.read_table(tmp_path / "a"), pq.read_table(tmp_path / "b")
    want = citation_dag(3_000_000, mean_citations=1.0, seed=4, threads=2)
    for t in (ta, tb):
        assert t.schema.field("src").type == "int32"
        np.testing.assert_array_equal(t["src"].to_numpy(), want["src"].to_numpy())
        np.testing.assert_array_equal(t["dst"].to_numpy(), want["dst"].to_numpy())
    assert pq.read_schema(tmp_path / "a" / "part-00000.parquet").metadata[b"grail.vertices"] == b"3000000"


def test_cli_build_of_a_folder_writes_the_index_beside_it(tmp_path, capsys):
    write_citation_parquet(tmp_path / "edges", 20_000, mean_citations=3.0, seed=2)
    assert cli.main(["build", str(tmp_path / "edges"), "--backend", "cpu"]) == 0
    idx = gd.load_index(tmp_path / "edges.grail.parquet")
    assert idx.n_vertices == 20_000 and idx.edge_rows == pq.read_table(tmp_path / "edges").num_rows


def _replica_kinds():
    kinds = [("cpu", 3)]
    if _backend.gpu_available():
        kinds.append(pytest.param(("gpu", None), marks=pytest.mark.gpu))
    return kinds


@pytest.mark.parametrize("kind", _replica_kinds())
def test_replicas_split_a_call_and_give_the_oracle_answers(tmp_path, kind):
    backend, count = kind
    rng = np.random.default_rng(8)
    src, dst = rng.integers(0, 500, 2000), rng.integers(0, 500, 2000)
    path = gd.build_index(src, dst, backend="cpu").save(tmp_path / "r.grail.parquet")
    reps = Replicas.load(path, backend=backend, count=count)
    for size in (40_001, 150_001, 150_001, 150_001):  # large calls of one shape: graph replays
        qs, qt = rng.integers(0, 500, size), rng.integers(0, 500, size)
        got = reps.reaches(qs, qt)
        np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False),
                                      np.asarray(bfs_pairs(src, dst, 500, qs, qt), bool))
        assert len(reps.last_stats) == len(reps)
        assert sum(s.queries for s in reps.last_stats) == size


def test_bench_scale_runs_end_to_end(tmp_path):
    out = tmp_path / "out"
    assert benchmarks_main(["scale", "--papers", "3000", "--pairs", "20000", "--batch", "7000",
                     "--backend", "cpu", "--workdir", str(tmp_path / "w"), "--out", str(out),
                     "--io-repeats", "3"]) == 0
    kept = json.loads((out / "scale.json").read_text())
    assert kept["kind"] == "scale" and "--papers 3000" in kept["command"]
    assert kept["machine"]["cores"] >= 1
    res = kept["runs"][0]
    assert res["check"] == {"edges": True, "reversed": True, "self": True}
    assert res["queries"]["answered"] == 20_000 and res["save"]["bytes"] > 0
    assert len(res["save"]["again"]) == len(res["load"]["again"]) == 2
    assert "later loads" in (out / "scale.md").read_text()
    assert "build: csr" in res["memory"] and "ids share of build" in (out / "scale.md").read_text()
