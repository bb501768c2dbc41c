"""The save's own encoding of the label columns (``indexfile/label_pages.py``, the encoder
``parse_chunks_kernel`` in ``kernels/pages.cu`` and its twin ``kernels/cpu/pages.py``): every
block decodes back to its page, the kernel writes the twin's bytes, and a file whose label
chunks were encoded here reads as pyarrow's own: in pyarrow, in DuckDB, in a load."""
from __future__ import annotations

import io

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.indexfile import SaveSettings, label_pages, page_plan
from grail_duckdb.indexfile import parts as parquet_parts
from grail_duckdb.kernels import gpu_available, to_host
from grail_duckdb.kernels.cpu import CpuKernels
from grail_duckdb.kernels.cpu.pages import lz4_block
from grail_duckdb.kernels.shared import lz4_bound

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")


def _pages(rng, sizes):
    """Pages of the kinds a label column makes: random bytes, small numbers, runs, zeros."""
    kinds = [lambda n: rng.integers(0, 256, n), lambda n: rng.integers(0, 4, n),
             lambda n: np.repeat(rng.integers(0, 256, -(-n // 37)), 37)[:n],
             lambda n: np.zeros(n, np.int64)]
    pages = [kinds[i % len(kinds)](n).astype(np.uint8) for i, n in enumerate(sizes)]
    return np.concatenate(pages) if pages else np.zeros(0, np.uint8), np.array(sizes, np.int64)


def _blocks(src, raw, sizes, blocks):
    """Each block decodes to its page (as pyarrow decodes an LZ4_RAW page)."""
    at = np.concatenate([[0], np.cumsum(raw)[:-1]]).astype(np.int64)
    ends = np.cumsum(sizes)
    for a, n, size, end in zip(at, raw, sizes, ends):
        back = np.zeros(n, np.uint8)
        assert size <= lz4_bound(n)
        assert lz4_block(blocks, end - size, end, back, 0, n)
        np.testing.assert_array_equal(back, src[a:a + n])


SIZES = [0, 1, 12, 13, 17, 100, 4096, 65_536, 65_535, 65_537, 30_000, 65_548, 300_001, 1 << 20]


@given(st.lists(st.integers(0, 3 << 16), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_every_block_decodes_to_its_page(sizes, seed):
    src, raw = _pages(np.random.default_rng(seed), sizes)
    got, blocks = label_pages.encode_pages(CpuKernels(), src, raw)
    _blocks(src, raw, got, blocks)


def test_repeated_bytes_compress():
    src, raw = _pages(np.random.default_rng(0), [65_536] * 4 + [1 << 20] * 4)
    got, blocks = label_pages.encode_pages(CpuKernels(), src, raw)
    _blocks(src, raw, got, blocks)
    assert 65_536 < got[0] < 66_000 and got[3] < 400  # random bytes grow a little, zeros vanish
    assert got[1] < 0.8 * 65_536 and got[2] < 0.15 * 65_536  # 2-bit values; runs of 37
    assert got[4] < 1.01 * (1 << 20) and got[7] < 6000  # a 1 MiB page: chunks joined
    assert got[5] < 0.8 * (1 << 20) and got[6] < 0.15 * (1 << 20)


@pytest.mark.gpu
@needs_gpu
def test_the_kernels_write_the_twins_bytes():
    import cupy as cp
    from grail_duckdb.kernels import kernels_for

    src, raw = _pages(np.random.default_rng(7), SIZES * 20)  # more chunks than warps
    got, blocks = label_pages.encode_pages(CpuKernels(), src, raw)
    dev_got, dev_blocks = label_pages.encode_pages(kernels_for("gpu"), cp.asarray(src), raw)
    np.testing.assert_array_equal(dev_got, got)
    np.testing.assert_array_equal(cp.asnumpy(dev_blocks), blocks)


@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_pages_are_split_as_pyarrow_splits_them(backend, dtype):
    """:func:`split_pages` on the backend: each page byte-stream split, as pyarrow writes a
    page of the same values."""
    xp, rng = backend.xp, np.random.default_rng(2)
    values = rng.integers(0, 2**31 - 1, (3, 1000)).astype(dtype)
    w = values.dtype.itemsize
    got = to_host(label_pages.split_pages(xp, xp.asarray(values), 300)).reshape(3, -1)
    for j in range(3):
        for p, lo in enumerate(range(0, 1000, 300)):
            page = values[j, lo:lo + 300]
            want = page.view(np.uint8).reshape(-1, w).T.reshape(-1)
            np.testing.assert_array_equal(got[j, w * lo:w * (lo + page.shape[0])], want)


def _label_values(rng, rows):
    """A level, an interval's ends: int32 columns as the early label columns hold them."""
    return np.stack([rng.integers(0, 9, rows), rng.integers(0, 2**31 - 1, rows),
                     np.sort(rng.integers(0, 5000, rows))]).astype(np.int32)


def _hub_values(rng, rows):
    """Hub bits: a few distinct words, and words that differ from row to row."""
    few = rng.integers(0, 2**63, 5, dtype=np.uint64)
    return np.stack([few[rng.integers(0, 5, rows)],
                     rng.integers(0, 2**63, rows, dtype=np.uint64)])


@pytest.mark.parametrize("rows", [1, 5, 40_000, 600_000])
@pytest.mark.parametrize("hubs", [False, True])
def test_a_part_of_own_chunks_reads_as_pyarrows(tmp_path, backend, rows, hubs):
    """Label chunks encoded on the backend and joined to pyarrow's part of the same rows:
    int32 columns byte-stream split after the keys and components, uint64 hub bits plain
    before the children's column. pyarrow, DuckDB and a GPU load's page decoder read the
    values back."""
    rng = np.random.default_rng(rows)
    if hubs:
        names, values = ["hub_down_1", "win_up_1"], _hub_values(rng, rows)
        rest = pa.table({"dag_children": pa.nulls(rows, pa.binary())})
    else:
        names, values = ["level", "inner_1", "outer_1"], _label_values(rng, rows)
        rest = pa.table({"key": pa.array(np.arange(rows, dtype=np.int64)),
                         "component": pa.array(np.arange(rows, dtype=np.int32))})
    encoded, = label_pages.encode_parts(backend, [backend.xp.asarray(values)], split=not hubs)
    part = label_pages.with_pages(parquet_parts.encode_part(rest), names, encoded,
                                  before=hubs)
    data = bytes(part.data[:part.data_end]) + parquet_parts.footer([part], {"k": "v"})
    table = pq.read_table(io.BytesIO(data))
    assert table.column_names == (names + rest.column_names if hubs
                                  else rest.column_names + names)
    for name in rest.column_names:
        assert table.column(name).equals(rest.column(name))
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    chunks = page_plan.group_chunks(md, 0, data, {n: values.dtype for n in names})
    path = tmp_path / "part.parquet"
    path.write_bytes(data)
    read = duckdb.connect().execute(f"SELECT {', '.join(names)} FROM read_parquet(?)",
                                    [str(path)]).fetchnumpy()
    for j, name in enumerate(names):
        np.testing.assert_array_equal(table.column(name).to_numpy(), values[j])
        np.testing.assert_array_equal(read[name], values[j])
        np.testing.assert_array_equal(page_plan.decode(data, chunks[name]), values[j])
        column = md.row_group(0).column(table.column_names.index(name))
        assert column.compression == "LZ4" and not column.has_dictionary_page
        assert ("PLAIN" if hubs else "BYTE_STREAM_SPLIT") in column.encodings


@pytest.mark.parametrize("dag,batch", [(False, 1 << 30), (True, 1 << 30), (False, 600 << 10)])
def test_an_index_saved_with_own_chunks_loads_and_reads_in_duckdb(tmp_path, backend, dag,
                                                                  batch):
    """A save that encodes the label columns itself (on a GPU index always; here on either
    backend), its parts in one batch or in several: the loaded labels are the saved ones,
    DuckDB reads the file, and its label chunks, the hub bits' too, are those a GPU load
    decodes itself."""
    knobs = SaveSettings(own_pages="always", part_bytes=256 << 10, encode_batch=batch)
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 60_000, 90_000), rng.integers(0, 60_000, 90_000)
    if dag:
        src, dst = np.minimum(src, dst), np.maximum(src, dst) + 1
    idx = gd.build_index(src, dst, labels=3, backend="cpu", progress=False)
    path = idx.to_backend(backend).save(tmp_path / "own.grail.parquet", settings=knobs)
    back = gd.load_index(path, backend=backend)
    for name, arr in idx.labels.arrays().items():
        np.testing.assert_array_equal(to_host(getattr(back.labels, name)), arr, err_msg=name)
    c = idx.n_components
    got = duckdb.connect().execute(
        "SELECT inner_2 FROM read_parquet(?, file_row_number := true) ORDER BY file_row_number",
        [str(path)]).fetchnumpy()["inner_2"]
    np.testing.assert_array_equal(got[:c], idx.labels.inner[:, 1])
    assert not got[c:].any()
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups > 1
    with open(path, "rb") as fh:
        data = fh.read()
    kinds = {"inner_2": np.int32, "tree_size": np.int32, "hub_down_1": np.uint64}
    for g in range(md.num_row_groups):
        assert set(page_plan.group_chunks(md, g, data, kinds)) == set(kinds)
