"""The build's memory plan (issue 12): packed edges, rows sorted and deduplicated in place,
ids by the cheapest path the keys allow, edges streamed in slices from any input. Every
operation runs on both backends with the same test bodies and is checked against NumPy."""
from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grail_duckdb as gd
from grail_duckdb import kernels as _backend
from grail_duckdb.engine import ids as ids_module
from grail_duckdb.engine import ingest, transfer
from grail_duckdb.engine.csr import forward_and_reverse
from grail_duckdb.engine.ids import assign_pairs
from grail_duckdb.engine.ingest import edge_stream, edge_table
from grail_duckdb.kernels import CSR, kernels_for, to_host
from grail_duckdb.kernels.shared import pack_pairs, unpack_pairs
from oracle import bfs_pairs

_GPU = pytest.mark.skipif(not _backend.gpu_available(), reason="no CUDA device visible to CuPy")


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=[pytest.mark.gpu, _GPU])])
def k(request):
    return kernels_for(request.param)


@pytest.fixture
def small_slices(monkeypatch):
    """Slices of 7 edges, pieces of 5 and pinned buffers of 13, so that every pass runs over
    many slices and the read's buffers rotate many times."""
    monkeypatch.setattr(ingest, "CHUNK", 7)
    monkeypatch.setattr(ingest, "PIECE", 5)
    monkeypatch.setattr(transfer, "SLICE", 13)


def _rows_oracle(src, dst, n):
    """Sorted distinct targets per row, self-loops dropped."""
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
    indptr = np.searchsorted(pairs[:, 0], np.arange(n + 1), side="left") if len(pairs) else np.zeros(n + 1, np.int64)
    return indptr, pairs[:, 1] if len(pairs) else np.zeros(0, np.int64)


@pytest.mark.parametrize("n,m,seed", [(1, 0, 0), (5, 40, 1), (300, 5000, 2), (9000, 30000, 3)])
def test_rows_are_sorted_distinct_without_self_loops(k, n, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    src[: m // 10], dst[: m // 10] = src[m // 10: 2 * (m // 10)], dst[m // 10: 2 * (m // 10)]
    fwd, rev = forward_and_reverse(k, k.xp.asarray(pack_pairs(np, src, dst)), n)
    for g, (s, d) in ((fwd, (src, dst)), (rev, (dst, src))):
        ptr, idx = _rows_oracle(s, d, n)
        np.testing.assert_array_equal(to_host(g.indptr), ptr)
        np.testing.assert_array_equal(to_host(g.indices), idx)
        assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32


def test_rows_with_long_runs_of_empty_rows_and_duplicated_self_loops(k):
    src = np.array([9, 9, 9, 9, 2, 2, 9], np.int64)
    dst = np.array([9, 9, 9, 3, 2, 2, 1], np.int64)
    ptr, idx = k.csr_of_pairs(k.xp.asarray(pack_pairs(np, src, dst)), 20)
    assert to_host(ptr).tolist() == [0] * 10 + [2] * 11
    assert to_host(idx).tolist() == [1, 3]


def test_component_pairs(k):
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 50, 400), rng.integers(0, 50, 400)
    ptr, idx = _rows_oracle(src, dst, 50)
    comp = rng.integers(0, 7, 50).astype(np.int32)
    g = CSR(k.xp.asarray(ptr.astype(np.int64)), k.xp.asarray(idx.astype(np.int32)))
    got = to_host(k.component_pairs(g, k.xp.asarray(comp)))
    rows = np.repeat(np.arange(50), np.diff(ptr))
    np.testing.assert_array_equal(got, pack_pairs(np, comp[rows], comp[idx]))


def test_edge_hash_sum_is_order_independent_and_equal_on_both_backends(k):
    rng = np.random.default_rng(5)
    pairs = pack_pairs(np, rng.integers(0, 99, 1000), rng.integers(0, 99, 1000))
    want = kernels_for("cpu").edge_hash_sum(pairs)
    assert k.edge_hash_sum(k.xp.asarray(pairs[::-1].copy())) == want


def _ids_oracle(src, dst, extra=()):
    keys = np.unique(np.concatenate([src, dst, np.asarray(extra, np.int64)]))
    return keys, np.searchsorted(keys, src), np.searchsorted(keys, dst)


@pytest.mark.parametrize("case", ["identity", "dense offset", "dense gaps", "sparse 32-bit",
                                  "general 64-bit", "negative", "extra vertices"])
def test_ids_paths_give_sorted_dense_ids(k, small_slices, case):
    rng = np.random.default_rng(6)
    src, dst = rng.integers(0, 200, 150), rng.integers(0, 200, 150)
    extra = None
    if case == "identity":
        table = edge_table(src, dst, vertices=250)
    else:
        if case == "dense offset":
            src, dst = src + 10**12, dst + 10**12
        elif case == "dense gaps":
            src, dst = src * 3 + 5, dst * 3 + 5
        elif case == "sparse 32-bit":
            src, dst = src * 10**6, dst * 10**6
        elif case == "general 64-bit":
            src, dst = src * 10**13 - 7, dst * 10**13 - 7
        elif case == "negative":
            src, dst = src - 100, dst - 150
        else:
            extra = np.array([10**6, 3, 5])
        table = pa.table({"src": src, "dst": dst})
    stream = edge_stream(table, extra_vertices=extra)
    ids, pairs = assign_pairs(stream, k.xp)
    s, d = (to_host(a) for a in unpack_pairs(k.xp, pairs))
    keys, ws, wd = _ids_oracle(src, dst, np.arange(250) if case == "identity" else
                               (extra if extra is not None else ()))
    assert ids.keys.to_pylist() == keys.tolist()
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(d, wd)
    probe = np.concatenate([keys, keys + 1, [-(2**62), 2**62]])
    want = np.where(np.isin(probe, keys), np.searchsorted(keys, probe), -1)
    np.testing.assert_array_equal(to_host(ids.encode(pa.array(probe))), want)


def test_string_ids(k, small_slices):
    src = pa.array(["b", "a", "z", "b"])
    dst = pa.array(["a", "c", "a", "b"])
    ids, pairs = assign_pairs(edge_stream(src, dst), k.xp)
    assert ids.keys.to_pylist() == ["a", "b", "c", "z"]
    s, d = (to_host(a).tolist() for a in unpack_pairs(k.xp, pairs))
    assert (s, d) == ([1, 0, 3, 1], [0, 2, 0, 1])


def _inputs(tmp_path, table):
    """The same edges as a Table, a Parquet file, a folder of Parquet files, a
    RecordBatchReader and a DuckDB relation."""
    one = tmp_path / "edges.parquet"
    pq.write_table(table, one)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, lo in enumerate(range(0, table.num_rows, 700)):
        pq.write_table(table.slice(lo, 700), folder / f"part-{i:03d}.parquet")
    con = duckdb.connect()
    con.register("e", table)
    return {"table": table, "file": str(one), "folder": folder,
            "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches(300)),
            "relation": con.sql("SELECT * FROM e")}


def test_every_input_streams_to_the_same_index(tmp_path, small_slices):
    rng = np.random.default_rng(7)
    table = pa.table({"src": rng.integers(0, 400, 3000), "dst": rng.integers(0, 400, 3000)})
    want = gd.build_index(table, backend="cpu")
    qs, qd = rng.integers(0, 400, 3000), rng.integers(0, 400, 3000)
    oracle = bfs_pairs(table["src"].to_numpy(), table["dst"].to_numpy(), 400, qs, qd)
    for name, edges in _inputs(tmp_path, table).items():
        idx = gd.build_index(edges, backend="cpu")
        assert idx.fingerprint == want.fingerprint, name
        assert idx.reaches(qs, qd).to_pylist() == list(oracle), name


def test_a_folder_keeps_the_vertex_count_of_its_files(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    pq.write_table(edge_table(np.array([0, 1]), np.array([1, 2]), vertices=6), folder / "a.parquet")
    pq.write_table(edge_table(np.array([3]), np.array([4]), vertices=6), folder / "b.parquet")
    idx = gd.build_index(folder, backend="cpu")
    assert idx.n_vertices == 6
    assert idx.reaches([5, 0, 3], [5, 2, 4]).to_pylist() == [True, True, True]


def test_parquet_input_errors_name_the_problem(tmp_path):
    with pytest.raises(gd.EdgeInputError, match="no \\*.parquet"):
        gd.build_index(tmp_path, backend="cpu")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "x.parquet")
    with pytest.raises(gd.EdgeInputError, match="has no columns .src."):
        gd.build_index(tmp_path / "x.parquet", backend="cpu")


def test_the_old_columns_api_still_gives_the_same_ids(small_slices):
    s, d = np.array([30, 10, 10]), np.array([10, 20, 30])
    ids, si, di = ids_module.assign_ids(pa.array(s), pa.array(d))
    assert (si.tolist(), di.tolist(), ids.n) == ([2, 0, 0], [0, 1, 2], 3)


_KEY_TYPES = {"int8": (pa.int8(), -100), "int16": (pa.int16(), -30000), "int32": (pa.int32(), -2**31),
              "uint8": (pa.uint8(), 0), "uint16": (pa.uint16(), 60000), "uint32": (pa.uint32(), 2**32 - 300),
              "int64": (pa.int64(), -2**62), "uint64": (pa.uint64(), 2**63 - 400),
              "dictionary": (pa.dictionary(pa.int32(), pa.int64()), 10**15)}


def _typed_edges(name: str, seed: int):
    typ, base = _KEY_TYPES[name]
    rng = np.random.default_rng(seed)
    span = 200 if name not in ("int8", "uint8") else 100
    src, dst = base + rng.integers(0, span, 120), base + rng.integers(0, span, 120)
    value = typ.value_type if pa.types.is_dictionary(typ) else typ
    cols = [pa.array(c.tolist(), value) for c in (src, dst)]
    if pa.types.is_dictionary(typ):
        cols = [c.dictionary_encode() for c in cols]
    return pa.table({"src": cols[0], "dst": cols[1]}), src, dst


@pytest.mark.parametrize("where", ["table", "parquet", "parquet without statistics"])
@pytest.mark.parametrize("name", sorted(_KEY_TYPES))
def test_every_key_type_reads_to_the_same_ids_from_tables_and_parquet(k, small_slices, tmp_path,
                                                                      name, where):
    """The read packs narrow keys as bits (offset on the device afterwards) and wide ones as
    offsets from their range (a pass, or the Parquet statistics): the same ids either way."""
    table, src, dst = _typed_edges(name, 11)
    edges = table
    if where != "table":
        folder = tmp_path / "e"
        folder.mkdir()
        for i, lo in enumerate(range(0, table.num_rows, 50)):
            pq.write_table(table.slice(lo, 50), folder / f"p{i}.parquet", row_group_size=17,
                           write_statistics=where == "parquet")
        edges = folder
    ids, pairs = assign_pairs(edge_stream(edges), k.xp)
    keys, ws, wd = _ids_oracle(np.array(src, object), np.array(dst, object))
    assert ids.keys.to_pylist() == [int(x) for x in keys]
    s, d = (to_host(a) for a in unpack_pairs(k.xp, pairs))
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(d, wd)


def test_keys_zero_to_n_need_no_table_and_wrong_metadata_is_caught(k, small_slices):
    src, dst = np.array([0, 1, 2, 3], np.int32), np.array([1, 2, 3, 4], np.int32)
    ids, _ = assign_pairs(edge_stream(edge_table(src, dst, vertices=7)), k.xp)
    assert ids.key_range() == (0, 7) and ids._table is None   # nothing made in the build
    assert ids.encode(pa.array([6, 7, -1])).tolist() == [6, -1, -1]
    # metadata says 3 vertices but the keys go up to 4: the read's min/max sees it
    ids, pairs = assign_pairs(edge_stream(edge_table(src, dst, vertices=3)), k.xp)
    assert ids.keys.to_pylist() == [0, 1, 2, 3, 4]
    ids, _ = assign_pairs(edge_stream(edge_table(src + 5, dst + 5)), k.xp)   # 5..9, no gaps
    assert ids.key_range() == (5, 5)


def test_a_null_in_a_parquet_row_group_is_refused_with_its_place(tmp_path):
    folder = tmp_path / "e"
    folder.mkdir()
    pq.write_table(pa.table({"src": [1, 2], "dst": [2, 3]}), folder / "a.parquet")
    pq.write_table(pa.table({"src": [1, None], "dst": [2, 3]}), folder / "b.parquet")
    with pytest.raises(gd.EdgeInputError, match="b.parquet.*NULL endpoint"):
        gd.build_index(folder, backend="cpu")
