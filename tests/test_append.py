"""Appending batches of new vertices to a built index (grail_duckdb.engine.append): after every
append the answers equal a BFS oracle on the grown graph, for every pair of keys, on every
backend, with keys of every kind; the index before an append answers as before; batches the
index cannot absorb are refused."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.errors import KeyTypeError, NotAppendableError
from oracle import bfs_pairs
from strategies import graphs

#: how ids become keys: the ids; negative and decreasing (every append renumbers the ids);
#: sparse and interleaved (a sorted lookup, renumbered); strings
KINDS = ("int", "desc", "sparse", "str")


def keys(ids, kind: str):
    ids = np.asarray(ids, np.int64)
    if kind == "int":
        return pa.array(ids, pa.int64())
    if kind == "desc":
        return pa.array(-3 * ids, pa.int64())
    if kind == "sparse":
        return pa.array(((ids * 7919) % 1009) * 10_000_000_007 + ids, pa.int64())
    return pa.array([f"p{(i * 7919) % 1009}-{i}" for i in ids.tolist()], pa.string())


@st.composite
def batches(draw, n0: int, count: int, old_src, old_dst):
    """``count`` batches over ids from ``n0`` on: each adds 0-8 new ids whose edges go to any
    id so far (new ones included: cycles, self-loops, duplicates), plus a few copies of edges
    that exist already (held sources that add no path)."""
    out, n = [], n0
    src_all, dst_all = list(old_src), list(old_dst)
    for _ in range(count):
        a = draw(st.integers(0, 8))
        m = draw(st.integers(0, 3 * a))
        new = list(range(n, n + a))
        src = [draw(st.sampled_from(new)) for _ in range(m)] if a else []
        dst = [draw(st.integers(0, n + a - 1)) for _ in range(m)] if n + a else []
        if src_all and draw(st.booleans()):
            for _ in range(draw(st.integers(1, 3))):
                e = draw(st.integers(0, len(src_all) - 1))
                src.append(src_all[e])
                dst.append(dst_all[e])
        out.append((src, dst))
        src_all += src
        dst_all += dst
        n += a
    return out


def _check(index, src, dst, n: int, kind: str) -> None:
    """Every pair of ids 0..n (n: one unknown id) and NULLs against the BFS oracle."""
    ids = np.arange(n + 1)
    qs, qt = np.repeat(ids, n + 1), np.tile(ids, n + 1)
    want = bfs_pairs(np.asarray(src, np.int64), np.asarray(dst, np.int64), n + 1, qs, qt)
    vertices = set(src) | set(dst)
    known = np.array([q in vertices for q in range(n + 1)])
    want = want & known[qs] & known[qt] | (qs == qt)
    got = index.reaches(keys(qs, kind), keys(qt, kind)).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(int(qs[i]), int(qt[i]), bool(want[i])) for i in bad[:5]]
    one = keys(qs[:1], kind)
    nulls = index.reaches(pa.concat_arrays([pa.nulls(1, one.type), one]),
                          pa.concat_arrays([one, pa.nulls(1, one.type)]))
    assert nulls.to_pylist() == [None, None]


#: examples per backend and key kind (GRAIL_DUCKDB_APPEND_EXAMPLES: fewer where every GPU
#: configuration runs them)
EXAMPLES = int(os.environ.get("GRAIL_DUCKDB_APPEND_EXAMPLES", "25"))


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_appends_match_the_oracle(backend, kind, data):
    g = data.draw(graphs(max_n=16, max_m=40))
    base = gd.build_index(keys(g.src, kind), keys(g.dst, kind), backend=backend, labels=2,
                          progress=False)
    plan = data.draw(batches(g.n, data.draw(st.integers(1, 3)), g.src, g.dst))
    src, dst, n = list(g.src), list(g.dst), g.n
    index = base
    for bs, bd in plan:
        before = index
        index = index.append(keys(np.asarray(bs, np.int64), kind),
                             keys(np.asarray(bd, np.int64), kind))
        src += bs
        dst += bd
        n = max([n] + [x + 1 for x in bs + bd])
        _check(index, src, dst, n, kind)
        assert index.edge_rows == len(src)
        assert before.reaches([None], [None]).to_pylist() == [None]
    _check(base, list(g.src), list(g.dst), g.n, kind)  # the built index answers as before


@pytest.mark.parametrize("kind", ["int", "str"])
@settings(max_examples=max(3, EXAMPLES // 5), deadline=None)
@given(data=st.data())
def test_appended_parts_load_on_every_backend(tmp_path_factory, backend, kind, data):
    """Parts saved from a CPU index and loaded on each backend (which folds the labels of
    their new vertices again) answer as the oracle on the grown graph."""
    g = data.draw(graphs(max_n=16, max_m=40))
    path = tmp_path_factory.mktemp("parts") / "e.grail.parquet"
    index = gd.build_index(keys(g.src, kind), keys(g.dst, kind), backend="cpu", labels=2,
                           save_to=path, progress=False)
    plan = data.draw(batches(g.n, data.draw(st.integers(1, 3)), g.src, g.dst))
    src, dst, n = list(g.src), list(g.dst), g.n
    for bs, bd in plan:
        index = index.append(keys(np.asarray(bs, np.int64), kind),
                             keys(np.asarray(bd, np.int64), kind))
        src += bs
        dst += bd
        n = max([n] + [x + 1 for x in bs + bd])
    index.save(path)
    loaded = gd.load_index(path, backend=backend)
    assert loaded.fingerprint == index.fingerprint
    _check(loaded, src, dst, n, kind)


def test_cycles_among_new_vertices_are_condensed():
    base = gd.build_index([0, 1], [1, 2], backend="cpu", progress=False)
    grown = base.append([3, 4, 5, 5, 6], [4, 5, 3, 0, 6])  # 3 -> 4 -> 5 -> 3, 5 -> 0, 6 loop
    assert grown.n_components == base.n_components + 2
    assert grown.reaches([3, 4, 5, 6, 0, 3], [2, 2, 4, 6, 3, 6]).to_pylist() == [
        True, True, True, True, False, False]


def test_a_held_source_that_adds_a_path_is_refused():
    base = gd.build_index([0, 1, 3], [1, 2, 4], backend="cpu", progress=False)
    with pytest.raises(NotAppendableError, match="adds a path"):
        base.append([0], [3])
    with pytest.raises(NotAppendableError, match="toward a new one"):
        base.append([0], [9])
    assert base.append([0, 0], [2, 1]).n_vertices == base.n_vertices  # no path added


def test_appended_keys_of_another_type_are_refused():
    base = gd.build_index([0, 1], [1, 2], backend="cpu", progress=False)
    with pytest.raises(KeyTypeError):
        base.append(["a"], ["b"])
    with pytest.raises(gd.EdgeInputError, match="NULL"):
        base.append(pa.array([5, None]), pa.array([1, 2]))
    assert base.append([], []) is base


def test_appended_labels_keep_the_built_ones():
    base = gd.build_index([0, 1, 2], [1, 2, 3], backend="cpu", progress=False)
    before = {name: np.array(a) for name, a in base.labels.arrays().items()}
    grown = base.append([10, 11, 11], [0, 10, 3])
    for name, a in grown.labels.arrays().items():
        if name == "win_first":
            assert np.array_equal(a, before[name])
        else:
            assert np.array_equal(np.asarray(a)[: base.n_components], before[name]), name
    assert int(grown.labels.level.min()) == grown.level_floor < 0


def test_a_built_index_grows_in_its_room_and_every_version_answers():
    """A CPU build leaves free rows after its arrays: the first append writes into them (no
    move), a second append to the same built index copies instead of overwriting the first's
    rows, and the built index and both appended ones answer as the oracle says."""
    src, dst = [0, 1, 1, 3], [1, 2, 3, 4]
    base = gd.build_index(keys(src, "int"), keys(dst, "int"), backend="cpu", progress=False)
    one = base.append(keys([5, 6, 6], "int"), keys([1, 5, 4], "int"))
    for name, a in base.labels.arrays().items():
        if name != "win_first":
            assert np.shares_memory(getattr(one.labels, name), a), name
    assert np.shares_memory(one.dag.indices, base.dag.indices)
    two = base.append(keys([5, 7], "int"), keys([2, 5], "int"))
    assert not np.shares_memory(two.labels.inner, one.labels.inner)
    _check(one, src + [5, 6, 6], dst + [1, 5, 4], 7, "int")
    _check(two, src + [5, 7], dst + [2, 5], 8, "int")
    _check(base, src, dst, 5, "int")


def test_a_key_table_grows_in_its_room_and_every_version_answers():
    """Integer keys with gaps are looked up through a table: keys appended past its end
    extend it in its room (a build leaves room), an append to an index that was appended to
    already copies it, a key inside its range makes a new one, and every version answers as
    the oracle says (none knows another's keys)."""
    from grail_duckdb.kernels.shared import LOOKUP_DENSE

    src, dst = [0, 2, 3], [2, 3, 5]
    base = gd.build_index(keys(src, "int"), keys(dst, "int"), backend="cpu", progress=False)
    assert base.ids.lookup()[0] == LOOKUP_DENSE
    grown = {}
    for name, at, s, d in [("one", "base", [7, 9], [5, 7]), ("two", "one", [11], [9]),
                           ("three", "one", [10], [7]), ("four", "two", [1, 12], [11, 1])]:
        before = base if at == "base" else grown[at][0]
        seen = ([], []) if at == "base" else grown[at][1:]
        grown[name] = (before.append(keys(s, "int"), keys(d, "int")), seen[0] + s, seen[1] + d)
    assert np.shares_memory(grown["one"][0].ids.lookup()[3], base.ids.lookup()[3])
    assert np.shares_memory(grown["two"][0].ids.lookup()[3], grown["one"][0].ids.lookup()[3])
    for index, s, d in grown.values():
        assert index.ids.lookup()[0] == LOOKUP_DENSE
        _check(index, src + s, dst + d, 13, "int")
    _check(base, src, dst, 6, "int")
