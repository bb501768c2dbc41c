"""Every layout of a query key column gives the contract's answers, on both backends.

The same pairs go in as NumPy arrays of every integer type (contiguous, strided, reversed,
big-endian), Arrow arrays (sliced, chunked at boundaries of their own, dictionary-encoded),
pandas Series, DuckDB relations and lists, with NULLs, negative keys, keys of no vertex,
uint64 keys above 2**63 - 1 (never vertices: they answer x = y) and empty columns, against an
index of each key lookup (a range, a dense table, sorted keys). The answers are compared with
an oracle over the keys as Python integers (BFS closure of the edge list), and with the
contiguous int64 call. The GPU's staging pass (a host function) is checked on this machine
too: its staged bytes for every layout, and its refusal of uint64 keys beyond int64.
"""
from __future__ import annotations

import functools

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.engine.keys import key_column, pair_pieces
from grail_duckdb.kernels.host import stage_pairs
from grail_duckdb.kernels.host.keys import KeysBeyondInt64, or_bits
from oracle import bfs_reachable

N = 100  # vertex ids 0..N-1 before they become keys
BIG = [2**63, 2**64 - 1, 2**64 - 20, 2**63 + 5]  # 2**64 - 20 wraps to -20, a vertex key


def _graph():
    """A random graph with cycles on ids 0..N-1 (every id on an edge)."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, N, 260)
    b = rng.integers(0, N, 260)
    return np.r_[a, np.arange(N)], np.r_[b, (np.arange(N) + 1) % N // 3 * 3]


#: index key of each vertex id, per lookup of the index
KEYS = {"range": lambda i: i - 20,                       # -20..79: LOOKUP_RANGE
        "dense": lambda i: i - 20 + (i // 7),            # gaps: LOOKUP_DENSE
        "sorted": lambda i: (i - 50) * (1 << 40) + 3}    # spread: LOOKUP_SORTED


@functools.lru_cache(maxsize=None)
def _index(backend, keys):
    """``(index, closure, key -> id)`` of the graph with the keys ``KEYS[keys]``."""
    a, b = _graph()
    to_key = np.vectorize(KEYS[keys], otypes=[np.int64])
    idx = gd.build_index(pa.array(to_key(a)), pa.array(to_key(b)), backend=backend)
    closure = bfs_reachable(a, b, N, np.arange(N))
    key_id = {int(to_key(i)): i for i in range(N)}
    return idx, closure, key_id


def oracle(closure, key_id, s, t):
    """The contract's answer for keys as Python integers (None: NULL)."""
    out = []
    for x, y in zip(s, t):
        if x is None or y is None:
            out.append(None)
        elif x == y:
            out.append(True)
        elif x not in key_id or y not in key_id:
            out.append(False)
        else:
            out.append(bool(closure[key_id[x], key_id[y]]))
    return out


def _values(keys, kind, n, seed):
    """Two columns of ``n`` keys (Python ints) and where they are NULL: ``signed`` keys around
    the index's, negatives included; ``natural`` their absolute values; ``beyond`` the
    non-negative ones and keys beyond int64 (equal ones too)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(-12, N + 12, (2, n))
    to_key = KEYS[keys]
    cols = [[int(to_key(i)) if 0 <= i < N else int(to_key(i)) + 1 for i in row] for row in ids]
    cols[1][::5] = cols[0][::5]  # equal keys, vertices or not
    if kind == "natural":
        cols = [[abs(x) for x in c] for c in cols]
    if kind == "beyond":
        cols = [[x if x >= 0 else (BIG[i % 4] if i % 3 else abs(x)) for i, x in enumerate(c)]
                for c in cols]
        if n > 4:
            cols[0][1], cols[1][1] = 2**64 - 1, 2**64 - 1
            cols[0][2], cols[1][2] = 2**64 - 20, -20 + 2**64  # equal, beyond int64
    nulls = [[i % 11 == 4 for i in range(n)], [i % 13 == 6 for i in range(n)]]
    return cols, nulls


def _fits(vals, dtype) -> bool:
    info = np.iinfo(dtype)
    return all(info.min <= v <= info.max for v in vals if v is not None)


def _np(dtype):
    def make(vals, nulls):
        if any(nulls) or not _fits(vals, dtype):
            return None
        return np.array(vals, dtype)
    return make


def _strided(dtype, step=3):
    def make(vals, nulls):
        a = _np(dtype)(vals, nulls)
        return None if a is None else np.repeat(a, step)[::step]
    return make


def _column_of_2d(vals, nulls):
    a = _np(np.int64)(vals, nulls)
    return None if a is None else np.stack([a * 0, a, a * 0], axis=1)[:, 1]


def _reversed(vals, nulls):
    a = _np(np.int64)(vals[::-1], nulls)
    return None if a is None else a[::-1]


def _big_endian(vals, nulls):
    a = _np(np.int64)(vals, nulls)
    return None if a is None else a.astype(">i8")


def _arrow(typ):
    def make(vals, nulls):
        if not _fits(vals, typ.to_pandas_dtype()):
            return None
        return pa.array([None if z else v for v, z in zip(vals, nulls)], typ)
    return make


def _sliced(vals, nulls):
    arr = _arrow(pa.int64())([7, 8, 9] + vals + [1], [False] * 3 + nulls + [True])
    return None if arr is None else arr.slice(3, len(vals))


def _chunked(sizes):
    def make(vals, nulls):
        arr = _arrow(pa.int64())(vals, nulls)
        if arr is None:
            return None
        cuts = np.cumsum([0] + [s for s in sizes]).tolist()
        cuts = [c for c in cuts if c < len(vals)] + [len(vals)]
        return pa.chunked_array([arr.slice(lo, hi - lo) for lo, hi in zip(cuts, cuts[1:])]
                                + [arr.slice(0, 0)], pa.int64())
    return make


def _dictionary(vals, nulls):
    arr = _arrow(pa.int64())(vals, nulls)
    return None if arr is None else arr.dictionary_encode()


def _pandas(dtype):
    def make(vals, nulls):
        if dtype == "Int64":
            if not _fits(vals, np.int64):
                return None
            return pd.Series([pd.NA if z else v for v, z in zip(vals, nulls)], dtype="Int64")
        a = _np(dtype)(vals, nulls)
        return None if a is None else pd.Series(a)
    return make


_CON = duckdb.connect()


def _relation(typ):
    def make(vals, nulls):
        arr = _arrow(typ)(vals, nulls)
        if arr is None:
            return None
        name = f"keys_{abs(hash((tuple(vals), typ)))}"
        _CON.register(name, pa.table({"k": arr}))
        return _CON.sql(f"SELECT k FROM {name}")
    return make


def _list(vals, nulls):
    if not _fits(vals, np.int64):
        return None
    return [None if z else v for v, z in zip(vals, nulls)]


#: layout -> (source column maker, destination column maker); a maker returns None for keys
#: the layout cannot hold
LAYOUTS = {
    **{f"numpy-{t}": (_np(t), _np(t)) for t in
       ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    "numpy-strided-int64": (_strided(np.int64), _strided(np.int64, 2)),
    "numpy-strided-int32": (_strided(np.int32), _strided(np.int32)),
    "numpy-strided-uint64": (_strided(np.uint64), _strided(np.uint64)),
    "numpy-strided-int8": (_strided(np.int8), _strided(np.int8)),
    "numpy-column-of-2d": (_column_of_2d, _column_of_2d),
    "numpy-reversed": (_reversed, _reversed),
    "numpy-big-endian": (_big_endian, _big_endian),
    **{f"arrow-{t}": (_arrow(getattr(pa, t)()), _arrow(getattr(pa, t)())) for t in
       ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    "arrow-sliced": (_sliced, _sliced),
    "arrow-chunked": (_chunked([64, 8, 100]), _chunked([64, 8, 100])),
    "arrow-chunked-unaligned": (_chunked([13, 1, 50, 3]), _chunked([40, 7, 7])),
    "arrow-dictionary": (_dictionary, _dictionary),
    "pandas-int64": (_pandas(np.int64), _pandas(np.int64)),
    "pandas-int32": (_pandas(np.int32), _pandas(np.int32)),
    "pandas-nullable": (_pandas("Int64"), _pandas("Int64")),
    "duckdb-bigint": (_relation(pa.int64()), _relation(pa.int64())),
    "duckdb-integer": (_relation(pa.int32()), _relation(pa.int32())),
    "duckdb-ubigint": (_relation(pa.uint64()), _relation(pa.uint64())),
    "list": (_list, _list),
    "mixed-int32-int64": (_np(np.int32), _arrow(pa.int64())),
    "mixed-uint64-int64": (_arrow(pa.uint64()), _np(np.int64)),
    "mixed-strided-contiguous": (_strided(np.int64), _np(np.int64)),
    "mixed-uint32-uint64": (_np(np.uint32), _strided(np.uint64)),
}


def _run_layout(backend, layout, keys, n, seed):
    """Every value set of ``n`` pairs that the layout holds, answered and compared; returns
    how many ran."""
    idx, closure, key_id = _index(backend, keys)
    make_s, make_t = LAYOUTS[layout]
    ran = 0
    for kind in ("signed", "natural", "beyond"):
        for with_nulls in (False, True):
            (s, t), nulls = _values(keys, kind, n, seed)
            if not with_nulls:
                nulls = [[False] * n, [False] * n]
            a, b = make_s(s, nulls[0]), make_t(t, nulls[1])
            if a is None or b is None:
                continue
            want_s = [None if z else v for v, z in zip(s, nulls[0])]
            want_t = [None if z else v for v, z in zip(t, nulls[1])]
            want = oracle(closure, key_id, want_s, want_t)
            got = idx.reaches(a, b)
            assert got.to_pylist() == want, (layout, keys, kind, with_nulls)
            if kind == "signed" and not with_nulls:  # the contiguous int64 call agrees
                assert idx.reaches(np.array(s, np.int64), np.array(t, np.int64)).equals(got)
            ran += 1
    return ran


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_answers_like_int64(backend, layout):
    ran = sum(_run_layout(backend, layout, keys, 203, 1) for keys in KEYS)
    assert ran > 0, f"{layout}: no value set fits the layout"
    for keys in KEYS:  # empty columns
        idx = _index(backend, keys)[0]
        a, b = LAYOUTS[layout][0]([], []), LAYOUTS[layout][1]([], [])
        if a is not None and b is not None:
            assert idx.reaches(a, b).to_pylist() == []


@pytest.mark.parametrize("layout", ["numpy-int32", "arrow-chunked-unaligned", "duckdb-integer",
                                    pytest.param("numpy-strided-int64", marks=pytest.mark.slow),
                                    pytest.param("numpy-uint64", marks=pytest.mark.slow)])
def test_layouts_of_large_calls_and_small_batches(backend, layout, monkeypatch):
    """Calls large enough to spread over every core and to cross batches (small batches: a
    batch ends inside an Arrow chunk and a chunk inside a batch)."""
    if backend.name == "gpu":
        from dataclasses import replace

        monkeypatch.setattr(backend, "settings", replace(backend.settings, query_batch=4096))
    else:
        monkeypatch.setattr(backend, "query_batch", 4096)
    assert _run_layout(backend, layout, "range", 20_011, 2) > 0


@given(st.lists(st.integers(0, 40), max_size=8), st.lists(st.integers(0, 40), max_size=8),
       st.integers(0, 150))
def test_any_chunking_of_either_column_answers_alike(cuts_s, cuts_t, n):
    """Arrow chunks of any sizes on either side (empty ones too) give the oracle's answers;
    the pieces the kernels get line up and hold every row once, in order."""
    from conftest import kernels_named

    idx, closure, key_id = _index(kernels_named("cpu"), "dense")
    (s, t), nulls = _values("dense", "signed", n, 5)
    a, b = _chunked(cuts_s)(s, nulls[0]), _chunked(cuts_t)(t, nulls[1])
    want = oracle(closure, key_id, [None if z else v for v, z in zip(s, nulls[0])],
                  [None if z else v for v, z in zip(t, nulls[1])])
    assert idx.reaches(a, b).to_pylist() == want
    lo = min(n, 3)
    ps, pt = pair_pieces(key_column(a), key_column(b), lo, n)
    assert [p.shape[0] for p in ps] == [p.shape[0] for p in pt]
    for pieces, keys, null in ((ps, s, nulls[0]), (pt, t, nulls[1])):
        got = np.concatenate(ps and pieces or [np.zeros(0, np.int64)])
        keep = ~np.array(null[lo:n], bool)
        np.testing.assert_array_equal(got[keep], np.array(keys[lo:n], np.int64)[keep])


@given(st.integers(0, 40), st.integers(1, 40), st.integers(0, 255))
def test_answer_bits_land_at_any_row(at, n, seed):
    """``or_bits`` puts a piece's bits at any row, leaving the others as they were."""
    rng = np.random.default_rng(seed)
    part = np.packbits(rng.random(n) < 0.5, bitorder="little")
    bits = np.packbits(rng.random(at + n + 9) < 0.5, bitorder="little")
    before = np.unpackbits(bits, bitorder="little").copy()
    or_bits(bits, at, part, n)
    after = np.unpackbits(bits, bitorder="little")
    want = before.copy()
    want[at:at + n] |= np.unpackbits(part, bitorder="little")[:n]
    np.testing.assert_array_equal(after, want)


@pytest.mark.parametrize("layout", ["numpy-int32", "numpy-uint32", "numpy-uint64",
                                    "numpy-strided-int64", "numpy-strided-int32",
                                    "arrow-chunked-unaligned", "numpy-int64"])
@pytest.mark.parametrize("size", [203, pytest.param(70_001, marks=pytest.mark.slow)])
def test_the_staging_pass_reads_every_layout(layout, size):
    """The GPU's staging (host code: checked without a device) stages every layout as the
    int64 keys would be: narrow ``k - offset`` when all fit, else wide; a uint64 key beyond
    int64 is refused unless its pair is NULL."""
    (s, t), nulls = _values("range", "signed", size, 4)
    a, b = LAYOUTS[layout][0](s, [False] * size), LAYOUTS[layout][1](t, [False] * size)
    if a is None:
        (s, t), _ = _values("range", "signed", size, 4)
        s, t = [abs(x) for x in s], [abs(x) for x in t]
        a, b = LAYOUTS[layout][0](s, [False] * size), LAYOUTS[layout][1](t, [False] * size)
    ks, kt = key_column(a), key_column(b)
    ps, pt = pair_pieces(ks, kt, 0, size)
    want = np.r_[np.array(s, np.int64), np.array(t, np.int64)]
    out = np.zeros(16 * size, np.uint8)
    offset = int(want.min())
    assert stage_pairs(ps, pt, out, offset) is False
    np.testing.assert_array_equal(out[:8 * size].view(np.int32), want - offset)
    assert stage_pairs(ps, pt, out, offset + 1) is True  # the smallest key does not fit
    np.testing.assert_array_equal(out.view(np.int64), want)
    assert stage_pairs(ps, pt, out, None) is True
    np.testing.assert_array_equal(out.view(np.int64), want)


def test_many_pieces_on_few_cores_are_answered_in_items_of_rows(monkeypatch):
    """On a machine of few cores a call of several pieces (an Arrow column's chunks) is cut
    into items of rows that the threads take in turn, pieces split where an item ends: the
    oracle's answers, NULL pairs included, as from one array."""
    from grail_duckdb.kernels import cpu

    monkeypatch.setattr(cpu, "cores", lambda: 2)
    idx, closure, key_id = _index("cpu", "range")
    (s, t), _ = _values("range", "signed", 17_003, 9)
    s = [None if i % 97 == 0 else x for i, x in enumerate(s)]
    cuts = [0, 5_000, 8_003, 17_003]

    def chunked(v):
        return pa.chunked_array([pa.array(v[a:b], pa.int64()) for a, b in zip(cuts, cuts[1:])])

    got = idx.reaches(chunked(s), chunked(t))
    assert got.to_pylist() == oracle(closure, key_id, s, t)
    one = idx.reaches(pa.array(s, pa.int64()), pa.array(t, pa.int64()))
    assert got.to_pylist() == one.to_pylist()


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
@pytest.mark.parametrize("strided", [False, True])
def test_the_pieces_of_a_large_batch_are_staged_by_every_core(monkeypatch, dtype, strided):
    """A chunked column of many pieces, each below the parallel size but more than it in
    all, is staged on every core (contiguous pieces of one type in one loop over them all,
    strided ones piece by piece): the same bytes as one piece, the keys that do not fit
    counted across every piece (one in the last piece: wide form), a key beyond int64
    refused unless its pair is NULL."""
    from grail_duckdb.kernels.host import staging

    monkeypatch.setattr(staging, "PARALLEL_MIN", 64)
    monkeypatch.setattr(staging, "PIECE_MIN", 40)
    monkeypatch.setattr(staging, "STAGE_BLOCK", 16)
    rng = np.random.default_rng(3)

    def keys():  # strided: every other element of a larger array
        x = rng.integers(1, 100, 400).astype(dtype)
        return np.repeat(x, 2)[::2] if strided else x

    s, t = keys(), keys()
    cut = [0, 50, 90, 160, 220, 300, 350, 400]
    ps = tuple(s[a:b] for a, b in zip(cut, cut[1:]))
    pt = tuple(t[a:b] for a, b in zip(cut, cut[1:]))
    assert (staging._one_loop(ps, pt) is None) == strided
    want = np.r_[s.astype(np.int64), t.astype(np.int64)]
    out = np.zeros(16 * 400, np.uint8)
    assert stage_pairs(ps, pt, out, 1) is False
    np.testing.assert_array_equal(out[:8 * 400].view(np.int32), want - 1)
    s[399] = 0  # below the offset: every key goes wide
    assert stage_pairs(ps, pt, out, 1) is True
    np.testing.assert_array_equal(out.view(np.int64), np.r_[s.astype(np.int64),
                                                            t.astype(np.int64)])
    if dtype == "uint64":
        s[395] = 2**63
        with pytest.raises(KeysBeyondInt64):
            stage_pairs(ps, pt, out, 1)
        valid = np.ones(400, np.uint8)
        valid[395] = 0
        assert stage_pairs(ps, pt, out, None, valid=valid) is True


def test_the_staging_pass_refuses_keys_beyond_int64_of_pairs_that_are_not_null():
    a = np.array([1, 2**64 - 1, 3, 2**63], np.uint64)
    b = np.array([1, 1, 2**63, 3], np.uint64)
    out = np.zeros(16 * 4, np.uint8)
    with pytest.raises(KeysBeyondInt64):
        stage_pairs(a, b, out, 0)
    with pytest.raises(KeysBeyondInt64):
        stage_pairs(a, b, out, None)
    valid = np.array([1, 0, 0, 0], np.uint8)  # keys beyond int64 only in NULL pairs
    assert stage_pairs(a, b, out, 0, valid=valid) is False
    assert out[:32].view(np.int32)[[0, 4]].tolist() == [1, 1]
    assert stage_pairs(a, b, out, None, valid=valid) is True
    assert out.view(np.int64)[[0, 4]].tolist() == [1, 1]


def test_uint64_keys_beyond_int64_beside_signed_keys(backend):
    """A uint64 column beside an int64 one: a key beyond int64 is no vertex, not even the
    one its bits would be as int64 (2**64 - 20 is not -20)."""
    idx, closure, key_id = _index(backend, "range")
    s = [2**64 - 20, 5, 2**63, 7, 2**64 - 1, None]
    t = [-20, 5, 3, 8, -1, 4]
    a = pa.array(s, pa.uint64())
    for b in (np.array([x or 0 for x in t], np.int64), pa.array(t, pa.int64())):
        assert idx.reaches(a, b).to_pylist() == oracle(closure, key_id, s, t)
        assert idx.reaches(b, a).to_pylist() == oracle(closure, key_id, t, s)
