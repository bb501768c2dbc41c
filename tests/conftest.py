"""Shared test fixtures. The BFS oracle lives in ``tests/oracle.py`` (``from oracle import
bfs_reachable``); it is re-exported here for files that prefer ``from conftest import ...``."""
from __future__ import annotations

import pytest

from grail_duckdb.tools.datasets import datasets_dir as _datasets_dir
from oracle import bfs_pairs, bfs_reachable  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def datasets_dir():
    """The shared datasets folder (``pathlib.Path``); the test is skipped when it is absent."""
    root = _datasets_dir()
    if root is None:
        pytest.skip("the datasets folder (../shared/datasets or $GRAIL_DUCKDB_DATASETS) is absent")
    return root
