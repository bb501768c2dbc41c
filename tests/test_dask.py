"""grail_duckdb.dask on a LocalCluster (CPU workers, separate processes): lazy, answers equal to
the BFS oracle, NULLs kept, one index load per worker however many partitions it answers."""
from __future__ import annotations

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("dask.distributed")
pd = pytest.importorskip("pandas")

import grail_duckdb as gd  # noqa: E402
import grail_duckdb.dask as gdd  # noqa: E402
from oracle import bfs_pairs  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=50)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    rng = np.random.default_rng(11)
    n = 300
    src, dst = rng.integers(0, n, 900), rng.integers(0, n, 900)
    path = tmp_path_factory.mktemp("dask") / "g.grail.parquet"
    gd.build_index(src, dst, backend="cpu").save(path)
    return src, dst, n, path


def test_answers_equal_the_oracle_partition_by_partition(client, graph):
    src, dst, n, path = graph
    rng = np.random.default_rng(12)
    qs, qt = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    pairs = dd.from_pandas(pd.DataFrame({"a": qs, "b": qt}), npartitions=8)
    out = gdd.reaches(pairs, path, src="a", dst="b", backend="cpu")
    assert all(v == [] for v in client.run(gdd.loaded_indices).values())  # nothing ran yet
    got = out.compute()                                      # lazy until here
    assert list(got.columns) == ["a", "b", "reaches"] and str(got["reaches"].dtype) == "boolean"
    np.testing.assert_array_equal(got["reaches"].to_numpy(bool), bfs_pairs(src, dst, n, qs, qt))
    again = gdd.reaches(pairs, path, src="a", dst="b", backend="cpu").compute()
    assert again["reaches"].equals(got["reaches"])
    loads = client.run(gdd.loaded_indices)
    assert all(v == [(str(path.resolve()), "cpu")] for v in loads.values()), loads


def test_nulls_and_unknown_keys(client, graph):
    _, _, _, path = graph
    df = pd.DataFrame({"src": pd.array([1, None, 5, 10**9], dtype="Int64"),
                       "dst": pd.array([1, 2, None, 10**9], dtype="Int64")})
    got = gdd.reaches(dd.from_pandas(df, npartitions=2), path, backend="cpu").compute()
    assert got["reaches"].tolist() == [True, pd.NA, pd.NA, True]


def test_missing_columns_are_named(graph):
    _, _, _, path = graph
    frame = dd.from_pandas(pd.DataFrame({"x": [1]}), npartitions=1)
    with pytest.raises(ValueError, match="no column 'src'"):
        gdd.reaches(frame, path)
