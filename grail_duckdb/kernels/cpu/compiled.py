"""One line on stderr when Numba compiles the CPU kernels (instead of loading them from its cache).

The first use of the kernels after an install (or after an upgrade of Numba or of this package)
compiles them: about 9 s for all of them on a 2-core machine, against a fraction of a second to
load them from Numba's on-disk cache in every later process. Numba announces each real
compile (a cache miss) as a ``numba:compile`` event; the first one for a kernel of this package
prints :func:`notice` once per process, with an estimate from the kernels not yet cached.
:func:`grail_duckdb.warm_up` compiles them all ahead of any timed work.
"""
from __future__ import annotations

import sys
import threading

from numba.core import event
from numba.core.dispatcher import Dispatcher

from .. import shared
from . import digest, graph, hubs, labels, pages, rows, search, sweeps

__all__ = ["cached_kernels", "uncached_kernels", "notice"]

#: seconds Numba takes per kernel on a 2-core machine (all of them: ~9 s)
_SECONDS_PER_KERNEL = 0.4
_lock = threading.Lock()
_said = False


def cached_kernels() -> list[Dispatcher]:
    """Every Numba kernel of the CPU backend that is cached on disk (``cache=True``)."""
    found = {}
    for module in (digest, graph, hubs, labels, pages, rows, search, sweeps, shared):
        for obj in vars(module).values():
            if isinstance(obj, Dispatcher) and hasattr(obj._cache, "_cache_file"):
                found[id(obj)] = obj
    return list(found.values())


def uncached_kernels() -> list[Dispatcher]:
    """The kernels without a fresh entry in the on-disk cache (Numba drops the entries of a
    source file that changed, and all of them when its own version changes)."""
    try:
        return [k for k in cached_kernels() if not k._cache._cache_file._load_index()]
    except Exception:       # a cache layout this Numba does not have: no estimate
        return []


def notice() -> str:
    """The line printed at the first compile: how many kernels, about how long."""
    count = len(uncached_kernels())
    what = f"{count} CPU kernels" if count > 1 else "the CPU kernels"
    seconds = max(1, round(count * _SECONDS_PER_KERNEL))
    return (f"grail_duckdb: compiling {what} once for this install (~{seconds} s; Numba caches "
            "them on disk for later runs)...")


class _FirstCompile(event.Listener):
    """Prints :func:`notice` when Numba starts compiling a kernel of this package, once."""

    def on_start(self, ev) -> None:
        """Runs inside every Numba compile of the process, ours or not: it must never raise."""
        global _said
        try:
            func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            if _said or not str(getattr(func, "__module__", None) or "").startswith("grail_duckdb"):
                return
            with _lock:
                if _said:
                    return
                _said = True
            print(notice(), file=sys.stderr, flush=True)
        except Exception:
            return

    def on_end(self, ev) -> None:
        return None


event.register("numba:compile", _FirstCompile())
