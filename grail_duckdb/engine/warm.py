"""``warm_up()``: compile (or load from Numba's on-disk cache) every kernel before timed work.

The first use of the CPU kernels on a machine compiles them (see :mod:`grail_duckdb.jit`):
tens of seconds for all of them on one core; later processes load them from Numba's cache
in a second or two. Either cost lands in whatever call comes first, so a benchmark or a
demo that times its first query would time the compiler: they call ``warm_up()`` first. It
builds and queries small graphs that reach every kernel, with every argument type the
pipeline uses (dense, sparse and text keys; cycles; searched queries; an append of new
vertices).

A compile is spread over two cores: the kernels fall into :data:`PARTS` (the build's, the
queries', ...), and the build's and the queries' are compiled by a process each
into Numba's on-disk cache (a process that needs an index for its part builds it with the
kernels' Python source, which takes no compiler); this process then loads them all. A line
on stderr says what is compiled, how many kernels are done and about how long is left.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import jit, progress
from ..indexfile.digest import hash_bytes
from ..kernels import CpuKernels, CpuSettings, resolve
from ..kernels.cpu import FEW_CORES
from ..kernels.cpu.cores import cores
from .build import build_index

__all__ = ["warm_up", "PARTS"]

#: the kernels' parts: the build's; the build's for graphs shaped as the demo's citations
#: (a subset of the build's: see :func:`_graphs`); the queries' (the cuts, the bounded and the
#: exact search); the plain bitmask search of ``use_cuts=False``; an append's (it queries too);
#: the index file's digest
PARTS = ("build", "citations", "query", "baseline", "append", "save")
#: the parts one process compiles (the first group in this process, the other in a child):
#: the two take about as long, and few kernels are compiled by both
_GROUPS = (("build", "citations", "save"), ("query", "baseline", "append"))
#: the build's kernels that a second process compiles while the first compiles the rest of
#: the build's (the build's kernels are most of the compile: this evens the two out)
_BUILD_SPLIT = ("grail_duckdb.kernels.cpu.graph", "grail_duckdb.kernels.cpu.levels")
#: the kernel each part compiles first (whether it is in Numba's cache tells the part's)
_FIRST = {"build": "grail_duckdb.kernels.cpu.rows._count_pairs",
          "citations": "grail_duckdb.kernels.cpu.rows._count_reversed",
          "query": "grail_duckdb.kernels.cpu.classify.answer_range",
          "baseline": "grail_duckdb.kernels.cpu.search.bitmask_search",
          "append": "grail_duckdb.kernels.cpu.append.append_fold",
          "save": "grail_duckdb.indexfile.digest.hash_words"}
_CPU = "grail_duckdb.kernels.cpu."
#: the kernels of a part's modules that its work leaves to other parts (:func:`to_compile`
#: does not count them): the plain search's; for the citations, those of other graphs' builds
#: (cycles, edges out of source order, ids out of citation order, hub rows of other widths)
#: and an append's
_ELSEWHERE = {
    "query": tuple(_CPU + k for k in ("search.bitmask_search", "search._ctz")),
    "citations": tuple(_CPU + k for k in (
        "graph.trim", "graph.reach_within_colour", "graph.propagate_max_colour",
        "graph.rank_by_first_occurrence", "graph.component_pairs", "rows._count_pairs",
        "rows._place_pairs", "rows._bucket_rows", "rows._kept_rows", "rows._gather_rows",
        "labels._count_parents", "labels._queue_roots", "labels._kahn", "labels._kahn_levels",
        "hubs._sides_apart", "hubs._window_side", "hubs._window_sweep")) + (
        "grail_duckdb.model.table_moved_task",)}
#: the build's level-by-level sweeps: a build runs them on ``CpuSettings.level_threads``
#: cores or more
_LEVELWISE = tuple(_CPU + k for k in ("labels._subtree_levels", "labels._starts_levels",
                                      "bounds._bounds_range", "bounds._bounds_levels",
                                      "hubs._both_levels"))
#: the modules of each part's kernels (:func:`to_compile` counts the kernels to compile)
_MODULES = {"build": jit.FAMILIES["build"], "citations": jit.FAMILIES["build"],
            "query": jit.FAMILIES["query"],
            "baseline": ("grail_duckdb.kernels.cpu.search",),
            "append": jit.FAMILIES["append"], "save": ("grail_duckdb.indexfile.digest",)}


def _graphs(holes: bool = False, general: bool = True):
    """Small edge lists that exercise every kernel: two cycles (trim, forward-backward,
    colour propagation), a deep DAG part (levels, search), a deeper one (hubs and window
    hubs), keys dense (a whole range; with ``holes``, also keys with holes), sparse and text.
    Not ``general``: only graphs shaped as the demo's citations (integer keys, edges grouped
    by source, ids in citation order, no cycle), whose builds take the fewest kernels."""
    rng = np.random.default_rng(7)
    n = 400
    cycles = ([5, 6, 7, 50, 51], [6, 7, 5, 51, 50])      # two components for the colour pass
    src = np.r_[np.arange(n - 1), rng.integers(0, n, 200), cycles[0]]
    dst = np.r_[np.arange(1, n), rng.integers(0, n, 200), cycles[1]]
    keep = src < dst
    if general:
        keep[-5:] = True                                 # the cycles; the rest forward (a DAG)
    src, dst = src[keep], dst[keep]
    if not general:
        by_source = np.argsort(src, kind="stable")
        src, dst = src[by_source], dst[by_source]
    yield src, dst
    if general:
        yield src * 1_000_003, dst * 1_000_003         # sparse keys
    if holes or not general:  # dense keys with holes: a key table (an append may write anew)
        yield src * 2, dst * 2
    # a dense, deep DAG: every vertex cites 6 earlier ones, so random pairs outgrow the bounded
    # search and reach the exact (bidirectional) one
    later = np.repeat(np.arange(1, 3000), 6)
    yield later, (rng.random(later.shape[0]) * later).astype(np.int64)
    # a chain with a chord out of every vertex: deep enough for window hubs (a build makes
    # hubs only where they can settle pairs), its edges grouped by source, ids in order
    chain = np.repeat(np.arange(1, 800), 2)
    cited = chain - 1
    cited[1::2] = (rng.random(cited.shape[0] // 2) * chain[1::2]).astype(np.int64)
    yield chain, cited
    if general:
        yield pa.array([f"v{i}" for i in src]), pa.array([f"v{i}" for i in dst])


def warm_up(backend=None, *, parts=PARTS, workers: int | None = None) -> float:
    """Compile or load every kernel of the CPU backend (and of the GPU backend when
    ``backend`` resolves to it) now, so that no later call pays for it; returns the seconds
    spent. ``parts``: the kernels of these parts of :data:`PARTS` only.

    Kernels not yet in Numba's on-disk cache are compiled by up to ``workers`` processes at
    once (default: one per core; two at most), with a line on stderr while it takes more
    than 2 s.

    >>> seconds = warm_up("cpu")        # a no-op in effect once the kernels are loaded
    >>> seconds >= 0
    True
    """
    t0 = time.perf_counter()
    parts = tuple(parts)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"warm_up(parts=...): no part {sorted(unknown)}; the parts: {PARTS}")
    needed = _uncompiled(parts)
    if needed:
        groups = _groups(needed, workers or os.cpu_count() or 1)
        with CompileProgress(to_compile(needed), len(groups)) as line, \
                jit.compile_lines(False):
            _compile_parts(groups, line)
    with progress.silenced(), jit.forced("compile"):
        _exercise(parts, "cpu")
        if resolve(backend) == "gpu":
            _exercise(parts, "gpu")
    return time.perf_counter() - t0


def _groups(needed, workers: int) -> list:
    """``[(parts, left out)]``: what each process of the compile exercises, and the modules
    whose kernels it leaves to the other (runs interpreted); the first is this process."""
    if workers < 2:
        return [(needed, ())]
    groups = [g for g in (tuple(p for p in group if p in needed) for group in _GROUPS) if g]
    build = next((p for p in ("build", "citations") if p in needed), None)
    if build is None:
        return [(g, ()) for g in groups] if len(groups) > 1 else [(needed, ())]
    rest = tuple(m for m in jit.FAMILIES["build"] if m not in _BUILD_SPLIT)
    second = (groups[1] if len(groups) > 1 else ()) + (build,)
    return [(groups[0], _BUILD_SPLIT), (second, rest)]


def to_compile(parts=PARTS) -> int:
    """About how many kernels of ``parts`` are to be compiled (0: the warm-up only loads
    them from Numba's on-disk cache)."""
    needed = _uncompiled(parts)
    if not needed:
        return 0
    return jit.to_compile({m for p in needed for m in _MODULES[p]}, lambda k: any(
        k.py_func.__module__ in _MODULES[p] and _name(k) not in _elsewhere(p) for p in needed))


def _name(kernel) -> str:
    return f"{kernel.py_func.__module__}.{kernel.py_func.__qualname__}"


def _elsewhere(part: str) -> tuple:
    """The kernels of ``part``'s modules that its work never calls on this machine."""
    if part == "citations" and cores() < CpuSettings.level_threads:
        return _ELSEWHERE[part] + _LEVELWISE
    if part == "query" and cores() <= FEW_CORES:  # (the package's threads spread batches)
        return _ELSEWHERE[part] + (_CPU + "classify.answer_parallel",)
    return _ELSEWHERE.get(part, ())


def _uncompiled(parts) -> tuple:
    """The parts whose kernels are not in Numba's on-disk cache (a part's kernels are
    compiled together: its first kernel tells)."""
    def on_disk(name: str) -> bool:
        module, kernel = name.rsplit(".", 1)
        return getattr(importlib.import_module(module), kernel)._on_disk()
    return tuple(p for p in parts if not on_disk(_FIRST[p]))


class CompileProgress(progress.Progress):
    """The warm-up's line: ``grail_duckdb: compiling the CPU kernels on 2 cores (...): 12/40
    kernels, 9.1 s, ~14 s left``; the estimate is this machine's rate so far."""

    during_compiles = True

    def __init__(self, total: int, processes: int, **kw):
        where = f" on {processes} cores" if processes > 1 else ""
        super().__init__(f"{jit.COMPILE_LINE}{where} (first use on this machine; Numba keeps "
                         "them on disk for later runs)", total, unit="kernels", tick=True, **kw)
        self._count_lock = threading.Lock()

    def add(self, count: int = 1) -> None:
        """``count`` more kernels compiled (by any process of the warm-up)."""
        with self._count_lock:
            done = min(self.done + count, self.total - 1)   # the count is an estimate
        self.update(done)

    def left(self, elapsed: float) -> float | None:
        if not 0 < self.done < self.total:
            return None
        return elapsed * (self.total - self.done) / self.done


def _compile_parts(groups, line: CompileProgress) -> None:
    """Compile each group of parts in its own process (the first in this one), into Numba's
    on-disk cache (:func:`_groups`); a child that fails leaves its kernels to be compiled
    here afterwards."""
    children = [_start_child(*group) for group in groups[1:]]
    readers = [threading.Thread(target=_follow, args=(c, line), daemon=True) for c in children]
    for r in readers:
        r.start()
    with jit.on_compiled(lambda kernel: line.add() if _counted(kernel) else None), \
            jit.interpreted(groups[0][1]):
        _exercise(groups[0][0], "cpu", quiet=True)
    for child, reader in zip(children, readers):
        child.wait()
        reader.join()


def _start_child(parts, left_out=()) -> subprocess.Popen:
    """A Python process that compiles ``parts`` but the kernels of ``left_out`` (see
    :func:`_child`)."""
    env = dict(os.environ, GRAIL_DUCKDB_BACKEND="cpu", GRAIL_DUCKDB_PROGRESS="0")
    root = str(Path(__file__).resolve().parents[2])       # this copy of the package first
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    code = (f"from grail_duckdb.engine.warm import _child; "
            f"_child({list(parts)!r}, {list(left_out)!r})")
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)


def _counted(kernel) -> bool:
    """Whether a compiled kernel is one that :func:`to_compile` counts."""
    return any(kernel.py_func.__module__ in modules for modules in _MODULES.values())


def _follow(child: subprocess.Popen, line: CompileProgress) -> None:
    """Count the kernels a child reports compiled."""
    for text in child.stdout:
        if text.startswith("compiled"):
            line.add()


def _child(parts, left_out=()) -> None:
    """A warm-up process: compile the kernels of ``parts`` but those of the modules
    ``left_out``, one line on stdout per kernel."""
    def report(kernel) -> None:
        if _counted(kernel):
            print("compiled", kernel.py_func.__qualname__, flush=True)

    with jit.on_compiled(report), jit.interpreted(left_out):
        _exercise(tuple(parts), "cpu", quiet=True)


def _exercise(parts, backend: str, quiet: bool = False) -> None:
    """Run the work that needs the kernels of ``parts`` on ``backend``, compiling them (an
    index that a part needs but does not build is built with the kernels' Python source)."""
    build = bool({"build", "citations"} & set(parts))
    general = "build" in parts or "citations" not in parts
    with (progress.silenced() if quiet else contextlib.nullcontext()), jit.forced("compile"):
        if "save" in parts:
            hash_bytes(bytes(64))                       # the index file's digest
        if not {"build", "citations", "query", "baseline", "append"} & set(parts):
            return
        rng = np.random.default_rng(11)
        if build and backend == "cpu" and (general or cores() >= CpuSettings.level_threads):
            # the sweeps that share each level among the cores (on machines whose builds run
            # them, for the citations), which a small graph would not take
            build_index(*next(_graphs(general=general)), progress=False,
                        backend=CpuKernels(settings=CpuSettings(
                            level_work=0, level_threads=2, prefetch_degree=0)))
        for src, dst in _graphs(holes="append" in parts, general=general):
            with contextlib.nullcontext() if build else jit.forced("interpret"):
                idx = build_index(src, dst, backend=backend, progress=False)
            keys = idx.ids.keys
            pick = rng.integers(0, len(keys), (2, 20_000))  # > one serial batch: the parallel pass
            qs, qd = keys.take(pa.array(pick[0])), keys.take(pa.array(pick[1]))
            if "query" in parts:
                idx.reaches(qs, qd)
                idx.reaches(keys[0].as_py(), keys[1].as_py())
                idx.descendants(keys[0].as_py())        # a one-to-all set
            if "baseline" in parts:
                idx.reaches_with_stats(qs, qd, use_cuts=False)
                idx.reaches_with_stats(qs, qd, words=4)
            if "append" in parts:  # an append's fold and growth
                cited = keys.take(pa.array(rng.integers(0, len(keys), _APPENDED)))
                idx.append(_new_keys(keys, _APPENDED), cited)


#: the edges of the warm-up's appends: past 2,048, where CuPy's reductions of a batch's arrays
#: take the kernels of large arrays (compiled at first use, else by a user's first append)
_APPENDED = 4_096


def _new_keys(keys: pa.Array, count: int) -> pa.Array:
    """``count`` keys of the type of ``keys`` that are none of them (integers: past the
    largest, and one between two held ones where there is room: a key table written anew)."""
    if pa.types.is_integer(keys.type):
        held = np.sort(keys.to_numpy())
        top = int(held[-1])
        new = np.arange(top + 1, top + count, dtype=np.int64)
        gaps = np.flatnonzero(np.diff(held) > 1)
        inside = held[gaps[:1]] + 1 if gaps.shape[0] else np.array([top + count], np.int64)
        return pa.array(np.sort(np.r_[inside, new]), pa.int64())
    return pa.array([f"~new{i}" for i in range(count)], pa.large_string())
