"""The GPU backend's label records (grail_duckdb/kernels/records.py): every field of every
component comes back from its record, the layout's fields never overlap, and the record a GPU
index queries holds the labels of the index (its answers are compared with the CPU backend's
in test_queries and test_kernels)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb.kernels.records import (LINE_INTS, RECORD_LABELS, RECORD_LEVEL, SECTOR_INTS,
                                          label_record, record_layout)
from grail_duckdb.tools.generators import citation_dag


@given(st.integers(1, 12), st.integers(0, 4))
def test_layout_fields_are_disjoint_and_aligned(d, hw):
    tree_at, hub_at, stride = record_layout(d, hw)
    used = np.zeros(stride, np.int32)
    used[tree_at:tree_at + 4] += 1
    used[RECORD_LEVEL] += 1
    used[RECORD_LABELS:RECORD_LABELS + 2 * d] += 1
    used[hub_at:hub_at + 4 * hw] += 1
    assert used.max() == 1 and hub_at + 4 * hw <= stride
    assert hub_at % 2 == 0 and stride % SECTOR_INTS == 0 and tree_at % 4 == 0
    end = hub_at + 4 * hw
    if end <= LINE_INTS:  # the smallest power of two that holds it: no record straddles lines
        assert LINE_INTS % stride == 0 and (stride == SECTOR_INTS or stride < 2 * end)
    else:
        assert stride % LINE_INTS == 0 and stride - end < LINE_INTS


@pytest.mark.parametrize("d", [1, 5])
def test_record_holds_every_label_of_an_index(d):
    edges = citation_dag(3000, seed=3)
    lab = gd.build_index(edges, labels=d, backend="cpu", progress=False).labels
    rec = label_record(np, lab)
    hw = lab.hub_down.shape[1]
    tree_at, hub_at, stride = record_layout(d, hw)
    assert rec.shape == (lab.level.shape[0], stride) and rec.dtype == np.int32
    np.testing.assert_array_equal(rec[:, tree_at:tree_at + 4], lab.tree)
    np.testing.assert_array_equal(rec[:, RECORD_LEVEL], lab.level)
    np.testing.assert_array_equal(rec[:, RECORD_LABELS:RECORD_LABELS + 2 * d:2], lab.inner)
    np.testing.assert_array_equal(rec[:, RECORD_LABELS + 1:RECORD_LABELS + 2 * d:2], lab.outer)
    hubs = np.ascontiguousarray(rec[:, hub_at:hub_at + 4 * hw]).view(np.uint64)
    np.testing.assert_array_equal(hubs[:, :hw], lab.hub_down)
    np.testing.assert_array_equal(hubs[:, hw:], lab.hub_up)
    assert lab.hub_down.any() and lab.hub_up.any()  # the hub fields were really compared


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["built", "loaded", "moved"])
def test_gpu_index_holds_its_labels_once_as_records(how, tmp_path):
    """A GPU index's labels (built, loaded or moved from the CPU) are views of one record
    matrix, the one its query kernels read, holding the CPU index's labels; the levels and
    the window hubs' arrays (read by the classification only) lie beside it, contiguous."""
    from grail_duckdb.kernels import gpu_available
    if not gpu_available():
        pytest.skip("no CUDA device visible to CuPy")
    import cupy as cp
    edges = citation_dag(3000, seed=3)
    cpu = gd.build_index(edges, labels=9, backend="cpu", progress=False)
    if how == "built":
        idx = gd.build_index(edges, labels=9, backend="gpu", progress=False)
    elif how == "loaded":
        cpu.save(tmp_path / "g.grail.parquet")
        idx = gd.load_index(tmp_path / "g.grail.parquet", backend="gpu")
    else:
        idx = cpu.to_backend("gpu")
    lab = idx.labels
    rec = lab.record
    assert rec is not None and idx.kernels._label_args(lab)[0] is rec
    lo, hi = rec.data.ptr, rec.data.ptr + rec.nbytes
    apart = ("level", "win_down", "win_up", "win_first")
    for name, a in lab.arrays().items():  # views of the record, not copies; the levels apart
        assert (lo <= a.data.ptr < hi) == (name not in apart), name
        assert name not in apart or a.flags.c_contiguous, name
    assert idx.kernels._label_args(lab)[1] is lab.level
    np.testing.assert_array_equal(cp.asnumpy(rec), label_record(np, cpu.labels))
    for name, a in lab.arrays().items():
        np.testing.assert_array_equal(cp.asnumpy(a), getattr(cpu.labels, name), err_msg=name)


@pytest.mark.gpu
def test_the_search_sets_whole_line_fetches_once_and_keeps_them():
    """The exact search runs with 128-byte L2 fetches, set at the process's first search on
    the device and kept (setting the limit costs more than a small search)."""
    from grail_duckdb.kernels import gpu_available
    if not gpu_available():
        pytest.skip("no CUDA device visible to CuPy")
    import cupy as cp
    from grail_duckdb.kernels import gpu_queries
    rt = cp.cuda.runtime
    idx = gd.build_index(citation_dag(3000, seed=3), backend="gpu", progress=False)
    _, stats = idx.reaches_with_stats(np.arange(3000), np.arange(3000)[::-1], budget=0)
    assert stats.deep_search > 0 and rt.deviceGetLimit(gpu_queries._L2_FETCH) == 128
    assert cp.cuda.Device().id in gpu_queries._FETCH_SET
    rt.deviceSetLimit(gpu_queries._L2_FETCH, 64)  # a later search does not set it again
    with gpu_queries.whole_line_fetches():
        assert rt.deviceGetLimit(gpu_queries._L2_FETCH) == 64
    rt.deviceSetLimit(gpu_queries._L2_FETCH, 128)
