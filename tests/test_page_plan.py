"""The load's own decoding of label pages (``indexfile/page_plan.py``, ``kernels/pages.cu`` and its
Numba twin ``kernels/cpu/pages.py``): pages as pyarrow writes them (the index's encodings, one
page or many, values random, small, repeated, constant), decoded value for value as pyarrow
decodes them, on the host and on a GPU, placed as a load places them; chunks of other kinds
left to pyarrow; damaged pages refused."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grail_duckdb.indexfile import page_plan
from grail_duckdb.indexfile.format import write_options
from grail_duckdb.kernels import gpu_available
from grail_duckdb.kernels.shared import PAGE_DST, PAGE_LEN, PAGE_SCRATCH, PAGE_SRC

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")


def _file(columns: dict, nullable: bool = False, **options) -> tuple[bytes, pq.FileMetaData]:
    """One row group of ``columns`` (name -> NumPy values) written by pyarrow: its bytes and
    metadata (``options``: the writer's; by default the index's own, :func:`write_options`)."""
    names = list(columns)
    if not options:
        options = write_options(names, "int", 1)
    schema = pa.schema([pa.field(n, pa.from_numpy_dtype(v.dtype), nullable=nullable)
                        for n, v in columns.items()])
    out = io.BytesIO()
    rows = len(next(iter(columns.values())))
    pq.write_table(pa.table([pa.array(v) for v in columns.values()], schema=schema), out,
                   row_group_size=max(rows, 1), store_schema=False, **options)
    data = out.getvalue()
    return data, pq.ParquetFile(io.BytesIO(data)).metadata


def _chunks(data: bytes, md: pq.FileMetaData, columns: dict) -> dict:
    return page_plan.group_chunks(md, 0, data, {n: v.dtype for n, v in columns.items()})


def _values(rng, rows: int) -> dict:
    """Columns of the kinds an index holds, under the index's names (so its encodings)."""
    return {
        "inner_1": rng.integers(0, 2**31 - 1, rows).astype(np.int32),  # random ranks
        "outer_1": np.sort(rng.integers(0, 5_000, rows)).astype(np.int32),  # near-sorted
        "level": rng.integers(0, 6, rows).astype(np.int32),  # small numbers
        "tree_size": np.ones(rows, np.int32),  # constant: long matches at offset 1
        "tree_post": np.repeat(rng.integers(-1, 9, -(-rows // 7)), 7)[:rows].astype(
            np.int32),  # runs, negatives
        "win_down_1": np.where(rng.random(rows) < 0.9, 0, 1 << rng.integers(0, 64, rows)
                               ).astype(np.uint64),  # sparse bits, PLAIN + LZ4
        "win_up_1": rng.integers(0, 2**64 - 1, rows, dtype=np.uint64),  # incompressible
    }


def _index_file(rng, rows: int, page_rows: int | None):
    """Columns of every kind (:func:`_values`) written with the index's options (pages of at
    most ``page_rows`` rows where given): ``(columns, bytes, chunks)``, every column's chunk
    one the load decodes itself."""
    columns = _values(rng, rows)
    options = write_options(list(columns), "int", 1)
    if page_rows:
        options["max_rows_per_page"] = page_rows
    data, md = _file(columns, **options)
    chunks = _chunks(data, md, columns)
    assert set(chunks) == set(columns)
    return columns, data, chunks


def _cpu(data: bytes, chunks: dict) -> dict:
    return {name: page_plan.decode(data, chunk) for name, chunk in chunks.items()}


@pytest.mark.parametrize("rows,page_rows", [(1, None), (1_000, None), (20_001, None),
                                            (50_000, 4_096), (3, 1)])
def test_pages_decode_as_pyarrow_reads_them(rows, page_rows):
    """Every column of the index's kinds, one page or many (pyarrow's 20,000-row pages, and
    smaller ones), decoded on the host exactly as pyarrow reads it."""
    columns, data, chunks = _index_file(np.random.default_rng(rows), rows, page_rows)
    for name, got in _cpu(data, chunks).items():
        assert got.dtype == columns[name].dtype
        np.testing.assert_array_equal(got, columns[name])


@pytest.mark.parametrize("encoding,compression", [("BYTE_STREAM_SPLIT", "none"),
                                                  ("PLAIN", "none"), ("PLAIN", "lz4"),
                                                  ("BYTE_STREAM_SPLIT", "lz4")])
@given(st.lists(st.integers(-2**31, 2**31 - 1) | st.sampled_from([0, 1, -1, 255, 256]),
                min_size=1, max_size=3_000))
def test_any_int32_values_decode(encoding, compression, values):
    """Whatever the values (repeats, bytes that split into runs), both encodings, LZ4 or
    not."""
    col = {"x": np.array(values, np.int32), "y": np.array(values, np.int64) * 3}
    data, md = _file(col, use_dictionary=False, compression=compression,
                     column_encoding={"x": encoding, "y": encoding}, max_rows_per_page=700)
    chunks = _chunks(data, md, col)
    assert set(chunks) == {"x", "y"}
    for name, got in _cpu(data, chunks).items():
        np.testing.assert_array_equal(got, col[name])


def test_other_chunks_are_left_to_pyarrow():
    """A dictionary (the hub bits), a delta encoding, zstd, a nullable column, or a dtype
    other than the destination's: no pages of its own, pyarrow decodes them."""
    v = np.arange(5_000, dtype=np.int32) % 7
    data, md = _file({"hub_down_1": v.astype(np.uint64), "component": v})  # index encodings
    assert not _chunks(data, md, {"hub_down_1": v.astype(np.uint64), "component": v})
    data, md = _file({"x": v}, use_dictionary=False, compression="zstd")
    assert not _chunks(data, md, {"x": v})
    data, md = _file({"x": v}, nullable=True, use_dictionary=False, compression="lz4")
    assert not _chunks(data, md, {"x": v})
    data, md = _file({"x": v}, use_dictionary=False, compression="lz4")
    assert not page_plan.group_chunks(md, 0, data, {"x": np.dtype(np.uint64)})
    assert set(_chunks(data, md, {"x": v})) == {"x"}


def _damaged(rows: int = 30_000):
    """A chunk of LZ4 pages, and copies of its bytes and table with each kind of damage: a
    page's bytes overwritten (lengths that run past the page), a page cut short, a page
    whose bytes claim more than they hold."""
    col = {"inner_1": np.random.default_rng(3).integers(0, 1_000, rows).astype(np.int32)}
    data, md = _file(col, **{**write_options(list(col), "int", 1), "max_rows_per_page": 8_000})
    chunk = _chunks(data, md, col)["inner_1"]
    t = chunk.table
    cases = []
    garbled = bytearray(data)
    a = chunk.start + int(t[1, PAGE_SRC])
    garbled[a:a + int(t[1, PAGE_LEN])] = b"\xff" * int(t[1, PAGE_LEN])
    cases.append((bytes(garbled), t))
    short = t.copy()
    short[0, PAGE_LEN] -= 5
    cases.append((data, short))
    offset = bytearray(data)  # the first match's offset set past the bytes written so far
    at = chunk.start + int(t[0, PAGE_SRC])
    lit = offset[at] >> 4
    pos = at + 1
    if lit == 15:
        while offset[pos] == 255:
            pos += 1
        lit += sum(offset[at + 1:pos + 1])
        pos += 1
    pos += lit
    offset[pos:pos + 2] = (0xFFFF).to_bytes(2, "little")
    cases.append((bytes(offset), t))
    return col, chunk, cases


def test_damaged_pages_are_refused_on_the_host():
    col, chunk, cases = _damaged()
    for data, table in cases:
        bad = page_plan.Chunk(chunk.name, chunk.start, chunk.stop, chunk.dtype, table)
        with pytest.raises(ValueError, match="does not decode"):
            page_plan.decode(data, bad)


def _device(data: bytes, chunks: dict, rows: int, kept=None):
    """The chunks decoded on the GPU (:func:`~grail_duckdb.kernels.upload_pages`, as a load
    calls it: their bytes one after the other, one table), their first ``kept`` rows placed
    (all: None), the rest of their destinations left zero: ``({name: host values}, damage
    flag)``."""
    import cupy as cp
    from grail_duckdb.kernels import kernels_for, upload_pages, upload_staging

    outs, tables, runs, at, scratch = {}, [], [], 0, 0
    for name, ch in chunks.items():
        outs[name] = dst = cp.zeros(rows, ch.dtype)
        t = ch.table.copy()
        t[:, PAGE_SRC] += at
        t[t[:, PAGE_SCRATCH] >= 0, PAGE_SCRATCH] += scratch
        t[:, PAGE_DST] = dst.data.ptr
        tables.append(t)
        runs.append(np.frombuffer(data, np.uint8, count=ch.stop - ch.start, offset=ch.start))
        at, scratch = at + ch.stop - ch.start, scratch + ch.scratch
    err = cp.zeros(1, cp.int32)
    cp.cuda.Device().synchronize()
    upload_pages(kernels_for("gpu"), upload_staging(cp), runs, np.concatenate(tables),
                 rows if kept is None else kept, scratch, err)
    cp.cuda.Device().synchronize()
    return {name: cp.asnumpy(v) for name, v in outs.items()}, int(err[0])


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("rows,page_rows", [(1, None), (20_001, None), (50_000, 4_096),
                                            (40_000, 8)])  # more pages than blocks
@pytest.mark.parametrize("placed", [False, True])
def test_pages_decode_on_the_device_as_on_the_host(rows, page_rows, placed):
    """The kernel against its Numba twin and pyarrow, every row or the rows before a
    bound inside a page (a row group past the last component: its rows after it not written)."""
    rng = np.random.default_rng(rows + placed)
    columns, data, chunks = _index_file(rng, rows, page_rows)
    kept = int(rng.integers(0, rows)) if placed else rows
    got, err = _device(data, chunks, rows, kept)
    assert not err
    host = _cpu(data, chunks)
    for name, values in got.items():
        np.testing.assert_array_equal(values[:kept], host[name][:kept])
        np.testing.assert_array_equal(values[:kept], columns[name][:kept])
        assert not values[kept:].any()


@pytest.mark.gpu
@needs_gpu
def test_damaged_pages_are_refused_on_the_device():
    col, chunk, cases = _damaged()
    for data, table in cases:
        bad = page_plan.Chunk(chunk.name, chunk.start, chunk.stop, chunk.dtype, table)
        _, err = _device(data, {"inner_1": bad}, 30_000)
        assert err


@pytest.mark.parametrize("spec", ["gen:rmat:12:8", "gen:citation:20000"])
@pytest.mark.parametrize("own", [False, True])
def test_an_index_file_leaves_only_the_hub_bits_of_its_labels_to_pyarrow(tmp_path, spec, own):
    """In a file the index's save writes (a graph with cycles, a DAG), a GPU load decodes
    every label column itself but the hub bits of a file that pyarrow encoded (dictionaries;
    a GPU index's save encodes them itself, ``own``, and plain), in every row group, and each
    decodes as pyarrow reads it: a change of encodings that took a column off the device's
    path fails here, not only in a benchmark."""
    import mmap

    import grail_duckdb as gd
    from benchmarks.bench import load_workload
    from grail_duckdb.indexfile import SaveSettings, read_metadata
    from grail_duckdb.indexfile.format import label_names

    path = tmp_path / "i.grail.parquet"
    gd.build_index(load_workload(spec).edges, backend="cpu", progress=False).save(
        path, settings=SaveSettings(own_pages="always" if own else "never"))
    meta = read_metadata(path)
    names = label_names(meta.labels, meta.hub_words, meta.win_words)
    # the window hubs' columns are in the file of the DAG deeper than a window
    assert bool(meta.win_words) == spec.startswith("gen:citation")
    dtypes = {n: np.dtype(np.uint64 if n.startswith(("hub_", "win_")) else np.int32)
              for n in names}
    pf = pq.ParquetFile(path)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for g in range(pf.metadata.num_row_groups):
            chunks = page_plan.group_chunks(pf.metadata, g, mapped, dtypes)
            assert set(chunks) == {n for n in names if own or not n.startswith("hub_")}
            table = pf.read_row_group(g, columns=list(chunks))
            for name, chunk in chunks.items():
                np.testing.assert_array_equal(page_plan.decode(mapped, chunk),
                                              table.column(name).to_numpy())


# --- page headers read without the interpreter (indexfile/page_headers.page_table) --------
def _thrift(depth: int = 3):
    """Compact-protocol values of any type: ``(type, value)`` as :mod:`.thrift`
    writes them (structs, lists and maps nested ``depth`` deep at most)."""
    leaves = st.one_of(
        st.tuples(st.just(3), st.integers(0, 255)),
        st.tuples(st.sampled_from([4, 5, 6]), st.integers(-2**62, 2**62)),
        st.tuples(st.just(7), st.binary(min_size=8, max_size=8)),
        st.tuples(st.just(8), st.binary(max_size=40)))
    if depth == 0:
        return leaves
    inner = _thrift(depth - 1)
    lists = st.tuples(st.sampled_from([9, 10]), inner.flatmap(
        lambda tv: st.lists(st.just(tv[1]), max_size=17).map(lambda items: (tv[0], items))))
    bools = st.tuples(st.just(9), st.lists(st.integers(0, 1), max_size=20).map(
        lambda items: (1, items)))
    maps = st.tuples(st.just(11), st.tuples(leaves, inner).flatmap(
        lambda kv: st.lists(st.just((kv[0][1], kv[1][1])), max_size=5).map(
            lambda items: (kv[0][0], kv[1][0], items))))
    return st.one_of(leaves, lists, bools, maps, _structs(depth - 1))


def _structs(depth: int):
    """A struct's fields (ids rising by 1 to 40, so that some take a varint of their own) as
    ``(12, [[fid, type, value], ...])``; booleans live in their field's type."""
    field = st.one_of(_thrift(depth).map(list), st.sampled_from([[1, None], [2, None]]))
    return st.lists(st.tuples(st.integers(1, 40), field), max_size=6).map(lambda fs: (12, [
        [sum(step for step, _ in fs[:i + 1]), typ, value] for i, (_, (typ, value))
        in enumerate(fs)]))


@given(_structs(3), st.binary(max_size=8))
def test_any_thrift_struct_is_skipped_to_its_end(struct, tail):
    """The walker's end of a struct is the project's Thrift reader's (indexfile.thrift), with
    or without bytes after it; a struct cut short does not decode."""
    from grail_duckdb.indexfile.page_headers import _skip
    from grail_duckdb.indexfile.thrift import read_struct as _read_struct
    from grail_duckdb.indexfile.thrift import write_struct as _write_struct

    out = bytearray()
    _write_struct(out, struct[1])
    buf = np.frombuffer(bytes(out) + tail, np.uint8)
    assert _skip(buf, 0, 12) == _read_struct(bytes(out), 0)[1] == len(out)
    assert _skip(np.frombuffer(bytes(out[:-1]), np.uint8), 0, 12) == -1


@given(st.integers(-1, 3), st.integers(-5, 1 << 20), st.integers(-5, 1 << 20),
       st.integers(-1, 1 << 18), st.sampled_from([0, 2, 8, 9]), st.booleans(), st.booleans(),
       _structs(1))
def test_page_headers_read_as_the_thrift_reader_reads_them(kind, raw, size, values,
                                                           encoding, crc, stats, extra):
    """Headers with and without a checksum, statistics or unknown fields: the walker finds
    the fields that :func:`~grail_duckdb.indexfile.page_plan.chunk_pages` needs where the
    project's Thrift reader finds them, or refuses a header without them."""
    from grail_duckdb.indexfile.page_headers import _header
    from grail_duckdb.indexfile.thrift import read_struct as _read_struct
    from grail_duckdb.indexfile.thrift import write_struct as _write_struct

    data = [[1, 5, values], [2, 5, encoding], [3, 5, 3], [4, 5, 3]]
    if stats:
        data.append([5, 12, [[1, 8, b"\x01\x02"], [5, 6, 7], [7, 1, None]]])
    fields = [[1, 5, kind], [2, 5, raw], [3, 5, size]] + ([[4, 5, 12345]] if crc else [])
    if kind >= 0:
        fields.append([5, 12, data])
    fields += [[f + 10, t, v] for f, t, v in extra[1]]
    out = bytearray()
    _write_struct(out, fields)
    got = np.zeros(5, np.int64)
    body = _header(np.frombuffer(bytes(out), np.uint8), 0, got)
    head, end = _read_struct(bytes(out), 0)
    if kind < 0:  # no data page header: refused
        assert body == -1
    else:
        assert body == end == len(out)
        assert got.tolist() == [kind, raw, size, values, encoding]


@pytest.mark.parametrize("stats,crc", [(True, False), (False, True), (True, True)])
def test_pages_with_statistics_and_checksums_decode(stats, crc):
    """pyarrow's pages with statistics in their headers and checksums: read past, decoded as
    pyarrow decodes them; version-2 data pages are left to pyarrow."""
    rng = np.random.default_rng(5)
    col = {"inner_1": rng.integers(-9, 1_000, 30_000).astype(np.int32),
           "win_up_1": rng.integers(0, 2**63, 30_000, dtype=np.uint64)}
    options = {**write_options(list(col), "int", 1), "max_rows_per_page": 7_000,
               "write_statistics": stats, "write_page_checksum": crc}
    data, md = _file(col, **options)
    chunks = _chunks(data, md, col)
    assert set(chunks) == set(col) and all(ch.table.shape[0] == 5 for ch in chunks.values())
    for name, got in _cpu(data, chunks).items():
        np.testing.assert_array_equal(got, col[name])
    data, md = _file(col, **options, data_page_version="2.0")
    assert not _chunks(data, md, col)


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1,
                max_size=8))
def test_damaged_page_headers_are_refused_or_bounded(flips):
    """Bytes of a chunk's page headers changed at random: the chunk is left to pyarrow, or
    its pages lie within it and hold its rows (the file's digest refuses the damage)."""
    col = {"inner_1": np.arange(20_000, dtype=np.int32)}
    data, md = _file(col, **{**write_options(list(col), "int", 1), "max_rows_per_page": 5_000})
    chunk = _chunks(data, md, col)["inner_1"]
    heads = [chunk.start] + [chunk.start + int(a + n) for a, n in
                             chunk.table[:-1, [PAGE_SRC, PAGE_LEN]]]
    damaged = bytearray(data)
    for at, value in flips:
        pos = heads[at % len(heads)] + at // len(heads) % 24
        damaged[pos] = value
    column = md.row_group(0).column(0)
    got = page_plan.chunk_pages(bytes(damaged), column, md.schema.column(0), np.int32, 20_000)
    if got is not None:
        t = got.table
        assert (t[:, PAGE_SRC] >= 0).all() and (t[:, PAGE_SRC] + t[:, PAGE_LEN]
                                                 <= chunk.stop - chunk.start).all()
        assert t[:, 5].sum() == 20_000
