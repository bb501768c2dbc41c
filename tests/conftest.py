"""Shared test fixtures: the backends every conformance test runs on, the datasets folder, and
the hypothesis settings. The BFS oracle lives in ``tests/oracle.py`` (``from oracle import
bfs_reachable``); it is re-exported here for files that prefer ``from conftest import ...``.

Every test runs the compiled kernels (``GRAIL_DUCKDB_JIT=compile``; tests/test_jit.py compares
the interpreted ones with them). ``backend`` yields the kernels of every backend present: the
CPU (Numba) kernels, and where CuPy sees a GPU, the default GPU kernels and GPU kernels with
other :class:`GpuSettings`
(degree-binned or edge-balanced load balance everywhere; one block per SM with two search
words). The GPU cases carry ``pytest.mark.gpu`` (``pytest -m gpu`` runs them alone) and skip
without a device. Each GPU configuration answers every call on the device
(``host_below=0``): tests of the small-call host copy use other settings themselves.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/, beside the package
# the tests check the compiled kernels (tests/test_jit.py checks the interpreted ones apart)
os.environ.setdefault("GRAIL_DUCKDB_JIT", "compile")

from benchmarks.datasets import datasets_dir as _datasets_dir  # noqa: E402
from grail_duckdb.kernels import gpu_available, kernels_for  # noqa: E402
from oracle import bfs_pairs, bfs_reachable  # noqa: F401  (re-exported)

def pytest_configure(config):
    """With several workers (pytest-xdist), the parent compiles the kernels into Numba's
    on-disk cache first (``warm_up``, its own two processes): each worker would otherwise
    compile every kernel it meets itself, on a cold cache twice the work. A warm cache loads
    them in a few seconds."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", 0):
        return
    if config.option.collectonly:
        return
    from grail_duckdb import warm_up

    warm_up(backend="cpu")


settings.register_profile(
    "grail", deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large])
settings.load_profile("grail")

#: GpuSettings keyword arguments of each GPU configuration under test ({}: the defaults; every
#: one answers small calls on the device too, ``host_below=0``); the tiny search rounds hand pairs on from round
#: to round, down to the dense last one, on every group size of kernels/bidir.cu (in one, the
#: pairs that the last round hands on go to the grid-wide bitmask search); one search
#: reads every edge's record (no levels beside the edges), one tests the edges the level cut
#: leaves where they lie (no packing); tiny rounds of the pair search hand pairs on from
#: round to round, on every group size of kernels/paths.cu, and the last round's to the CPU
#: twin; one sends hops' and paths' open pairs to the pair search unsettled, as the CPU does
GPU_CONFIGS = {
    "gpu": {},
    "gpu-binned": {"balance": "binned", "search_balance": "binned",
                   "bidir_rounds": ((1, 32), (2, 64), (4, 128)), "fill_first_round": False,
                   "wide_search": (128, 1 << 20), "pack_survivors": False, "path_rounds": ((1, 4), (2, 6), (4, 9))},
    "gpu-edges": {"balance": "edges", "search_balance": "edges",
                  "bidir_rounds": ((4, 32), (8, 64)), "fill_first_round": False,
                  "edge_levels": False, "path_rounds": ((8, 5),), "paths_settle_first": False},
    "gpu-small-grid": {"blocks_per_sm": 1, "narrow_blocks_per_sm": None, "force_words": 2},
}

_GPU_MARKS = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")]
BACKENDS = [pytest.param("cpu", id="cpu")] + [
    pytest.param(name, id=name, marks=_GPU_MARKS) for name in GPU_CONFIGS]


@functools.lru_cache(maxsize=None)
def kernels_named(name: str):
    """The kernels of one configuration of :data:`BACKENDS` (one instance per process)."""
    if name == "cpu":
        return kernels_for(name)
    from grail_duckdb.kernels.gpu import GpuKernels, GpuSettings  # CuPy: only with a GPU

    return GpuKernels(GpuSettings(**{"host_below": 0, **GPU_CONFIGS[name]}))


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request):
    """The kernels of each backend present (see the module docstring)."""
    return kernels_named(request.param)


@pytest.fixture(scope="session")
def cpu():
    """The CPU kernels: the reference every GPU configuration must equal bit for bit."""
    return kernels_for("cpu")


@pytest.fixture(scope="session")
def datasets_dir():
    """The shared datasets folder (``pathlib.Path``); the test is skipped when it is absent."""
    root = _datasets_dir()
    if root is None:
        pytest.skip("the datasets folder (../shared/datasets or $GRAIL_DUCKDB_DATASETS) is absent")
    return root
