"""Parquet written in parts and joined (engine/parquet_parts): pyarrow and DuckDB read the joined
file as the concatenation of the parts, whatever the column types, encodings, codecs and part
sizes; the footer codec gives back the bytes it decoded."""
from __future__ import annotations

import io
import struct

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grail_duckdb.engine import parquet_parts as pp

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
    parts = [pp.encode_part(_table(rng, k), **_OPTIONS["mixed"]) for k in (100, 0, 40, 7)]
    data = _join(parts, {})
    _, end = pp.read_footer(data)
    spans = pp.group_spans(pq.ParquetFile(pa.BufferReader(data)).metadata, end)
    starts = pp.offsets(parts)
    nonempty = [(s, s + p.size) for s, p in zip(starts, parts)]
    assert [sp for sp in spans if sp[1] > sp[0]] == [sp for sp in nonempty if sp[1] > sp[0]]
    assert spans[0][0] == 4 and spans[-1][1] == end
    for (start, stop), p in zip([sp for sp in spans if sp[1] > sp[0]],
                                [p for p in parts if p.size]):
        assert data[start:stop] == bytes(p.data)[4:p.data_end]


def test_the_footer_codec_gives_back_the_bytes_it_decoded(tmp_path):
    for options in _OPTIONS.values():
        buf = io.BytesIO()
        pq.write_table(_table(np.random.default_rng(2), 2000), buf, row_group_size=300, **options)
        data = buf.getvalue()
        (length,) = struct.unpack("<I", data[-8:-4])
        raw = data[-8 - length:-8]
        meta, end = pp._read_struct(raw, 0)
        out = bytearray()
        pp._write_struct(out, meta)
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


@pytest.mark.parametrize("shares", [[1.0], [1.0, 1.0, 1.0], [0.7, 0.0, 1.0, 0.05], [0.3]])
def test_blobs_written_here_read_as_pyarrow_would_write_them(tmp_path, shares):
    """The BLOB column written by parquet_parts (one PLAIN page, the lengths and the words
    interleaved) reads in pyarrow and DuckDB as the same values from pyarrow's own writer,
    with every row valid (one RLE run of levels) or some NULL (bit-packed levels), in parts
    of odd sizes, beside pyarrow's own parts and an empty one."""
    rng = np.random.default_rng(len(shares))
    made = [_blob_table(rng, int(rng.integers(1, 3000)), s) for s in shares]
    parts = [pp.encode_part(t, b, compression="none", use_dictionary=False) for t, b, _ in made]
    empty = made[0][0].slice(0, 0)
    parts.insert(1, pp.encode_part(empty, made[0][1], compression="none"))
    parts.append(pp.encode_part(made[0][2], compression="none"))  # pyarrow's own BLOBs
    path = tmp_path / "blobs.parquet"
    path.write_bytes(_join(parts, {}))
    want = pa.concat_tables([w for *_, w in made] + [made[0][2]])
    assert pq.read_table(path).equals(want)
    f = pq.ParquetFile(path)
    for g in range(f.num_row_groups):
        f.read_row_group(g)
    blobs = want.column("kids").to_pylist()
    got = duckdb.connect().execute(
        "SELECT count(kids), sum(octet_length(kids)), list(kids ORDER BY key)[1:50] "
        "FROM read_parquet(?) WHERE key >= 0", [str(path)]).fetchone()
    assert got[0] == sum(b is not None for b in blobs)
    assert got[1] == sum(len(b) for b in blobs if b is not None)


def test_blobs_that_do_not_fit_their_rows_are_refused():
    rng = np.random.default_rng(3)
    table, blobs, want = _blob_table(rng, 100, 0.5)
    plain = dict(compression="none", use_dictionary=False)
    with pytest.raises(ValueError, match="all NULL"):
        pp.encode_part(want, blobs, **plain)  # the column is not a placeholder
    with pytest.raises(pp.FooterError, match="placeholder"):
        pp.encode_part(table, blobs, compression="snappy")  # pyarrow's dictionary page
    short = pp.Blobs("kids", blobs.ptr[:-1], blobs.children[:int(blobs.ptr[-2] - blobs.ptr[0])],
                     blobs.valid)
    with pytest.raises(ValueError, match="BLOBs for 100 rows"):
        pp.encode_part(table, short, **plain)
    with pytest.raises(ValueError, match="do not cover"):
        pp.encode_part(table, pp.Blobs("kids", blobs.ptr, blobs.children[:-1], blobs.valid),
                       **plain)


@pytest.mark.parametrize("options", sorted(_OPTIONS))
def test_parts_written_into_pooled_buffers_are_the_same_bytes(options, monkeypatch):
    """``encode_part`` with :class:`Buffers`: pyarrow writes into a pooled buffer (reused, so
    with the bytes of an earlier, larger part in it), the BLOBs' page goes in place over the
    placeholder, and a part that outgrows its buffer falls back to pyarrow's own stream: the
    bytes are those written without a pool, every time."""
    rng = np.random.default_rng(11)
    plain = [pp.encode_part(_table(rng, k), **_OPTIONS[options]) for k in (4000, 0, 300)]
    rng = np.random.default_rng(11)
    buffers = pp.Buffers()
    pooled = []
    for k in (4000, 0, 300):
        part = pp.encode_part(_table(rng, k), None, buffers, **_OPTIONS[options])
        pooled.append(bytes(part.data))
        buffers.give(part.buffer)  # the next part reuses it
    assert pooled == [bytes(p.data) for p in plain]
    table, blobs, _ = _blob_table(np.random.default_rng(12), 2000, 0.6)
    flat = dict(compression="none", use_dictionary=False)
    want = bytes(pp.encode_part(table, blobs, **flat).data)
    big = buffers.take(1 << 20)
    big[:] = 0xAB  # stale bytes where the part goes
    buffers.give(big)
    part = pp.encode_part(table, blobs, buffers, **flat)
    assert part.buffer is not None and bytes(part.data) == want
    monkeypatch.setattr(pp, "_bound", lambda table: 16)  # pyarrow overflows: its own stream
    monkeypatch.setattr(pp, "_blob_room", lambda blobs, rows: 0)
    part = pp.encode_part(table, blobs, pp.Buffers(), **flat)
    assert part.buffer is None and bytes(part.data) == want
