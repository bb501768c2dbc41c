"""Save -> load gives the same answers; damaged, foreign, newer and stale files are refused;
an interrupted write leaves the previous index intact; DuckDB reads the file itself."""
from __future__ import annotations

import errno
import os
import threading

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb import indexfile
from grail_duckdb.indexfile import SaveSettings, atomic_write, writer
from grail_duckdb.kernels import TransferSettings, to_host
from grail_duckdb.kernels.host import workers
from grail_duckdb.kernels.shared import TREE_COLUMNS
from harness import all_pairs, expected
from strategies import KEY_KINDS, graphs, keys_of


@pytest.fixture
def graph():
    rng = np.random.default_rng(5)
    return rng.integers(0, 400, 1500), rng.integers(0, 400, 1500)


@pytest.fixture
def saved(graph, tmp_path):
    idx = gd.build_index(*graph, labels=3, seed=9, backend="cpu")
    path = idx.save(tmp_path / "g.grail.parquet")
    return idx, path


def test_round_trip_gives_identical_answers_and_labels(saved):
    idx, path = saved
    back = gd.load_index(path, expect_fingerprint=idx.fingerprint)  # onto a GPU where one is
    rng = np.random.default_rng(1)
    qs, qd = rng.integers(-5, 405, 20000), rng.integers(-5, 405, 20000)
    assert back.reaches(qs, qd).equals(idx.reaches(qs, qd))
    for name, arr in idx.labels.arrays().items():
        np.testing.assert_array_equal(to_host(getattr(back.labels, name)), arr, err_msg=name)
    assert (back.d, back.seed, back.n_components) == (3, 9, idx.n_components)


def test_string_keys_round_trip(tmp_path):
    idx = gd.build_index(pa.array(["b", "a", "c"]), pa.array(["a", "c", "b"]), backend="cpu")
    back = gd.load_index(idx.save(tmp_path / "s.grail.parquet"))
    assert back.key_kind == "str"
    assert back.reaches(["a", "c", "z"], ["b", "a", "a"]).to_pylist() == [True, True, False]


def test_empty_index_round_trip(tmp_path):
    idx = gd.build_index(pa.array([], pa.int64()), pa.array([], pa.int64()), backend="cpu")
    back = gd.load_index(idx.save(tmp_path / "e.grail.parquet"))
    assert back.reaches([1, 1], [1, 2]).to_pylist() == [True, False]


def test_duckdb_reads_the_index_file(saved):
    idx, path = saved
    rows = duckdb.connect().execute("SELECT count(*), count(dag_children), max(component) + 1 "
                                    "FROM read_parquet(?)", [str(path)]).fetchone()
    assert rows == (idx.n_vertices, idx.n_components, idx.n_components)


def test_truncated_file_is_refused(saved):
    _, path = saved
    data = path.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 3):
        path.write_bytes(data[:cut])
        with pytest.raises(gd.IndexFileError, match="rebuild"):
            gd.load_index(path)


def test_flipped_bytes_are_refused_or_provably_harmless(saved):
    """Some bytes of a Parquet file are redundant (statistics, page-header fields, a second
    copy of the column names). A flipped byte must either be refused or leave every loaded
    value identical: the digest covers everything that is loaded. Most flips are refused."""
    idx, path = saved
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    qs, qd = rng.integers(0, 400, 5000), rng.integers(0, 400, 5000)
    want = idx.reaches(qs, qd)
    refused = 0
    positions = rng.integers(4, len(data) - 8, 40)
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 0x5A
        path.write_bytes(bad)
        try:
            back = gd.load_index(path)
        except gd.IndexFileError:
            refused += 1
            continue
        assert back.reaches(qs, qd).equals(want)
        for name, arr in idx.labels.arrays().items():
            np.testing.assert_array_equal(to_host(getattr(back.labels, name)), arr)
    assert refused >= len(positions) // 2


def test_leaf_hash_sees_every_bit_word_order_and_length():
    """The row groups' hash (the digest's leaves): any single flipped bit, at any alignment of
    the range, two 8-byte words swapped, or trailing zero bytes give another hash."""
    from grail_duckdb.indexfile.digest import hash_bytes

    data = bytes(np.random.default_rng(3).integers(0, 256, 301, dtype=np.uint8))
    for start in range(8):
        view = memoryview(data)[start:]
        seen = {hash_bytes(view)}
        for pos in range(0, len(view), 7):
            for bit in (0, 3, 7):
                bad = bytearray(view)
                bad[pos] ^= 1 << bit
                seen.add(hash_bytes(bad))
        swapped = bytearray(view)
        swapped[0:8], swapped[8:16] = view[8:16], view[0:8]
        seen.add(hash_bytes(swapped))
        seen.update(hash_bytes(bytes(view) + bytes(k)) for k in range(1, 9))
        assert len(seen) == 1 + 3 * len(range(0, len(view), 7)) + 1 + 8
    assert len({hash_bytes(bytes(k)) for k in range(40)}) == 40


def test_changed_metadata_and_a_moved_digest_are_refused(saved):
    """The footer is hashed as bytes: a metadata value changed in place (same length), or a
    digest that is not the footer's last key-value pair, is refused."""
    _, path = saved
    data = bytearray(path.read_bytes())
    key = b"grail_duckdb.seed"
    at = data.rfind(key) + len(key) + 2          # past the value's header and length
    bad = bytearray(data)
    bad[at] = ord("7") if bad[at] != ord("7") else ord("8")
    path.write_bytes(bad)
    with pytest.raises(gd.IndexFileError, match="digest"):
        gd.load_index(path)
    digest = b"grail_duckdb.digest"
    bad = bytearray(data)
    at = bad.rfind(digest)
    bad[at:at + len(digest)] = b"grail_duckdb.d1gest"
    path.write_bytes(bad)
    with pytest.raises(gd.IndexFileError):
        gd.load_index(path)
    path.write_bytes(data)
    assert gd.load_index(path).n_vertices > 0


def test_a_large_index_is_cut_into_at_most_max_parts_row_groups(backend, tmp_path):
    """Parts grow past ``part_bytes`` where that would make more than ``max_parts`` of them,
    and shrink (to 1,024 rows) where that would make fewer than ``min_parts``; the file loads
    to the same answers either way."""
    rng = np.random.default_rng(30)
    src, dst = rng.integers(0, 20_000, 60_000), rng.integers(0, 20_000, 60_000)
    idx = gd.build_index(src, dst, labels=2, backend=backend)
    small = idx.save(tmp_path / "small.grail.parquet",  # 2 MB of data: 1,024 rows a part
                     settings=SaveSettings(min_parts=32))
    assert pq.ParquetFile(small).metadata.num_row_groups == -(-idx.n_vertices // 1024)
    four = SaveSettings(min_parts=4)
    assert pq.ParquetFile(idx.save(small, settings=four)).metadata.num_row_groups == 4
    many = idx.save(tmp_path / "many.grail.parquet",
                    settings=SaveSettings(min_parts=4, part_bytes=1 << 10))
    few = idx.save(tmp_path / "few.grail.parquet",
                   settings=SaveSettings(min_parts=4, part_bytes=1 << 10, max_parts=4))
    assert pq.ParquetFile(many).metadata.num_row_groups == -(-idx.n_vertices // 1024)
    assert pq.ParquetFile(few).metadata.num_row_groups == 4
    qs, qd = rng.integers(-3, 20_003, 20_000), rng.integers(-3, 20_003, 20_000)
    want = idx.reaches(qs, qd)
    for path in (small, many, few):
        assert gd.load_index(path, backend=backend).reaches(qs, qd).equals(want)


def test_a_component_over_several_row_groups_round_trips(backend, tmp_path):
    """A cycle of 60,000 vertices (one component) cut into row groups of which all but the
    first hold no representative row, then a chain of 51: loaded as it was saved."""
    n = 60_000
    src = np.r_[np.arange(n), n + np.arange(50)]
    dst = np.r_[(np.arange(n) + 1) % n, n + np.arange(1, 51)]
    idx = gd.build_index(src, dst, backend="cpu")
    path = idx.save(tmp_path / "cycle.grail.parquet", settings=SaveSettings(part_bytes=1 << 18))
    assert pq.ParquetFile(path).metadata.num_row_groups > 3
    back = gd.load_index(path, backend=backend)
    assert back.n_components == idx.n_components == 52
    qs, qd = [5, n + 3, n - 1, 7, n + 10], [n - 1, n + 10, 3, n + 1, n + 3]
    assert back.reaches(qs, qd).to_pylist() == [True, True, True, False, False]
    np.testing.assert_array_equal(to_host(back.comp), idx.comp)


def test_a_build_that_saves_as_it_goes_writes_the_file_a_save_writes(backend, tmp_path):
    """``build_index(..., save_to=path)`` (the ETL path: the children's region written during
    the labels) lays down the bytes that a save of the built index lays down, in many row
    groups, with cycles (representative rows) and on either backend; its last phase is the
    save, and the file loads to the same answers."""
    small_parts = SaveSettings(part_bytes=1 << 16)
    rng = np.random.default_rng(21)
    src, dst = rng.integers(0, 6_000, 20_000), rng.integers(0, 6_000, 20_000)
    src, dst = np.r_[src, np.arange(100)], np.r_[dst, (np.arange(100) + 1) % 100]  # a cycle
    streamed = gd.build_index(src, dst, labels=2, backend=backend, save_to=indexfile.IndexWriter(
        tmp_path / "streamed.grail.parquet", settings=small_parts))
    assert list(streamed.build_seconds)[-1] == "save"
    assert {"children's region", "encode and write"} <= set(streamed.save_seconds)
    whole = streamed.save(tmp_path / "whole.grail.parquet", settings=small_parts)
    assert pq.ParquetFile(whole).metadata.num_row_groups > 3
    assert streamed.n_components < streamed.n_vertices
    assert (tmp_path / "streamed.grail.parquet").read_bytes() == whole.read_bytes()
    back = gd.load_index(tmp_path / "streamed.grail.parquet", backend=backend)
    qs, qd = rng.integers(-5, 6_005, 30_000), rng.integers(-5, 6_005, 30_000)
    assert back.reaches(qs, qd).equals(streamed.reaches(qs, qd))
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@settings(max_examples=60, deadline=None)
@given(g=graphs(), kind=st.sampled_from(KEY_KINDS), d=st.integers(1, 4))
def test_a_streamed_file_round_trips_every_graph_shape(tmp_path_factory, g, kind, d):
    """Cycles, self-loops, duplicate edges, isolated ids, string keys, no edges at all: the
    file a build writes as it goes (its one row group right behind its children's page) is
    the file a save writes, and loads to the oracle's answers for every pair."""
    folder = tmp_path_factory.mktemp("streamed")
    idx = gd.build_index(keys_of(g.src, kind), keys_of(g.dst, kind), labels=d, backend="cpu",
                         save_to=folder / "s.grail.parquet")
    whole = idx.save(folder / "w.grail.parquet")
    assert (folder / "s.grail.parquet").read_bytes() == whole.read_bytes()
    back = gd.load_index(folder / "s.grail.parquet", backend="cpu")
    qs, qd = all_pairs(g.n)
    got = back.reaches(keys_of(qs, kind), keys_of(qd, kind))
    np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), expected(g, qs, qd))


def test_a_build_that_saves_refuses_a_foreign_target_before_any_work(tmp_path):
    target = tmp_path / "data.parquet"
    pq.write_table(pa.table({"citing": [1, 2], "cited": [2, 3]}), target)
    before = target.read_bytes()
    with pytest.raises(gd.IndexFileError, match="refusing to overwrite"):
        gd.build_index(tmp_path / "no such edges.parquet", save_to=target, backend="cpu")
    assert target.read_bytes() == before


def test_a_build_that_fails_during_the_labels_leaves_the_old_index(saved, monkeypatch):
    """The children's region is being written when the labels fail: the temporary goes and
    the old index stays as it was, loadable."""
    idx, path = saved
    before = path.read_bytes()
    from grail_duckdb.engine import build as index_module

    def fail(*args, **kwargs):
        raise MemoryError("simulated: the labels do not fit")

    monkeypatch.setattr(index_module, "grail_labels", fail)
    with pytest.raises(MemoryError):
        gd.build_index([1, 2, 3], [2, 3, 1], backend="cpu", save_to=path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert gd.load_index(path).n_vertices == idx.n_vertices
    assert os.listdir(path.parent) == [path.name]


def test_a_build_that_fails_does_not_write_the_rest_of_its_region(tmp_path, monkeypatch):
    """The labels fail while the children's pages are queued: the queued pages are dropped,
    not written into a temporary that is about to go."""
    import threading
    import time

    from grail_duckdb.engine import build as index_module
    from grail_duckdb.indexfile import parts as pp

    written, real = [], pp.write_blob_page
    queued = threading.Event()

    def slow_page(*args):
        queued.wait(10)
        time.sleep(0.2)  # the failure reaches the pool's shutdown long before a second page
        written.append(1)
        return real(*args)

    def fail(*args, **kwargs):
        queued.set()
        raise MemoryError("simulated: the labels do not fit")

    monkeypatch.setattr(pp, "write_blob_page", slow_page)
    monkeypatch.setattr(index_module, "grail_labels", fail)
    n = 200 * 1024
    with pytest.raises(MemoryError):
        gd.build_index(np.arange(n), (np.arange(n) + 1) % (n + 1), backend="cpu",
                       save_to=indexfile.IndexWriter(  # a part per 1,024 rows
                           tmp_path / "x.grail.parquet", settings=SaveSettings(part_bytes=1 << 10)))
    assert len(written) <= 2 * workers() < 200
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fails", ["region", "groups"])
def test_a_build_whose_file_cannot_be_written_keeps_the_index(saved, monkeypatch, fails):
    """A full disk while the children's region is written (during the labels) or while the
    label columns are: the build raises IndexNotSavedError (an OSError) that holds the built
    index, which answers as the oracle does and saves elsewhere; the old file stays."""
    idx, path = saved
    before = path.read_bytes()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer._Writer if fails == "region" else writer.IndexWriter,
                        "write" if fails == "region" else "_write_groups", full)
    with pytest.raises(gd.IndexNotSavedError, match="not saved.*No space left") as caught:
        gd.build_index([1, 2, 3, 5], [2, 3, 1, 6], backend="cpu", save_to=path)
    monkeypatch.undo()
    assert isinstance(caught.value, OSError)
    built = caught.value.index
    assert built.reaches([1, 3, 5, 6], [3, 2, 6, 5]).to_pylist() == [True, True, True, False]
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]
    again = built.save(path.parent / "elsewhere.grail.parquet")
    assert gd.load_index(again).reaches([5], [6]).to_pylist() == [True]


def test_tampered_content_with_valid_parquet_is_refused(saved):
    _, path = saved
    table = pq.read_table(path)
    level = table.column("level").to_numpy().copy()
    level[0] += 1
    table = table.set_column(table.schema.get_field_index("level"), "level", pa.array(level))
    pq.write_table(table, path)
    with pytest.raises(gd.IndexFileError, match="digest"):
        gd.load_index(path)


def test_dag_edges_out_of_range_under_a_valid_digest_are_refused(backend, tmp_path):
    """A file our own writer sealed whose DAG edges point past the last component (a writer
    defect, not damage: the digest holds) is refused by every backend's reader (a GPU load
    checks the ranges on the device, a CPU load per row group)."""
    import dataclasses

    from grail_duckdb.model import CSR

    idx = gd.build_index([1, 2, 3], [2, 3, 4], backend="cpu")  # a path: four components
    bad = idx.dag.indices.copy()
    bad[1] = idx.n_components
    path = dataclasses.replace(idx, dag=CSR(idx.dag.indptr, bad)).save(tmp_path / "bad.parquet")
    with pytest.raises(gd.IndexFileError, match="DAG edges out of range"):
        gd.load_index(path, backend=backend)
    gd.load_index(idx.save(tmp_path / "good.parquet"), backend=backend)  # the sound one loads


def test_foreign_and_newer_files_are_refused(saved, tmp_path):
    _, path = saved
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    with pytest.raises(gd.IndexFileError, match="not a grail_duckdb index"):
        gd.load_index(foreign)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"grail_duckdb.version"] = str(indexfile.FORMAT_VERSION + 1).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(gd.IndexFileError, match="newer"):
        gd.load_index(path)
    with pytest.raises(gd.IndexFileError, match="no index file"):
        gd.load_index(tmp_path / "missing.parquet")


def test_stale_fingerprint_is_refused(saved, graph):
    idx, path = saved
    other = gd.build_index(graph[0], np.roll(graph[1], 1), backend="cpu")
    assert other.fingerprint != idx.fingerprint
    with pytest.raises(gd.StaleIndexError, match="rebuild"):
        gd.load_index(path, expect_fingerprint=other.fingerprint)


@pytest.mark.parametrize("crash_at", ["write", "fsync", "replace"])
def test_interrupted_write_leaves_the_old_index_loadable(saved, monkeypatch, crash_at):
    idx, path = saved
    before = path.read_bytes()
    newer = gd.build_index([1, 2], [2, 3], backend="cpu")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("simulated crash")

    target = {"write": (writer.IndexWriter, "_write_groups"),
              "fsync": (atomic_write.os, "fsync"),
              "replace": (atomic_write.os, "replace")}[crash_at]
    monkeypatch.setattr(*target, crash)
    with pytest.raises(KeyboardInterrupt):
        newer.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert gd.load_index(path).n_vertices == idx.n_vertices
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert os.listdir(path.parent) == [path.name]


# --- issue 11: never overwrite what is not ours, clean our own leftovers, follow the umask ---
@pytest.mark.parametrize("kind", ["duckdb", "parquet", "text", "empty"])
def test_save_refuses_to_overwrite_a_file_that_is_not_an_index(saved, tmp_path, kind):
    idx, _ = saved
    path = tmp_path / {"duckdb": "db.duckdb", "parquet": "data.parquet", "text": "notes.txt",
                       "empty": "empty.grail.parquet"}[kind]
    if kind == "duckdb":
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
        con.close()
    elif kind == "parquet":
        pq.write_table(pa.table({"citing": [1, 2], "cited": [2, 3]}), path)
    elif kind == "text":
        path.write_text("my notes\n")
    else:
        path.write_bytes(b"")
    before = path.read_bytes()
    with pytest.raises(gd.IndexFileError, match=str(path).replace(".", r"\.")):
        idx.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    if kind == "duckdb":
        assert duckdb.connect(str(path)).execute("SELECT x FROM t").fetchone() == (1,)


def test_save_refuses_a_folder(saved, tmp_path):
    idx, _ = saved
    (tmp_path / "dir.grail.parquet").mkdir()
    with pytest.raises(gd.IndexFileError, match="dir.grail.parquet"):
        idx.save(tmp_path / "dir.grail.parquet")


def test_save_replaces_its_own_index(saved):
    idx, path = saved
    other = gd.build_index([1, 2], [2, 3], backend="cpu")
    other.save(path)
    assert gd.load_index(path).n_vertices == 3


def test_the_replaced_index_is_removed_after_the_save_returns(saved, monkeypatch):
    """The file a save replaces is unlinked on a thread of its own once the new one is in
    place (freeing its blocks took about 2 s for 9.5 GB on the device host's ext4): the save
    returns before it is gone, a reader that holds it open still reads it whole, and once
    the removal is over the folder holds the new index alone."""
    idx, path = saved
    before = path.read_bytes()
    release, removing = threading.Event(), []
    plain = atomic_write._remove

    def slow(old):
        removing.append(old)
        release.wait(10)
        plain(old)

    monkeypatch.setattr(atomic_write, "_remove", slow)
    with open(path, "rb") as held:
        gd.build_index([1, 2], [2, 3], backend="cpu").save(path)
        assert gd.load_index(path).n_vertices == 3  # the new one is in place ...
        aside = [p for p in path.parent.iterdir() if p.name.endswith(".old.tmp")]
        assert len(aside) == 1 and aside[0].read_bytes() == before  # ... the old one aside
        release.set()
        atomic_write.wait_for_removals()
        assert removing == aside and held.read() == before
    assert os.listdir(path.parent) == [path.name]


_KILLED_SAVE = """
import os, signal, sys
import grail_duckdb as gd
from grail_duckdb.indexfile import writer

def killed(self, *rest):
    os.pwrite(self._file.fd, b"PAR1" + b"x" * 4096, 0)
    os.kill(os.getpid(), signal.SIGKILL)

writer.IndexWriter._write_groups = killed
gd.build_index([1, 2], [2, 3], backend="cpu").save(sys.argv[1])
"""


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(saved, tmp_path):
    import subprocess
    import sys

    idx, path = saved
    before = path.read_bytes()
    rc = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(path)],
                        env={**os.environ}, timeout=120).returncode
    assert rc == -9
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].name.startswith(f".{path.name}.")
    assert path.read_bytes() == before                     # the old index is intact
    unrelated = tmp_path / ".other.grail.parquet.abc.tmp"   # not a temporary of this file
    unrelated.write_bytes(b"keep me")
    idx.save(path)
    assert not left[0].exists()
    assert unrelated.exists()
    assert gd.load_index(path).n_vertices == idx.n_vertices


def test_a_temporary_still_being_written_is_left_alone(saved, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    idx, path = saved
    live = tmp_path / f".{path.name}.livewriter.tmp"
    with open(live, "wb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)   # another process's save
        idx.save(path)
        assert live.exists()
    idx.save(path)
    assert not live.exists()


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_index_files_follow_the_umask(saved, tmp_path, umask):
    idx, _ = saved
    old = os.umask(umask)
    try:
        path = idx.save(tmp_path / f"u{umask:o}.grail.parquet")
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_an_older_format_is_refused_with_rebuild_and_may_be_replaced(saved):
    idx, path = saved
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"grail_duckdb.version"] = b"1"
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(gd.IndexFileError, match="older.*rebuild"):
        gd.load_index(path)
    idx.save(path)   # an index of ours, even an old one, may be replaced
    assert gd.load_index(path).n_vertices == idx.n_vertices


def test_write_back_as_written_and_periodic_flushes_write_the_same_file(tmp_path, monkeypatch):
    """A save whose parts' write-back starts as each is written (Linux) and one that flushes
    every few parts instead (elsewhere) lay down the same bytes; the write-back reaches the
    kernel where it exists, once per part."""
    knobs = SaveSettings(part_bytes=64 << 10, sync_bytes=100_000)
    rng = np.random.default_rng(4)
    idx = gd.build_index(rng.integers(0, 50_000, 80_000), rng.integers(0, 50_000, 80_000),
                         labels=2, backend="cpu")
    calls = []
    real = writer.write_back
    monkeypatch.setattr(writer, "write_back",
                        lambda fd, pos, size: calls.append(size) or real(fd, pos, size))
    first = idx.save(tmp_path / "a.grail.parquet", settings=knobs).read_bytes()
    groups = pq.ParquetFile(tmp_path / "a.grail.parquet").num_row_groups
    assert groups > 5 and len(calls) >= groups
    if writer._SYNC_FILE_RANGE is not None:
        fd = os.open(tmp_path / "a.grail.parquet", os.O_RDONLY)
        try:
            assert real(fd, 0, 4096)
        finally:
            os.close(fd)
    monkeypatch.setattr(writer, "_SYNC_FILE_RANGE", None)
    assert not real(0, 0, 4096)
    assert idx.save(tmp_path / "b.grail.parquet", settings=knobs).read_bytes() == first
    qs, qt = rng.integers(0, 50_000, 5000), rng.integers(0, 50_000, 5000)
    assert gd.load_index(tmp_path / "b.grail.parquet").reaches(qs, qt).equals(idx.reaches(qs, qt))


@pytest.mark.parametrize("dag", [False, True])
def test_large_index_round_trip_covers_many_parts(tmp_path, dag, backend):
    """Parts of ~64 KiB: many row groups, laid into one file by parquet_parts; with cycles
    (representative rows, gathered labels) and as a DAG (every row its own component); saved
    from and loaded straight onto each backend."""
    knobs = SaveSettings(part_bytes=64 << 10,  # GPU saves: many chunks
                         transfers=TransferSettings(chunk_bytes=100_003))
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 300_000, 400_000), rng.integers(0, 300_000, 400_000)
    if dag:
        src, dst = np.minimum(src, dst), np.maximum(src, dst) + 1
    idx = gd.build_index(src, dst, labels=2, backend="cpu")
    assert (idx.n_components == idx.n_vertices) == dag
    path = idx.to_backend(backend).save(tmp_path / "big.grail.parquet", settings=knobs)
    back = gd.load_index(path, backend=backend)
    assert back.backend == backend.name and pq.ParquetFile(path).num_row_groups > 10
    qs, qd = rng.integers(0, 300_000, 50_000), rng.integers(0, 300_000, 50_000)
    assert back.reaches(qs, qd).equals(idx.reaches(qs, qd))
    np.testing.assert_array_equal(to_host(back.dag.indptr), idx.dag.indptr)
    np.testing.assert_array_equal(to_host(back.dag.indices), idx.dag.indices)
    np.testing.assert_array_equal(to_host(back.comp), idx.comp)
    for name, arr in idx.labels.arrays().items():
        np.testing.assert_array_equal(to_host(getattr(back.labels, name)), arr, err_msg=name)


def test_duckdb_reads_the_children_as_int32_blobs(saved):
    """The layout the module documents: the children of each representative row as BLOBs of
    little-endian int32 component ids (DuckDB's own reader and pyarrow's agree)."""
    idx, path = saved
    rows = duckdb.connect().execute(
        "SELECT component, dag_children FROM read_parquet(?) WHERE dag_children IS NOT NULL "
        "ORDER BY component", [str(path)]).fetchall()
    assert [c for c, _ in rows] == list(range(idx.n_components))
    got = np.concatenate([np.frombuffer(b, "<i4") for _, b in rows])
    np.testing.assert_array_equal(got, idx.dag.indices)
    table = pq.read_table(path)
    assert table.column("key").to_pylist() == idx.ids.keys.to_pylist()


def test_duckdb_reads_the_labels_by_component(saved):
    """The layout the module documents: row r of a label column holds component r's labels
    (each component's once, however many vertices it has), the rows after the last component
    zeros; the tree intervals as their sizes."""
    idx, path = saved
    assert idx.n_components < idx.n_vertices  # a graph with cycles: rows past the components
    rows = duckdb.connect().execute(
        "SELECT level, inner_1, outer_3, tree_post, tree_size, hub_up_1 "
        "FROM read_parquet(?, file_row_number := true) ORDER BY file_row_number",
        [str(path)]).fetchnumpy()
    lab, c = idx.labels, idx.n_components
    tree_lo, tree_post = TREE_COLUMNS.index("tree_lo"), TREE_COLUMNS.index("tree_post")
    want = {"level": lab.level, "inner_1": lab.inner[:, 0], "outer_3": lab.outer[:, 2],
            "tree_post": lab.tree[:, tree_post],
            "tree_size": lab.tree[:, tree_post] - lab.tree[:, tree_lo] + 1,
            "hub_up_1": lab.hub_up[:, 0]}
    for name, values in want.items():
        np.testing.assert_array_equal(rows[name][:c], values, err_msg=name)
        assert not rows[name][c:].any(), name


def test_a_truncated_index_may_be_replaced_but_not_a_truncated_data_file(saved, tmp_path):
    idx, path = saved
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])        # our index, damaged: a rebuild replaces it
    idx.save(path)
    assert gd.load_index(path).n_vertices == idx.n_vertices
    other = tmp_path / "data.parquet"
    other.write_bytes(data[: len(data) // 2])       # not named as an index: left alone
    with pytest.raises(gd.IndexFileError, match="data.parquet"):
        idx.save(other)


def test_pinned_download_gives_the_array(backend):
    """Device arrays come to the host through two alternating pinned buffers: any size (odd
    byte counts, chunks that split an element), any shape, strided columns, empty arrays."""
    if backend.name == "cpu":
        pytest.skip("the pinned download is the GPU backend's")
    from grail_duckdb.kernels.gpu_transfers import download

    xp, rng = backend.xp, np.random.default_rng(5)
    for shape, dtype in [((1_000_003,), np.int32), ((250_001, 5), np.int64), ((0,), np.uint8),
                         ((7,), np.uint64), ((30_011, 2), np.uint64)]:
        host = rng.integers(0, 2**31, shape).astype(dtype)
        np.testing.assert_array_equal(download(xp.asarray(host), 4099), host)
    wide = rng.integers(0, 2**31, (100_000, 3)).astype(np.int64)
    np.testing.assert_array_equal(download(xp.asarray(wide)[:, 1], 4096), wide[:, 1])


def test_several_device_arrays_come_back_in_one_copy(backend):
    """``to_host_all``: arrays of any dtype, shape and size (empty, transposed, sliced) come
    back equal, on either backend."""
    from grail_duckdb.kernels import to_host_all

    xp, rng = backend.xp, np.random.default_rng(6)
    host = [rng.integers(0, 2**31, 1_001).astype(np.int32), np.zeros(0, np.int64),
            rng.integers(0, 2**62, (333, 5)).astype(np.uint64), np.arange(7, dtype=np.uint8)]
    dev = [xp.asarray(a) for a in host]
    got = to_host_all([dev[0][3:900], dev[1], dev[2].T, dev[2][::2, 1], dev[3]])
    want = [host[0][3:900], host[1], host[2].T, host[2][::2, 1], host[3]]
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_device_arrays_land_in_reused_host_memory(backend):
    """``to_host_all`` with a :class:`Landing`: the same arrays as without one, call after
    call over the same memory (a larger call grows it), and the earlier call's arrays are
    overwritten only by a later call, never by the arrays of their own call."""
    from grail_duckdb.kernels import Landing, to_host_all

    small = TransferSettings(pinned_min_bytes=1000, chunk_bytes=4099)
    xp, rng, landing = backend.xp, np.random.default_rng(8), Landing()
    for rows in (2_000, 1_500, 9_000):
        host = [rng.integers(0, 2**31, rows).astype(np.int32),
                rng.integers(0, 2**62, (rows, 3)).astype(np.uint64), np.arange(5, dtype=np.int64)]
        dev = [xp.asarray(a) for a in host]
        got = to_host_all([dev[0], dev[1].T, dev[1][:, 2], dev[2]], landing, settings=small)
        want = [host[0], host[1].T, host[1][:, 2], host[2]]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.flags.c_contiguous
            np.testing.assert_array_equal(g, w)
    views = Landing().arrays([((3, 5), np.int32), ((7,), np.uint64), ((0,), np.int8)])
    assert [v.shape for v in views] == [(3, 5), (7,), (0,)]
    views[0][...] = -1
    views[1][...] = 2
    assert (views[0] == -1).all() and (views[1] == 2).all()


def test_columns_come_to_the_host_transposed(backend):
    """``to_host_columns``: 1-D arrays as they are, 2-D runs of rows as their columns,
    contiguous, with or without a :class:`Landing` (the downloaded rows and the columns
    share its memory without overlapping), on this thread's own stream."""
    from grail_duckdb.kernels import Landing, mark_ready, on_own_stream, to_host_columns

    small = TransferSettings(pinned_min_bytes=1000, chunk_bytes=4099)
    xp, rng, landing = backend.xp, np.random.default_rng(9), Landing()
    for rows in (3_000, 40, 12_000):
        host = [rng.integers(0, 2**31, (rows, 9)).astype(np.int32),
                rng.integers(0, 2**31, rows).astype(np.int32),
                rng.integers(0, 2**62, (rows, 4)).astype(np.uint64)]
        dev = [xp.asarray(a) for a in host]
        lo, hi = rows // 3, rows - 5
        for land in (landing, None):
            with on_own_stream(mark_ready(dev[0])):
                got = to_host_columns([a[lo:hi] for a in dev], land, small)
            want = [host[0][lo:hi].T, host[1][lo:hi], host[2][lo:hi].T]
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.flags.c_contiguous
                np.testing.assert_array_equal(g, w)


_LATE_FILL = r"""
extern "C" __global__ void late_fill(int* out, int n, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = i + 1;
}
"""


@pytest.mark.gpu
def test_own_stream_waits_for_the_work_before_the_mark(backend):
    """A thread that copies on its own stream (a save's parts, while the build's hub passes
    run) sees what the default stream's work before :func:`mark_ready` wrote, not what was
    there before: a kernel that writes late, then the copies from another thread, large (the
    pinned download) and small."""
    if backend.name == "cpu":
        pytest.skip("streams are the GPU backend's")
    import cupy as cp
    from grail_duckdb.kernels import mark_ready, on_own_stream, to_host_columns

    n = 4_000_000
    for rows in (n, 1_000):
        out = cp.zeros((rows, 2), cp.int32)
        cp.cuda.runtime.deviceSynchronize()
        cp.RawKernel(_LATE_FILL, "late_fill")((64,), (256,), (out, np.int32(2 * rows),
                                                             np.int64(300_000_000)))
        ready = mark_ready(out)
        got = []

        def copy():
            with on_own_stream(ready):
                got.extend(to_host_columns([out]))

        worker = threading.Thread(target=copy)
        worker.start()
        worker.join()
        want = np.arange(1, 2 * rows + 1, dtype=np.int32).reshape(rows, 2).T
        np.testing.assert_array_equal(got[0], want)


def test_host_values_reach_a_slice_of_a_backend_array(backend):
    """``copy_into``: host values into row blocks of 1-D and 2-D arrays, through several
    pinned chunks on a GPU (odd chunk sizes that split elements), converting the dtype; the
    values of one call one after the other through the buffers (many small ones sharing
    one, larger ones across several), with a staging that the call does not wait for."""
    from grail_duckdb.kernels import copy_into, upload_staging

    small = TransferSettings(pinned_min_bytes=1000, chunk_bytes=4099)
    xp, rng = backend.xp, np.random.default_rng(7)
    wide = rng.integers(0, 2**62, (3_000, 3)).astype(np.uint64)
    dst = xp.zeros((3_000, 3), xp.uint64)
    copy_into([(dst[100:2_900], wide[100:2_900])], settings=small)
    copy_into([(dst[:5], wide[:5])], settings=small)
    want = wide.copy()
    want[2_900:] = 0
    want[5:100] = 0
    np.testing.assert_array_equal(to_host(dst), want)
    flat = xp.zeros(50_001, xp.int32)
    values = rng.integers(-2**31, 2**31, 50_001)
    copy_into([(flat, values)], settings=small)
    np.testing.assert_array_equal(to_host(flat), values.astype(np.int32))
    staging = upload_staging(xp, small)
    cols = xp.zeros((40, 700), xp.int32)
    pieces = [rng.integers(-2**31, 2**31, 17 * j % 700) for j in range(40)]
    for _ in range(2):  # the second call's buffers wait for the first's copies
        copy_into([(cols[j, :v.shape[0]], v) for j, v in enumerate(pieces)]
                  + [(flat, values[::-1]), (dst[7:9], wide[:2])], staging, small)
    if xp is not np:
        xp.cuda.Device().synchronize()
    got = to_host(cols)
    for j, v in enumerate(pieces):
        np.testing.assert_array_equal(got[j, :v.shape[0]], v.astype(np.int32))
        assert not got[j, v.shape[0]:].any()
    np.testing.assert_array_equal(to_host(flat), values[::-1].astype(np.int32))
    np.testing.assert_array_equal(to_host(dst)[7:9], wide[:2])


def test_a_view_that_outlives_the_load_does_not_refuse_the_file(tmp_path, monkeypatch):
    """A view of the load's map still alive when the load closes it (a library's or a
    frame's, freed only by the collector): the load returns its index rather than calling
    the file damaged, and the map goes with the view."""
    import mmap as mmap_module

    from grail_duckdb.indexfile import reader as index_reader

    idx = gd.build_index(np.array([0, 1, 2]), np.array([1, 2, 0]), backend="cpu",
                         progress=False)
    path = idx.save(tmp_path / "v.grail.parquet")
    kept = []
    read = index_reader.IndexReader.read

    def read_and_keep(self):
        kept.append(memoryview(self.mapped))  # a view nobody releases
        return read(self)

    monkeypatch.setattr(index_reader.IndexReader, "read", read_and_keep)
    back = gd.load_index(path, backend="cpu")
    assert back.reaches([0], [2]).tolist() == [True]
    assert isinstance(kept[0].obj, mmap_module.mmap) and not kept[0].obj.closed
    kept[0].release()


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=40), st.integers(0, 7),
       st.integers(0, 3), st.integers(0, 100))
def test_a_groups_children_rows_as_the_numpy_reference_finds_them(rows, bit0, c0, e0):
    """The load's one-pass check of a row group's children (indexfile/page_headers.children_rows)
    against the same rules in NumPy: representatives (children not NULL) of consecutive
    components from the first one's, each BLOB whole int32, the row pointers they end."""
    from grail_duckdb.indexfile.page_headers import children_rows

    valid = np.array([v for v, _ in rows], bool)
    counts = np.array([n if v else 0 for v, n in rows], np.int64)
    comp = np.zeros(len(rows), np.int32)
    comp[valid] = c0 + np.arange(int(valid.sum()))
    comp[~valid] = c0  # a non-representative row of the first component
    offsets = np.concatenate([[0], np.cumsum(4 * counts)]).astype(np.int64)
    bits = np.packbits(np.concatenate([np.zeros(bit0, bool), valid]), bitorder="little")
    c = c0 + int(valid.sum())
    ptr = np.zeros(c + 1, np.int64)
    got = children_rows(bits, bit0, offsets, comp, ptr, e0)
    assert got == (c0 if valid.any() else 0, c if valid.any() else 0, True)
    np.testing.assert_array_equal(ptr[c0 + 1:c + 1], e0 + np.cumsum(counts[valid]))
    if valid.sum() >= 2:  # a representative out of turn, a BLOB cut, a pointer past the end
        at = int(np.flatnonzero(valid)[1])
        for damage in ("comp", "blob", "short"):
            bad_comp, bad_offsets, bad_ptr = comp.copy(), offsets.copy(), ptr.copy()
            if damage == "comp":
                bad_comp[at] += 1
            elif damage == "blob":
                bad_offsets[at + 1:] += 1
            else:
                bad_ptr = np.zeros(c, np.int64)
            assert not children_rows(bits, bit0, bad_offsets, bad_comp, bad_ptr, e0)[2]
