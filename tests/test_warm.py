"""The first use after an install compiles the CPU kernels: said once on stderr, and
``warm_up()`` does it ahead of any timed work (issue 11, item 11). Each run is a fresh process
with its own, initially empty, Numba cache folder."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import ROOT, child_env



pytestmark = pytest.mark.slow


def _python(code: str, cache: Path) -> subprocess.CompletedProcess:
    env = child_env(NUMBA_CACHE_DIR=str(cache), GRAIL_DUCKDB_BACKEND="cpu")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("numba-cache")


NOTICE = "grail_duckdb: compiling"


def test_first_build_says_it_compiles_once_then_never_again(cache):
    code = "import grail_duckdb as gd; print(gd.build_index([1, 2], [2, 3]).reaches(1, 3))"
    first = _python(code, cache)
    assert first.stdout.strip() == "True"
    assert first.stderr.count(NOTICE) == 1, first.stderr
    assert "CPU kernels once for this install (~" in first.stderr
    second = _python(code, cache)
    assert NOTICE not in second.stderr and second.stdout.strip() == "True"
    searched = ("import grail_duckdb as gd; i = gd.build_index([1, 2, 3, 4], [2, 3, 4, 5]);"
                "print(i.reaches_with_stats([1, 2], [5, 5], use_cuts=False)[1].searched)")
    third = _python(searched, cache)                    # the search kernels were not needed yet
    assert third.stdout.strip() == "2" and third.stderr.count(NOTICE) == 1, third.stderr
    assert NOTICE not in _python(searched, cache).stderr


WORKLOADS = """
import grail_duckdb as gd
from grail_duckdb.kernels.cpu.compiled import cached_kernels
from benchmarks import workloads
from grail_duckdb.tools import generators
kernels = cached_kernels()  # every package module's: the model's key lookup too
gd.warm_up()
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


def test_warm_up_compiles_everything_later_work_needs(cache):
    assert _python(WORKLOADS, cache).stdout.strip() == "ok"


def test_the_notice_ignores_other_code_and_never_raises(capsys, monkeypatch):
    from numba import njit
    from numba.core import event

    from grail_duckdb.kernels.cpu import compiled

    monkeypatch.setattr(compiled, "_said", False)

    @njit
    def users_own(x):
        return x + 1

    assert users_own(1) == 2                               # compiled: not ours, nothing said
    listener = compiled._FirstCompile()
    listener.on_start(event.Event("numba:compile", event.EventStatus.START, data=None))
    assert "grail_duckdb: compiling" not in capsys.readouterr().err and not compiled._said
