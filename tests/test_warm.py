"""The first use after an install: small work runs without the compiler, larger work compiles
the kernels it needs once (a line on stderr says so), and ``warm_up()`` compiles them all
ahead of any timed work, on two processes (issue 11, item 11; issue 40, item 3). Each run is
a fresh process with its own, initially empty, Numba cache folder."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import ROOT, child_env

pytestmark = pytest.mark.slow


def _python(code: str, cache: Path, jit: str = "auto") -> subprocess.CompletedProcess:
    env = child_env(NUMBA_CACHE_DIR=str(cache), GRAIL_DUCKDB_BACKEND="cpu",
                    GRAIL_DUCKDB_JIT=jit, GRAIL_DUCKDB_PROGRESS="1")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("numba-cache")


NOTICE = "grail_duckdb: compiling the CPU kernels"
SMALL = "import grail_duckdb as gd; print(gd.build_index([1, 2], [2, 3]).reaches(1, 3))"
#: a graph above jit.SMALL elements: its build compiles the build's kernels
LARGE = ("import numpy as np, grail_duckdb as gd; n = 60_000; s = np.arange(1, n);"
         "i = gd.build_index(s, s - 1); print(i.reaches(n - 1, 0), i.reaches(0, n - 1))")


def test_small_work_compiles_nothing_larger_work_compiles_once(cache):
    first = _python(SMALL, cache)
    assert first.stdout.strip() == "True"
    assert NOTICE not in first.stderr, first.stderr           # the kernels' Python source ran
    large = _python(LARGE, cache)
    assert large.stdout.split() == ["True", "False"]
    assert NOTICE in large.stderr and "kernels" in large.stderr, large.stderr
    again = _python(LARGE, cache)                              # loaded from the disk cache
    assert again.stdout.split() == ["True", "False"] and NOTICE not in again.stderr


WORKLOADS = """
import grail_duckdb as gd
from grail_duckdb.jit import cached_kernels
from benchmarks import workloads
from grail_duckdb.tools import generators
kernels = cached_kernels()  # every package module's: the model's key lookup too
gd.warm_up(workers=WORKERS)
before = {k.py_func.__name__: len(k.signatures) for k in kernels}
graphs = [generators.citation_dag(3000, seed=1), generators.rmat(11, seed=2),
          generators.random_dag(2000, 4, seed=3)]
for edges in graphs:
    for keys in (edges, edges.set_column(0, "src", edges["src"].cast("string"))
                             .set_column(1, "dst", edges["dst"].cast("string"))):
        idx = gd.build_index(keys)
        for pairs in (workloads.random_pairs(workloads.vertex_keys(keys), 3000),
                      workloads.reachable_pairs(keys, 3000)):
            idx.reaches(pairs["src"], pairs["dst"])
after = {k.py_func.__name__: len(k.signatures) for k in kernels}
assert sum(after.values()) > 15, after           # the kernels were used (loaded or compiled)
assert after == before, {k: (before[k], after[k]) for k in after if after[k] != before[k]}
print("ok")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_warm_up_compiles_everything_later_work_needs(tmp_path, workers):
    """Later work (every call compiled: GRAIL_DUCKDB_JIT=compile) adds no compiled version,
    whether the warm-up compiled in this process alone or in two."""
    r = _python(WORKLOADS.replace("WORKERS", str(workers)), tmp_path, jit="compile")
    assert r.stdout.strip() == "ok"
    assert NOTICE in r.stderr and "kernels" in r.stderr
    assert ("on 2 cores" in r.stderr) == (workers == 2), r.stderr


def test_the_compile_line_ignores_other_code_and_never_raises():
    from numba import njit
    from numba.core import event

    from grail_duckdb import jit, progress

    @njit
    def users_own(x):
        return x + 1

    assert users_own(1) == 2                               # compiled: not ours, nothing shown
    assert jit._TRACKER.line is None and not progress.COMPILING.active
    jit._TRACKER.on_start(event.Event("numba:compile", event.EventStatus.START, data=None))
    jit._TRACKER.on_end(event.Event("numba:compile", event.EventStatus.END, data=None))
    assert jit._TRACKER.line is None and not progress.COMPILING.active


DEMO = """
import grail_duckdb as gd
from grail_duckdb import jit
from grail_duckdb.engine import warm
from grail_duckdb.tools import cli
expected = warm.to_compile(cli.DEMO_PARTS)
compiled = []
with jit.on_compiled(lambda kernel: compiled.append(kernel) if warm._counted(kernel) else None):
    gd.warm_up(parts=cli.DEMO_PARTS, workers=1)      # every compile seen here
late = []
with jit.on_compiled(lambda kernel: late.append(kernel.py_func.__qualname__)):
    assert cli.main(["demo", "--cte-budget", "0.1"]) == 0
print("late", late)
print("estimate", expected, len({id(k) for k in compiled}))
"""


def test_the_demos_warm_up_compiles_what_the_demo_needs_and_no_more(tmp_path):
    """The demo's parts (its citation graph's build and the queries) leave no kernel for the
    demo to compile, and the count the compile line shows is the count compiled."""
    r = _python(DEMO, tmp_path)
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines()
                 if line.startswith(("late", "estimate")))
    assert lines["late"] == "[]", r.stdout
    expected, compiled = map(int, lines["estimate"].split())
    assert compiled <= expected <= compiled + 2, (expected, compiled)


def test_every_kernel_a_part_leaves_elsewhere_exists():
    import importlib

    from grail_duckdb.engine import warm
    from grail_duckdb.jit import Kernel

    for name in (*warm._LEVELWISE, *(n for names in warm._ELSEWHERE.values() for n in names)):
        module, kernel = name.rsplit(".", 1)
        assert isinstance(getattr(importlib.import_module(module), kernel), Kernel), name
