"""The package's Numba kernels (issue 40, item 3): interpreted for small work until compiled,
with the compiled kernels' answers bit for bit; one compiled version per kernel and argument
shape; progress lines that stay still while the compiler runs."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grail_duckdb as gd
from grail_duckdb import jit, progress
from harness import all_pairs, assert_same_index, expected
from strategies import ADVERSARIAL, KEY_KINDS, Graph, adversarial, graphs, keys_of


def _index(g: Graph, how: str, kind="int", **kw):
    with jit.forced(how):
        return gd.build_index(keys_of(g.src, kind), keys_of(g.dst, kind), backend="cpu",
                              progress=False, **kw)


def _answers(idx, qs, qd, how: str, **kw):
    with jit.forced(how):
        got, stats = idx.reaches_with_stats(qs, qd, **kw)
    return got.to_numpy(zero_copy_only=False), stats


def _same_as_compiled(g: Graph, qs, qd, kind="int", plain=True, **kw):
    """The interpreted build and queries (with the cuts; ``plain``: without them too) equal the
    compiled ones and the oracle, and no kernel fell back to its compiled version (but where
    the graph has no vertex: the query kernel reads a label it then ignores, past the end of
    the empty arrays)."""
    jit.FELL_BACK.clear()
    slow, fast = _index(g, "interpret", kind, **kw), _index(g, "compile", kind, **kw)
    assert_same_index(fast, slow)
    want = expected(g, qs, qd)
    keys = keys_of(qs, kind), keys_of(qd, kind)
    for cuts in (True, False) if plain else (True,):
        got, stats = _answers(slow, *keys, "interpret", use_cuts=cuts)
        np.testing.assert_array_equal(got, want, err_msg=f"use_cuts={cuts}")
        assert stats == _answers(fast, *keys, "compile", use_cuts=cuts)[1]
    assert jit.FELL_BACK <= ({"answer_range", "answer_parallel"} if g.m == 0 else set())


@settings(max_examples=60)
@given(g=graphs(), d=st.integers(1, 6), seed=st.integers(0, 2**31 - 1),
       kind=st.sampled_from(KEY_KINDS))
def test_interpreted_kernels_build_and_answer_as_compiled(g, d, seed, kind):
    _same_as_compiled(g, *all_pairs(g.n), kind, labels=d, seed=seed)


@pytest.mark.parametrize("graph", [
    pytest.param(name, marks=pytest.mark.slow) if name == "cut-defeating" else name
    for name in ADVERSARIAL if not name.startswith("rmat")])
def test_interpreted_kernels_on_the_adversarial_graphs(graph):
    g = adversarial(graph)
    rng = np.random.default_rng(3)
    qs, qd = rng.integers(0, g.n + 2, 2000), rng.integers(0, g.n + 2, 2000)
    _same_as_compiled(g, qs, qd, plain=g.n < 1000)      # the plain search: O(n) a pair


def test_an_index_file_written_and_read_interpreted_is_the_compiled_ones(tmp_path):
    g = adversarial("cut-defeating")
    idx = _index(g, "compile")
    with jit.forced("interpret"):
        slow = idx.save(tmp_path / "slow.grail.parquet")
        back = gd.load_index(slow, backend="cpu")
    with jit.forced("compile"):
        fast = idx.save(tmp_path / "fast.grail.parquet")
    assert slow.read_bytes() == fast.read_bytes()
    assert_same_index(idx, back)


# --- when a kernel runs its Python source ---------------------------------------------------
def _fresh_kernel():
    """A kernel of its own (no disk cache), never compiled."""
    @jit.njit(nogil=True)
    def total(values, scale):
        acc = 0
        for i in range(values.shape[0]):
            acc += values[i] * scale
        return acc
    return total


def test_small_calls_run_the_python_source_until_the_budget_is_spent(monkeypatch):
    monkeypatch.delenv(jit.ENV_VAR, raising=False)      # the default: auto
    total = _fresh_kernel()
    assert total(np.arange(10), 2) == 90 and not total.signatures      # interpreted
    monkeypatch.setattr(jit, "INTERPRET_S", 0.0)                       # its budget spent
    assert total(np.arange(10), 2) == 90 and len(total.signatures) == 1
    assert total(np.arange(10), 3) == 135 and len(total.signatures) == 1   # compiled from now on


def test_large_calls_compile_at_once(monkeypatch):
    monkeypatch.delenv(jit.ENV_VAR, raising=False)
    total = _fresh_kernel()
    values = np.ones(jit.SMALL + 1, np.int64)
    assert total(values, 1) == jit.SMALL + 1 and len(total.signatures) == 1


def test_the_environment_and_forced_choose(monkeypatch):
    total = _fresh_kernel()
    monkeypatch.setenv(jit.ENV_VAR, "interpret")
    assert total(np.ones(jit.SMALL + 1, np.int64), 1) == jit.SMALL + 1
    assert not total.signatures
    with jit.forced("compile"):
        assert total(np.arange(3), 1) == 3 and len(total.signatures) == 1
    monkeypatch.setenv(jit.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="GRAIL_DUCKDB_JIT='sometimes'"):
        jit.mode()
    with pytest.raises(ValueError, match="forced"):
        with jit.forced("never"):
            pass


def test_unsigned_arithmetic_wraps_when_interpreted_too():
    @jit.njit
    def wrap(x):
        return x * np.uint64(3) + np.uint64(1)

    big = np.uint64(2**63 + 5)
    with jit.forced("interpret"):
        slow = wrap(big)
    with jit.forced("compile"):
        fast = wrap(big)
    assert int(slow) == int(fast) == (3 * (2**63 + 5) + 1) % 2**64


# --- one compiled version per kernel and argument shape --------------------------------------
def test_literals_and_narrow_ints_share_one_compiled_version():
    @jit.njit
    def step(forward, x):
        return x + 1 if forward else x - 1

    @jit.njit
    def caller(a, b):
        return step(True, a) + step(False, b) + step(a > 0, np.int32(b))

    with jit.forced("compile"):
        assert caller(np.int32(5), 7) == 6 + 6 + 8
        assert caller(5, np.int16(7)) == 20
    assert len(step.signatures) == 1
    assert str(step.signatures[0]) == "(bool, int64)"


def test_read_only_parameters_take_writable_and_read_only_arrays():
    @jit.njit(read_only=("keys",))
    def first(keys, out):
        out[0] = keys[0]

    out = np.zeros(1, np.int64)
    with jit.forced("compile"):
        first(np.arange(3, 6), out)
        first(pa.array(np.arange(7, 9)).to_numpy(), out)      # Arrow's: read-only
    assert out[0] == 7 and len(first.signatures) == 1
    with pytest.raises(TypeError, match="read_only names no parameter"):
        jit.njit(read_only=("nope",))(lambda keys: keys)


def test_the_pipeline_compiles_each_query_kernel_once():
    from grail_duckdb.kernels.cpu import classify

    idx = _index(adversarial("cut-defeating"), "compile")
    kernels = (classify.answer_range, classify._lookup_range, classify.pair_components)
    before = [set(k.signatures) for k in kernels]   # other tests' layouts compile their own
    with jit.forced("compile"):
        for keys in (np.arange(40), pa.array(np.arange(40))):     # writable, read-only
            idx.reaches(keys, keys[::-1].copy() if isinstance(keys, np.ndarray) else keys)
    for kernel, had in zip(kernels, before):
        assert len(set(kernel.signatures) - had) <= 1, kernel.signatures


# --- progress while the compiler runs --------------------------------------------------------
class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_line_waits_while_kernels_compile_and_leaves_that_time_out(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    out = io.StringIO()
    line = progress.Progress("reaches", 100, unit="pairs", after=0, stream=out, enabled=True)
    progress.COMPILING.start()
    clock.now += 20
    line.update(10)                                   # drawn after the compile, not during it
    assert out.getvalue() == ""
    progress.COMPILING.end()
    clock.now += 2
    line.update(20)
    text = out.getvalue()
    assert "20% 20/100 pairs" in text and "22.0 s (20.0 s of it compiling)" in text
    assert "~8 s left" in text                         # 2 s for 20 pairs, not 22 s
    line.close()
