"""Appended batches on disk (grail_duckdb.indexfile.appends): each batch a part beside the index
file, read back by load_index with no rebuild; parts of another history are ignored, damaged
ones refused, a rebuild removes them, and a writer killed in the middle of a part leaves the
previous state loadable."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import grail_duckdb as gd
from grail_duckdb.errors import IndexFileError, IndexNotSavedError
from grail_duckdb.indexfile.appends import part_path, parts_of

ROOT = Path(__file__).resolve().parent.parent


def _all_pairs(index, n):
    qs, qt = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    return index.reaches(qs, qt).to_numpy(zero_copy_only=False)


@pytest.mark.parametrize("keys", ["int", "str"])
def test_parts_load_back_as_appended(tmp_path, keys):
    conv = (lambda a: a) if keys == "int" else (lambda a: [f"k{x:03d}" for x in a])
    path = tmp_path / "e.grail.parquet"
    base = gd.build_index(conv([0, 1, 2]), conv([1, 2, 0]), backend="cpu", save_to=path,
                          progress=False)
    grown = base.append(conv([3, 4, 4]), conv([0, 3, 5])).append(conv([6, 6]), conv([4, 6]))
    assert grown.save(path) == path
    assert [n for n, _ in parts_of(path)] == [1, 2]
    loaded = gd.load_index(path, backend="cpu")
    assert loaded.fingerprint == grown.fingerprint and loaded.edge_rows == 8
    assert loaded.persisted == 2 and grown.persisted == 2
    q = conv(list(range(7)) * 7)
    r = conv(sorted(list(range(7)) * 7))
    assert loaded.reaches(q, r).to_pylist() == grown.reaches(q, r).to_pylist()
    more = loaded.append(conv([7]), conv([6]))
    more.save(path)
    assert [n for n, _ in parts_of(path)] == [1, 2, 3]
    assert gd.load_index(path, backend="cpu").reaches(conv([7]), conv([0])).to_pylist() == [True]
    with pytest.raises(gd.StaleIndexError):
        gd.load_index(path, expect_fingerprint=grown.fingerprint)
    gd.build_index(conv([0]), conv([1]), backend="cpu", save_to=path, progress=False)
    assert parts_of(path) == []  # a rebuild removes the parts of the file it replaced


def _as_format_2(path, number: int, batch) -> None:
    """Part ``number`` written again as format 2 wrote it: the labels as one record per new
    component, the children's ends inside it."""
    import pyarrow.parquet as pq

    from grail_duckdb.indexfile import appends as A

    meta = pq.read_schema(part_path(path, number)).metadata
    lab = batch.labels
    k, n = batch.vertices, batch.components
    ww = 0 if lab.win_down is None else int(lab.win_down.shape[1])
    rec = np.zeros(k, A.record(lab.d, int(lab.hub_down.shape[1]), ww))
    for name in rec.dtype.names[:-1]:
        rec[name][:n] = np.asarray(getattr(lab, name))
    rec["dag_end"][:n] = np.asarray(batch.dag.indptr)[1:]
    table = pa.table({
        "key": batch.keys, "component": pa.array(np.asarray(batch.comp, np.int32)),
        "labels": pa.FixedSizeBinaryArray.from_buffers(pa.binary(rec.dtype.itemsize), k,
                                                      [None, pa.py_buffer(rec)]),
        "dag_children": A._blob(np.asarray(batch.dag.indices, "<i4"), k)})
    pre = b"grail_duckdb."
    meta = dict(meta) | {pre + b"version": b"2", pre + b"labels": str(lab.d).encode(),
                         pre + b"hub_words": str(lab.hub_down.shape[1]).encode(),
                         pre + b"win_words": str(ww).encode(),
                         pre + b"digest": A._digest(table).encode()}
    pq.write_table(table.replace_schema_metadata(meta), part_path(path, number))


def test_parts_of_format_2_load_with_their_labels(tmp_path):
    """A part written before parts dropped their labels (format 2) loads as written."""
    path = tmp_path / "e.grail.parquet"
    base = gd.build_index([0, 1, 2], [1, 2, 0], backend="cpu", save_to=path, progress=False)
    grown = base.append([3, 4, 4, 5], [0, 3, 5, 4])
    batch = grown.appended[-1]
    grown.save(path)
    _as_format_2(path, 1, batch)
    from grail_duckdb.indexfile.appends import read_parts
    (part, read), = read_parts(path, base.fingerprint)
    assert part.version == 2 and read.labels is not None  # read, not folded again
    loaded = gd.load_index(path, backend="cpu")
    assert loaded.fingerprint == grown.fingerprint
    n = 6
    qs, qt = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    want = [t in {0: {0, 1, 2}, 1: {0, 1, 2}, 2: {0, 1, 2}, 3: {0, 1, 2, 3},
                  4: {0, 1, 2, 3, 4, 5}, 5: {0, 1, 2, 3, 4, 5}}[s] or s == t
            for s, t in zip(qs, qt)]
    assert loaded.reaches(qs, qt).to_pylist() == want
    np.testing.assert_array_equal(np.asarray(loaded.labels.inner),
                                  np.asarray(grown.labels.inner))


def test_parts_of_another_history_are_ignored(tmp_path):
    path = tmp_path / "e.grail.parquet"
    base = gd.build_index([0, 1], [1, 2], backend="cpu", save_to=path, progress=False)
    a = base.append([3], [0])
    a.save(path)
    b = gd.load_index(path, backend="cpu")
    other = base.append([4], [1])  # a second branch from the same file: part 1 again
    other.save(path)
    assert gd.load_index(path, backend="cpu").fingerprint == other.fingerprint
    b.append([5], [3]).save(path)  # continues the first branch: its part 1 is gone
    loaded = gd.load_index(path, backend="cpu")
    assert loaded.fingerprint == other.fingerprint  # part 2 does not chain from part 1
    assert loaded.reaches([4, 3], [2, 2]).to_pylist() == [True, False]


def test_a_damaged_part_is_refused(tmp_path):
    path = tmp_path / "e.grail.parquet"
    base = gd.build_index([0, 1], [1, 2], backend="cpu", save_to=path, progress=False)
    base.append(np.arange(10, 60), np.arange(9, 59)).save(path)
    part = part_path(path, 1)
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="append-000001"):
        gd.load_index(path, backend="cpu")


def test_an_appended_index_saves_only_beside_its_file(tmp_path):
    grown = gd.build_index([0, 1], [1, 2], backend="cpu", progress=False).append([3], [0])
    with pytest.raises(IndexNotSavedError, match="appended"):
        grown.save(tmp_path / "x.grail.parquet")


_CHILD = """
import sys, time
import grail_duckdb as gd
from grail_duckdb.indexfile import appends
path = sys.argv[1]
index = gd.load_index(path, backend="cpu")
real = appends._write_all
def slow(fd, data):
    real(fd, memoryview(data)[:len(data) // 2])   # half the part's bytes, then the kill
    print("writing", flush=True)
    time.sleep(60)
appends._write_all = slow
index.append(list(range(1000, 1100)), list(range(999, 1099))).save(path)
"""


def test_a_writer_killed_in_a_part_leaves_the_previous_state(tmp_path):
    path = tmp_path / "e.grail.parquet"
    base = gd.build_index([0, 1], [1, 2], backend="cpu", save_to=path, progress=False)
    first = base.append([5], [0])
    first.save(path)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
           "GRAIL_DUCKDB_PROGRESS": "0"}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_CHILD), str(path)],
                             stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline().strip() == b"writing"
        temps = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert temps  # the part under way is a temporary, not a part yet
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    loaded = gd.load_index(path, backend="cpu")
    assert loaded.fingerprint == first.fingerprint and len(parts_of(path)) == 1
    assert loaded.reaches([5, 1000], [2, 999]).to_pylist() == [True, False]
    loaded.append([7], [5]).save(path)  # the next part clears the dead writer's temporary
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert gd.load_index(path, backend="cpu").reaches([7], [2]).to_pylist() == [True]


def test_the_command_line_appends_a_file(tmp_path, capsys):
    from grail_duckdb.tools import cli

    edges = tmp_path / "cites.parquet"
    pa_parquet = pytest.importorskip("pyarrow.parquet")
    pa_parquet.write_table(pa.table({"src": [1, 2, 3], "dst": [2, 3, 4]}), edges)
    new = tmp_path / "new.parquet"
    pa_parquet.write_table(pa.table({"src": [10, 11, 11], "dst": [1, 10, 3]}), new)
    assert cli.main(["build", str(edges), "--backend", "cpu"]) == 0
    assert cli.main(["build", str(edges), "--append", str(new), "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "appended" in out and "+2 vertices, +3 edges" in out
    index = gd.load_index(tmp_path / "cites.grail.parquet", backend="cpu")
    assert index.reaches([11, 10, 1], [4, 4, 10]).to_pylist() == [True, True, False]
    bad = tmp_path / "bad.parquet"
    pa_parquet.write_table(pa.table({"src": [4], "dst": [1]}), bad)
    assert cli.main(["build", str(edges), "--append", str(bad)]) == 2
    assert "cannot be appended" in capsys.readouterr().err
    assert cli.main(["build", str(edges), "--backend", "cpu"]) == 0  # a rebuild: no parts
    assert parts_of(tmp_path / "cites.grail.parquet") == []
