"""Parquet written in parts and joined (indexfile/parts): pyarrow and DuckDB read the joined
file as the concatenation of the parts, whatever the column types, encodings, codecs and part
sizes; the footer codec gives back the bytes it decoded."""
from __future__ import annotations

import collections
import io
import struct

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grail_duckdb.indexfile import parts as pp
from grail_duckdb.indexfile import thrift

_OPTIONS = {
    "plain": dict(compression="none", use_dictionary=False),
    "mixed": dict(compression={"i": "lz4", "s": "zstd", "b": "none", "u": "snappy"},
                  use_dictionary=False, column_encoding={"i": "DELTA_BINARY_PACKED"},
                  write_statistics=["i"]),
    "dictionary and statistics": dict(compression="zstd", use_dictionary=True),
}


def _table(rng, rows: int) -> pa.Table:
    return pa.table({
        "i": pa.array(np.sort(rng.integers(-10**12, 10**12, rows))),
        "s": pa.array([f"k{x}" for x in rng.integers(0, 50, rows)], pa.string()),
        "b": pa.array([bytes(rng.integers(0, 256, x, dtype=np.uint8)) if x % 5 else None
                       for x in rng.integers(0, 9, rows)], pa.binary()),
        "u": pa.array(rng.integers(0, 2**63, rows, dtype=np.uint64) * 2 + 1),
    })


def _join(parts, metadata) -> bytes:
    out = io.BytesIO()
    for pos, data in pp.place(parts):
        out.seek(pos)
        out.write(data)
    out.write(pp.footer(parts, metadata))
    return out.getvalue()


@pytest.mark.parametrize("options", sorted(_OPTIONS))
@pytest.mark.parametrize("sizes", [[0], [1], [5, 0, 3], [3000, 1, 7000, 0, 2500]])
def test_joined_parts_read_as_their_concatenation(tmp_path, options, sizes):
    rng = np.random.default_rng(len(sizes) * 7 + sum(sizes))
    tables = [_table(rng, k) for k in sizes]
    parts = [pp.encode_part(t, **_OPTIONS[options]) for t in tables]
    path = tmp_path / "joined.parquet"
    path.write_bytes(_join(parts, {"who": "test", "n": str(sum(sizes))}))
    want = pa.concat_tables(tables)
    got = pq.read_table(path)
    assert got.equals(want)
    assert pq.read_schema(path).metadata == {b"who": b"test", b"n": str(sum(sizes)).encode()}
    f = pq.ParquetFile(path)
    assert f.num_row_groups == len(sizes)  # one row group per part, empty ones too
    for g in range(f.num_row_groups):  # each group alone, too
        f.read_row_group(g)
    rows = duckdb.connect().execute(
        "SELECT count(*), sum(i), count(b), sum(octet_length(b)), count(DISTINCT s), sum(u % 1000) "
        "FROM read_parquet(?)", [str(path)]).fetchone()
    b = want.column("b").to_pylist()
    assert rows[:4] == (want.num_rows, sum(want.column("i").to_pylist()) if want.num_rows else None,
                        sum(x is not None for x in b),
                        sum(len(x) for x in b if x is not None) if any(x is not None for x in b) else None)
    assert rows[4] == len(set(want.column("s").to_pylist()))


def test_groups_moved_as_parts_come_give_the_same_footer():
    """A writer that encodes each part's row groups as the part comes (``moved_groups``, as
    the index's save does) gets the footer that ``footer`` computes from the parts alone;
    a group moved to the wrong place or with the wrong ordinal does not."""
    rng = np.random.default_rng(2)
    parts = [pp.encode_part(_table(rng, k), **_OPTIONS["mixed"]) for k in (100, 0, 40, 7)]
    groups = []
    for part, start in zip(parts, pp.offsets(parts)):
        groups += pp.moved_groups(part, start, len(groups))
    whole = pp.footer(parts, {"k": "v"})
    assert pp.footer(parts, {"k": "v"}, groups) == whole
    assert pp.footer(parts, {"k": "v"}, groups[:1] + pp.moved_groups(parts[1], 5, 1)
                     + groups[2:]) != whole
    assert pp.footer(parts, {"k": "v"}, groups[:1] + pp.moved_groups(parts[1], pp.offsets(
        parts)[1], 0) + groups[2:]) != whole


def test_group_spans_cover_the_column_chunks_in_order(tmp_path):
    rng = np.random.default_rng(1)
    parts = [pp.encode_part(_table(rng, k), **_OPTIONS["mixed"]) for k in (100, 40, 7)]
    data = _join(parts, {})
    _, end = pp.read_footer(data)
    spans = pp.group_spans(pq.ParquetFile(pa.BufferReader(data)).metadata, end)
    # no region: every chunk among its group's bytes
    assert all(a == b and c == d for (a, b), (c, d), _ in spans)
    starts = pp.offsets(parts)
    assert [own for *_, own in spans] == [(s, s + p.size) for s, p in zip(starts, parts)]
    assert spans[0][2][0] == 4 and spans[-1][2][1] == end
    for (*_, (start, stop)), p in zip(spans, parts):
        assert data[start:stop] == bytes(p.data)[4:p.data_end]


def test_an_empty_group_holds_the_file_alone():
    """The one empty row group of a file (an index of no vertices) holds every byte; an
    empty group among others is refused (the save never makes one)."""
    rng = np.random.default_rng(5)
    alone = _join([pp.encode_part(_table(rng, 0))], {})
    _, end = pp.read_footer(alone)
    assert pp.group_spans(pq.ParquetFile(pa.BufferReader(alone)).metadata, end)[0][2] == (4, end)
    among = _join([pp.encode_part(_table(rng, k)) for k in (3, 0, 2)], {})
    _, end = pp.read_footer(among)
    with pytest.raises(pp.FooterError, match="empty row group"):
        pp.group_spans(pq.ParquetFile(pa.BufferReader(among)).metadata, end)


def test_the_footer_codec_gives_back_the_bytes_it_decoded(tmp_path):
    for options in _OPTIONS.values():
        buf = io.BytesIO()
        pq.write_table(_table(np.random.default_rng(2), 2000), buf, row_group_size=300, **options)
        data = buf.getvalue()
        (length,) = struct.unpack("<I", data[-8:-4])
        raw = data[-8 - length:-8]
        meta, end = thrift.read_struct(raw, 0)
        out = bytearray()
        thrift.write_struct(out, meta)
        assert end == length and bytes(out) == raw
        assert pp.read_footer(data) == (meta, len(data) - 8 - length)


@pytest.mark.parametrize("bad", [b"", b"PAR1", b"PAR1" + b"\0" * 8 + b"PAR1", b"x" * 40])
def test_read_footer_refuses_what_is_not_parquet(bad):
    with pytest.raises((pp.FooterError, IndexError)):
        pp.read_footer(bad)


def _blob_table(rng, rows: int, valid_share: float):
    """A table with the children's placeholder, its Blobs and the same table as pyarrow would
    hold it (BLOBs of int32 words, NULL off the valid rows)."""
    valid = rng.random(rows) < valid_share
    degrees = rng.integers(0, 6, int(valid.sum()))
    ptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64) + 17  # any first offset
    children = rng.integers(-2**31, 2**31, int(degrees.sum()), dtype=np.int64).astype(np.int32)
    values, k = [], 0
    for v in valid:
        if v:
            values.append(children[ptr[k] - 17:ptr[k + 1] - 17].astype("<i4").tobytes())
            k += 1
        else:
            values.append(None)
    key = pa.array(np.arange(rows, dtype=np.int64))
    fields = [pa.field("key", pa.int64(), nullable=False), pa.field("kids", pa.binary())]
    table = pa.Table.from_arrays([key, pa.nulls(rows, pa.binary())], schema=pa.schema(fields))
    want = pa.Table.from_arrays([key, pa.array(values, pa.binary())], schema=pa.schema(fields))
    every = bool(valid.all())
    return table, pp.Blobs("kids", ptr, children, None if every else valid), want


def _join_with_region(made, metadata) -> tuple[bytes, list]:
    """Parts whose BLOBs lie in a region at the front (as the index's save lays them: pages
    of ``write_blob_page``, the parts' placeholders pointed there by ``external_chunk``);
    the file's bytes and where each page lies."""
    pages, rows = [], []
    for table, blobs, _ in made:
        out = np.zeros(pp.blob_page_size(blobs, table.num_rows), np.uint8)
        pp.write_blob_page(blobs, table.num_rows, out)
        pages.append(out.tobytes())
        rows.append(table.num_rows)
    at = np.cumsum([4] + [len(p) for p in pages[:-1]]).tolist()
    parts = []
    for (table, _, _), a, page in zip(made, at, pages):
        part = pp.encode_part(table, compression="none", use_dictionary=False)
        pp.external_chunk(part, table, a, len(page))
        parts.append(part)
    start = 4 + sum(len(p) for p in pages)
    out = io.BytesIO()
    for pos, data in pp.place(parts, start):
        out.seek(pos)
        out.write(data)
    for a, page in zip(at, pages):
        out.seek(a)
        out.write(page)
    out.seek(0, io.SEEK_END)
    out.write(pp.footer(parts, metadata, start=start))
    return out.getvalue(), list(zip(at, [len(p) for p in pages]))


@pytest.mark.parametrize("shares", [[1.0], [1.0, 1.0, 1.0], [0.7, 0.0, 1.0, 0.05], [0.3]])
def test_blobs_written_apart_read_as_pyarrow_would_write_them(tmp_path, shares):
    """The BLOB column's pages written by parquet_parts (one PLAIN page per part, the lengths
    and the words interleaved) in a region before the parts' other chunks read in pyarrow
    and DuckDB as the same values from pyarrow's own writer, with every row valid (one RLE
    run of levels) or some NULL (bit-packed levels), in parts of odd sizes;
    ``group_spans`` finds each group's page in the region and its own bytes after it."""
    rng = np.random.default_rng(len(shares))
    made = [_blob_table(rng, int(rng.integers(1, 3000)), s) for s in shares]
    data, pages = _join_with_region(made, {"k": "v"})
    path = tmp_path / "blobs.parquet"
    path.write_bytes(data)
    want = pa.concat_tables([w for *_, w in made])
    assert pq.read_table(path).equals(want)
    f = pq.ParquetFile(path)
    for g in range(f.num_row_groups):
        f.read_row_group(g)
    blobs = want.column("kids").to_pylist()
    con = duckdb.connect()
    got = con.execute("SELECT count(kids), sum(octet_length(kids)) FROM read_parquet(?) "
                      "WHERE key >= 0", [str(path)]).fetchone()
    assert got[0] == sum(b is not None for b in blobs)
    assert got[1] == sum(len(b) for b in blobs if b is not None)
    counted = con.execute("SELECT kids, count(*) FROM read_parquet(?) GROUP BY kids",
                          [str(path)]).fetchall()
    assert dict(counted) == dict(collections.Counter(blobs))
    _, end = pp.read_footer(data)
    spans = pp.group_spans(f.metadata, end)
    assert [o for o, _, _ in spans] == [(a, a + n) for a, n in pages]
    assert all(e[0] == e[1] for _, e, _ in spans)  # no early columns
    owns = [own for *_, own in spans]
    assert owns[0][0] == pages[-1][0] + pages[-1][1] and owns[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(owns, owns[1:]))


def test_chunks_that_do_not_tile_the_file_are_refused():
    """Spans that leave a byte out or count one twice: a page pointed one byte off."""
    made = [_blob_table(np.random.default_rng(4), k, 0.5) for k in (300, 500)]
    data, pages = _join_with_region(made, {})
    f = pq.ParquetFile(pa.BufferReader(data))
    _, end = pp.read_footer(data)
    pp.group_spans(f.metadata, end)
    (a0, n0), (a1, n1) = pages
    parts = [pp.encode_part(t, compression="none", use_dictionary=False) for t, _, _ in made]
    pp.external_chunk(parts[0], made[0][0], a0, n0 - 1)  # its last byte left out
    pp.external_chunk(parts[1], made[1][0], a1, n1)
    tail = pp.footer(parts, {}, start=a1 + n1)
    bad = data[:len(data) - len(pp.footer(parts, {}, start=a1 + n1))] + tail
    with pytest.raises(pp.FooterError, match="tile"):
        pp.group_spans(pq.ParquetFile(pa.BufferReader(bad)).metadata, len(bad) - len(tail))


@pytest.mark.parametrize("sizes", [[1], [300, 500], [7, 1, 2000]])
def test_early_columns_joined_from_a_region_read_as_one_table(tmp_path, sizes):
    """The index's layout (formats 8 and 9): each group's first columns encoded as a part of
    their own and laid in a region after the children's pages (``joined``), its other columns
    after both; pyarrow and DuckDB read the rows whole, and ``group_spans`` finds the three
    spans of every group, which tile the file."""
    rng = np.random.default_rng(sum(sizes))
    made = [_blob_table(rng, k, 0.6) for k in sizes]
    firsts = [pa.table({"a": rng.integers(0, 9, t.num_rows), "s": [f"x{v}" for v in
                                                                  rng.integers(0, 5, t.num_rows)]})
              for t, _, _ in made]
    pages = []
    for table, blobs, _ in made:
        out = np.zeros(pp.blob_page_size(blobs, table.num_rows), np.uint8)
        pp.write_blob_page(blobs, table.num_rows, out)
        pages.append(out.tobytes())
    at = np.cumsum([4] + [len(p) for p in pages[:-1]]).tolist()
    buf = io.BytesIO(b"PAR1" + b"".join(pages))
    buf.seek(0, io.SEEK_END)
    early = []
    for first in firsts:
        part = pp.encode_part(first, compression="lz4")
        early.append((buf.tell(), part))
        buf.write(bytes(part.data)[4:part.data_end])
    parts, groups = [], []
    for (table, _, _), a, page, (pos, first) in zip(made, at, pages, early):
        part = pp.encode_part(table, compression="none", use_dictionary=False)
        pp.external_chunk(part, table, a, len(page))
        whole = pp.joined(first, part, pos)
        groups += pp.moved_groups(whole, buf.tell(), len(groups))
        buf.write(bytes(part.data)[4:part.data_end])
        parts.append(whole)
    end = buf.tell()
    buf.write(pp.footer(parts, {"k": "v"}, groups))
    path = tmp_path / "joined.parquet"
    path.write_bytes(buf.getvalue())
    want = pa.concat_tables([pa.Table.from_arrays(f.columns + w.columns, f.column_names
                                                  + w.column_names)
                             for f, (_, _, w) in zip(firsts, made)])
    got = pq.read_table(path)
    assert got.column_names == want.column_names
    assert all(got.column(c).equals(want.column(c)) for c in want.column_names)
    got = duckdb.connect().execute("SELECT sum(a), count(kids), max(s), sum(key) FROM "
                                   "read_parquet(?)", [str(path)]).fetchone()
    kids = want.column("kids").to_pylist()
    assert got == (sum(want.column("a").to_pylist()), sum(k is not None for k in kids),
                   max(want.column("s").to_pylist()), sum(want.column("key").to_pylist()))
    spans = pp.group_spans(pq.ParquetFile(path).metadata, end, early=2)
    assert [c for c, _, _ in spans] == [(a, a + len(p)) for a, p in zip(at, pages)]
    assert [e for _, e, _ in spans] == [(pos, pos + p.size) for pos, p in early]
    assert spans[0][2][0] == early[-1][0] + early[-1][1].size and spans[-1][2][1] == end


def test_blobs_that_do_not_fit_their_rows_are_refused():
    rng = np.random.default_rng(3)
    table, blobs, want = _blob_table(rng, 100, 0.5)
    plain = dict(compression="none", use_dictionary=False)
    with pytest.raises(ValueError, match="all NULL"):
        pp.external_chunk(pp.encode_part(want, **plain), want, 4, 10)  # not a placeholder
    with pytest.raises(pp.FooterError, match="placeholder"):
        pp.external_chunk(pp.encode_part(table, compression="snappy"), table, 4, 10)
    with pytest.raises(ValueError, match="not that of the table"):
        pp.external_chunk(pp.encode_part(table.slice(0, 50), **plain), table, 4, 10)
    short = pp.Blobs("kids", blobs.ptr[:-1], blobs.children[:int(blobs.ptr[-2] - blobs.ptr[0])],
                     blobs.valid)
    with pytest.raises(ValueError, match="BLOBs for 100 rows"):
        pp.blob_page_size(short, 100)
    size = pp.blob_page_size(blobs, 100)
    with pytest.raises(ValueError, match="do not cover"):
        pp.write_blob_page(pp.Blobs("kids", blobs.ptr, blobs.children[:-1], blobs.valid), 100,
                           np.zeros(size, np.uint8))
    with pytest.raises(ValueError, match="not its size"):
        pp.write_blob_page(blobs, 100, np.zeros(size + 1, np.uint8))


@pytest.mark.parametrize("options", sorted(_OPTIONS))
def test_parts_written_into_pooled_buffers_are_the_same_bytes(options, monkeypatch):
    """``encode_part`` with :class:`Buffers`: pyarrow writes into a pooled buffer (reused, so
    with the bytes of an earlier, larger part in it), and a part that outgrows its buffer
    falls back to pyarrow's own stream: the bytes are those written without a pool, every
    time."""
    rng = np.random.default_rng(11)
    plain = [pp.encode_part(_table(rng, k), **_OPTIONS[options]) for k in (4000, 0, 300)]
    rng = np.random.default_rng(11)
    buffers = pp.Buffers()
    pooled = []
    for k in (4000, 0, 300):
        part = pp.encode_part(_table(rng, k), buffers, **_OPTIONS[options])
        pooled.append(bytes(part.data))
        buffers.give(part.buffer)  # the next part reuses it
    assert pooled == [bytes(p.data) for p in plain]
    table = _table(np.random.default_rng(12), 2000)
    flat = dict(compression="none", use_dictionary=False)
    want = bytes(pp.encode_part(table, **flat).data)
    big = buffers.take(1 << 20)
    big[:] = 0xAB  # stale bytes where the part goes
    buffers.give(big)
    part = pp.encode_part(table, buffers, **flat)
    assert part.buffer is not None and bytes(part.data) == want
    monkeypatch.setattr(pp, "_bound", lambda table: 16)  # pyarrow overflows: its own stream
    part = pp.encode_part(table, pp.Buffers(), **flat)
    assert part.buffer is None and bytes(part.data) == want
