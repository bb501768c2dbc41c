"""Whether Numba's on-disk cache holds the CPU kernels, and one line on stderr when it does not.

The first use of the CPU kernels after an install compiles every Numba twin (about 6 s on a
2-core machine); later processes load them from the cache in a fraction of a second. The
compile is announced once per process, before it starts, so that the wait is explained;
:func:`grail_duckdb.warm_up` does it ahead of any timed work.
"""
from __future__ import annotations

import sys
import threading

from numba.core.dispatcher import Dispatcher

from .. import shared
from . import graph, labels, search

__all__ = ["cache_is_warm", "cached_kernels", "notice_if_cold", "NOTICE"]

NOTICE = ("grail_duckdb: compiling the CPU kernels once for this install (~6 s; Numba caches "
          "them on disk for later runs)...")
_said = threading.Event()


def cached_kernels() -> list[Dispatcher]:
    """Every Numba kernel of the CPU backend that is cached on disk (``cache=True``)."""
    found = {}
    for module in (graph, labels, search, shared):
        for obj in vars(module).values():
            if isinstance(obj, Dispatcher) and hasattr(obj._cache, "_cache_file"):
                found[id(obj)] = obj
    return list(found.values())


def cache_is_warm() -> bool:
    """True when the on-disk cache holds a fresh entry for some kernel: this install has
    compiled before (Numba drops the entries of a source file that changed, and all of them
    when its version changes). Kernels a first run did not need compile later, silently: each
    takes a second or less, the whole set several."""
    try:
        return any(k._cache._cache_file._load_index() for k in cached_kernels())
    except Exception:       # a cache layout this Numba does not have: nothing to announce
        return True


def notice_if_cold(stream=None) -> bool:
    """Print :data:`NOTICE` (once per process) when the kernels are about to be compiled;
    returns whether it was printed now."""
    if _said.is_set() or cache_is_warm():
        return False
    _said.set()
    print(NOTICE, file=stream if stream is not None else sys.stderr, flush=True)
    return True
