"""The package's Numba kernels: compiled once per machine, interpreted for small work until then.

Every kernel of the package is declared with :func:`njit` (``numba.njit``'s options) and is a
:class:`Kernel`, a Numba dispatcher that differs from Numba's own in two ways:

* **One compiled version per kernel and argument shape.** A literal argument (a call site's
  ``True`` or ``0``) and a narrow signed integer (an int32 vertex id) are typed as their
  general type (bool, int64), so the call sites of a helper and its int32 and int64 callers
  share one compiled version instead of compiling it once each.
* **Small calls need no compiler.** Numba compiles a kernel on its first call (seconds each,
  tens of seconds for the set a build or a query needs on a 2-core machine) and caches it on
  disk for later processes. Until a kernel is compiled, in this process or in that cache, a
  call whose arrays have at most ``SMALL`` rows runs the kernel's Python source: the same
  code, in milliseconds for a few thousand elements. A kernel that has spent ``INTERPRET_S``
  seconds interpreted is compiled at its next call, and so is one whose Python source raised
  (the call is then undone and made compiled). ``GRAIL_DUCKDB_JIT=compile`` turns this
  off (every call compiled, as Numba does), ``=interpret`` interprets every call (tests).

While Numba compiles a kernel of the package, :data:`grail_duckdb.progress.COMPILING` says so:
progress lines of the work waiting for it stay still and leave that time out of their
estimates, and a line of its own (after 2 s, as all progress lines) tells what is compiled
and about how long is left. :func:`grail_duckdb.warm_up` compiles ahead, on every core.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import numpy as np
from numba.core import event, sigutils, types
from numba.core.dispatcher import Dispatcher
from numba.core.registry import CPUDispatcher

from . import progress

__all__ = ["Kernel", "njit", "mode", "forced", "interpreted", "on_compiled", "compile_lines",
           "cached_kernels", "uncached_kernels", "to_compile", "FAMILIES", "COMPILE_LINE"]

ENV_VAR = "GRAIL_DUCKDB_JIT"
#: calls whose arrays have at most this many rows are interpreted while the kernel is not
#: compiled (about a second at most for a build's kernel, against seconds to compile it)
SMALL = 1 << 15
#: seconds of interpreted calls after which a kernel is compiled anyway
INTERPRET_S = 1.0
MODES = ("auto", "compile", "interpret")
#: the kernels whose Python source raised where the compiled kernel answered (see Kernel)
FELL_BACK: set = set()
#: the text that starts the compile line
COMPILE_LINE = "grail_duckdb: compiling the CPU kernels"
_forced: str | None = None
_interpreted: frozenset = frozenset()  # modules whose kernels run their source (interpreted())
_local = threading.local()          # .inside: an interpreted kernel is running in this thread


def mode() -> str:
    """``auto``, ``compile`` or ``interpret``: :func:`forced`'s, else ``GRAIL_DUCKDB_JIT``'s."""
    if _forced is not None:
        return _forced
    value = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_VAR}={value!r}: use one of {', '.join(MODES)}")
    return value


@contextlib.contextmanager
def forced(how: str):
    """Every kernel call of the process compiled (``"compile"``) or interpreted
    (``"interpret"``) inside the block, whatever the environment says."""
    global _forced
    if how not in MODES:
        raise ValueError(f"forced({how!r}): use one of {', '.join(MODES)}")
    before, _forced = _forced, how
    try:
        yield
    finally:
        _forced = before


@contextlib.contextmanager
def interpreted(modules):
    """Inside the block, every kernel of ``modules`` (module names) runs its Python source,
    whatever the mode: a warm-up process leaves their compile to another."""
    global _interpreted
    before, _interpreted = _interpreted, frozenset(modules)
    try:
        yield
    finally:
        _interpreted = before


def _general(t, read_only: bool = False):
    """The type a kernel is compiled for when called with an argument of type ``t`` (of a
    parameter it only reads: ``read_only``)."""
    t = types.unliteral(t)
    if isinstance(t, types.Integer) and t.signed and t.bitwidth < 64:
        return types.int64
    if read_only and isinstance(t, types.Array) and t.mutable:
        return t.copy(readonly=True)
    return t


def _rows(args) -> int:
    """The longest array among ``args`` (its rows: a label array's few columns per vertex
    count once; 0 without arrays)."""
    return max((a.shape[0] for a in args if isinstance(a, np.ndarray) and a.ndim),
               default=0)


class Kernel(CPUDispatcher):
    """A Numba dispatcher with the package's typing and interpretation rules (module notes);
    ``read_only`` names the array parameters the kernel only reads (typed read-only, so
    that NumPy's writable arrays and Arrow's read-only ones share one compiled version)."""

    read_only: tuple = ()

    def compile(self, sig):
        args, ret = sigutils.normalize_signature(sig)
        if ret is None:
            names = self.py_func.__code__.co_varnames
            sig = tuple(_general(a, names[i] in self.read_only) for i, a in enumerate(args))
        return super().compile(sig)

    def __call__(self, *args, **kws):
        if getattr(self, "_settled", False) and _forced is None:
            return super().__call__(*args, **kws)
        if getattr(_local, "inside", False):        # called by an interpreted kernel
            return self.py_func(*args, **kws)
        if self._interpret(args):
            saved = [(a, a.copy()) for a in args if isinstance(a, np.ndarray) and a.flags.writeable]
            try:
                return self._run_python(args, kws)
            except Exception:
                # the source meant for the compiler may read past an array's end where the
                # compiled kernel reads a value it then ignores (no bounds checks): undo what
                # the call wrote, and leave it to the compiled kernel, from now on
                for a, before in saved:
                    a[...] = before
                self._settled = True
                FELL_BACK.add(self.py_func.__qualname__)
        return super().__call__(*args, **kws)

    def runs_compiled(self, args) -> bool:
        """Whether a call with ``args`` runs compiled (module notes): the tasks of one piece
        of work spread over threads (:mod:`grail_duckdb.kernels.cpu.cores`) all run alike."""
        if getattr(self, "_settled", False) and _forced is None:
            return True
        if getattr(_local, "inside", False):
            return False
        return not self._interpret(args)

    def _interpret(self, args) -> bool:
        """Whether this call runs the Python source (module notes)."""
        if self.py_func.__module__ in _interpreted:
            return True
        how = mode()
        if how != "auto":
            return how == "interpret"
        if self.targetoptions.get("inline") == "always":
            return True                             # a helper that exists to be inlined
        if self.overloads or self._on_disk():
            self._settled = True
            return False
        if _rows(args) <= SMALL and getattr(self, "_python_s", 0.0) < INTERPRET_S:
            return True
        self._settled = True
        return False

    def _on_disk(self) -> bool:
        """Whether Numba's on-disk cache holds a compiled version of this kernel."""
        cache_file = getattr(self._cache, "_cache_file", None)
        try:
            return bool(cache_file is not None and cache_file._load_index())
        except Exception:       # a cache layout this Numba does not have: treat as absent
            return False

    def _run_python(self, args, kws):
        _local.inside = True
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):     # unsigned arithmetic wraps, as compiled
                return self.py_func(*args, **kws)
        finally:
            _local.inside = False
            self._python_s = getattr(self, "_python_s", 0.0) + time.perf_counter() - t0


def njit(*args, read_only: tuple = (), **options):
    """``numba.njit`` for the package's kernels: ``@njit`` or ``@njit(cache=True, ...)``
    gives a :class:`Kernel`; ``read_only``: the names of the array parameters the kernel only
    reads."""
    def wrap(func):
        opts = dict(options)
        cache = opts.pop("cache", False)
        local_types = opts.pop("locals", {})
        opts["nopython"] = True
        opts.setdefault("boundscheck", None)
        kernel = Kernel(py_func=func, locals=local_types, targetoptions=opts)
        unknown = set(read_only) - set(func.__code__.co_varnames[:func.__code__.co_argcount])
        if unknown:
            raise TypeError(f"{func.__qualname__}: read_only names no parameter {unknown}")
        kernel.read_only = tuple(read_only)
        if cache:
            kernel.enable_caching()
        return kernel

    if args and callable(args[0]):
        return wrap(args[0])
    return wrap


def cached_kernels() -> list[Dispatcher]:
    """Every kernel of the package's imported modules that Numba caches on disk."""
    found = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("grail_duckdb.") or module is None:
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, Dispatcher) and hasattr(obj._cache, "_cache_file"):
                found[id(obj)] = obj
    return list(found.values())


def uncached_kernels() -> list[Dispatcher]:
    """The kernels without a fresh entry in the on-disk cache (Numba drops the entries of a
    source file that changed, and all of them when its own version changes)."""
    return [k for k in cached_kernels() if not k._on_disk()]


#: the kernels by the work that needs them: a compile of one kernel of a family is soon
#: followed by the others' (a build calls every kernel of its family)
FAMILIES = {
    "build": ("grail_duckdb.kernels.cpu.graph", "grail_duckdb.kernels.cpu.rows",
              "grail_duckdb.kernels.cpu.levels", "grail_duckdb.kernels.cpu.labels",
              "grail_duckdb.kernels.cpu.bounds", "grail_duckdb.kernels.cpu.hubs",
              "grail_duckdb.kernels.cpu.sweeps",
              "grail_duckdb.kernels.shared", "grail_duckdb.model"),
    "query": ("grail_duckdb.kernels.cpu.classify", "grail_duckdb.kernels.cpu.search",
              "grail_duckdb.kernels.cpu.bidir"),
    "append": ("grail_duckdb.kernels.cpu.append",),
    "paths": ("grail_duckdb.kernels.cpu.paths",),
    "file": ("grail_duckdb.kernels.cpu.pages", "grail_duckdb.indexfile.digest",
             "grail_duckdb.indexfile.page_headers", "grail_duckdb.indexfile.parts"),
}


def to_compile(modules, counted=None) -> int:
    """How many kernels of ``modules`` (module names) have no compiled version on disk yet
    (those of the modules imported so far; helpers that are only inlined do not count), of
    those for which ``counted(kernel)`` holds where it is given."""
    return sum(1 for k in uncached_kernels()
               if k.py_func.__module__ in modules and k.targetoptions.get("inline") != "always"
               and (counted is None or counted(k)))


class _CompileLine(progress.Progress):
    """The line shown while Numba compiles kernels of the package: how many are compiled, of
    about how many (the uncompiled kernels of each family met so far, see :data:`FAMILIES`),
    the elapsed time and the time left at this machine's rate so far; it ends once no compile
    has started for a moment."""

    IDLE = 0.5
    during_compiles = True

    def __init__(self):
        super().__init__(f"{COMPILE_LINE} (first use on this machine; Numba keeps them on disk "
                         "for later runs)", None, tick=True)
        self.compiled = 0
        self.expected = 0
        self.families: set = set()
        self.idle_since = None

    def count(self, kernel) -> None:
        """One more kernel compiled (a callee's compile counts too: it is a cache entry)."""
        family = next((name for name, modules in FAMILIES.items()
                       if kernel.py_func.__module__ in modules), None)
        if family is not None and family not in self.families:
            self.families.add(family)
            self.expected += to_compile(FAMILIES[family])
        self.compiled += 1

    def _text(self, elapsed, final):
        done = f"{self.compiled} kernel{'s' * (self.compiled != 1)}"
        if final or self.compiled >= self.expected:
            return f"{self.what}: {done}{'' if final else ' so far'}, {elapsed:.1f} s", None
        left = elapsed * (self.expected - self.compiled) / max(self.compiled, 1)
        eta = f", ~{left:.0f} s left" if self.compiled else ""
        return (f"{self.what}: {self.compiled}/~{self.expected} kernels, {elapsed:.1f} s{eta}",
                self.compiled / self.expected)

    def _tick(self, now):
        if self.idle_since is not None and now - self.idle_since > self.IDLE:
            _TRACKER.end_line(self)
            return
        super()._tick(now)


class _Tracker(event.Listener):
    """Follows Numba's compiles of the package's kernels (nested compiles of a kernel's
    callees count as part of it): :data:`progress.COMPILING` and the compile line."""

    def __init__(self):
        self._depth = threading.local()
        self._lock = threading.Lock()
        self.line: _CompileLine | None = None
        self.listeners: list = []
        self.show = True                # whether a compile opens its line

    def on_start(self, ev) -> None:
        """Runs inside every Numba compile of the process, ours or not: it must never raise."""
        try:
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            if depth or not isinstance((ev.data or {}).get("dispatcher"), Kernel):
                return
            progress.COMPILING.start()
            with self._lock:
                if self.line is None and self.show:
                    self.line = _CompileLine()
                if self.line is not None:
                    self.line.idle_since = None
        except Exception:
            return

    def on_end(self, ev) -> None:
        try:
            self._depth.n = depth = max(getattr(self._depth, "n", 1) - 1, 0)
            kernel = (ev.data or {}).get("dispatcher")
            if not isinstance(kernel, Kernel):
                return
            for listener in list(self.listeners):
                listener(kernel)
            with self._lock:
                if self.line is not None:
                    self.line.count(kernel)
            if depth:
                return
            progress.COMPILING.end()
            with self._lock:
                if self.line is not None:
                    self.line.idle_since = time.perf_counter()
        except Exception:
            return

    def end_line(self, line) -> None:
        with self._lock:
            if self.line is line:
                self.line = None
        line.close()


@contextlib.contextmanager
def on_compiled(callback):
    """Inside the block, ``callback(kernel)`` is called each time Numba has compiled a kernel
    of the package (the kernels a kernel calls each count: each is one entry of the cache)."""
    _TRACKER.listeners.append(callback)
    try:
        yield
    finally:
        _TRACKER.listeners.remove(callback)


@contextlib.contextmanager
def compile_lines(show: bool):
    """Whether a compile inside the block opens its own progress line (a caller that shows
    the compile's progress itself turns it off)."""
    before, _TRACKER.show = _TRACKER.show, show
    try:
        yield
    finally:
        _TRACKER.show = before


_TRACKER = _Tracker()
event.register("numba:compile", _TRACKER)
