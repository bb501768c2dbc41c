"""The package's kernels in Numba's cache are stamped with every kernel source: a kernel that
inlines a helper from another file is compiled again when only the helper changes (a cached
kernel with the old helper inlined once answered a query of an appended index wrongly)."""
from __future__ import annotations

import numpy as np

from grail_duckdb import _numba_cache
from grail_duckdb.model import lookup_dense, lookup_dense_task


def test_the_hash_sees_any_kernel_source_and_only_them(tmp_path):
    (tmp_path / "a.py").write_text("from numba import njit\n@njit\ndef f(x):\n    return x\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    before = _numba_cache.sources_hash(tmp_path)
    (tmp_path / "b.py").write_text("x = 2\n")
    assert _numba_cache.sources_hash(tmp_path) == before  # no kernel in it
    (tmp_path / "a.py").write_text("from numba import njit\n@njit\ndef f(x):\n    return x + 1\n")
    assert _numba_cache.sources_hash(tmp_path) != before


def test_a_package_kernel_is_stamped_with_every_source():
    lookup_dense(np.arange(2), 0, np.arange(2, dtype=np.int32))
    locator = lookup_dense_task._cache._impl.locator
    assert type(locator) in _numba_cache.LOCATORS
    assert locator.get_source_stamp()[1] == _numba_cache.sources_hash()


def test_code_that_numba_inlines_counts_as_a_kernel_source(tmp_path):
    """An intrinsic or an overload (the build's atomics, the key checks) is compiled into the
    kernels that call it: a change to one makes them stale too."""
    for name, text in (("c.py", "from numba.extending import intrinsic\n@intrinsic\ndef g(t):\n"
                                "    return None\n"),
                       ("d.py", "from numba.extending import overload\n@overload(len)\n"
                                "def h(x):\n    return None\n")):
        before = _numba_cache.sources_hash(tmp_path)
        (tmp_path / name).write_text(text)
        assert _numba_cache.sources_hash(tmp_path) != before
        (tmp_path / name).write_text(text + "# changed\n")
        assert _numba_cache.sources_hash(tmp_path) != before
