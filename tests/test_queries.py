"""The query path on both backends against the oracle: the fused classification, the bounded
search (budgets that defeat it), the exact search of deferred pairs, batching, every key
lookup (dense, sparse, strings, NULLs, unknown and extreme keys), cancellation, progress and
concurrent callers. Each test body runs on every backend of the ``backend`` fixture
(``tests/conftest.py``); a GPU index answers every call on the device."""
from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

import grail_duckdb as gd
from grail_duckdb.engine import queries
#: pairs of a call large enough for the device whatever its settings
GPU_MIN_QUERIES = 32_768
from grail_duckdb.kernels import gpu_available, to_host
from grail_duckdb.kernels.shared import DEFERRED, LOOKUP_DENSE, LOOKUP_IDS, LOOKUP_RANGE, LOOKUP_SORTED
from oracle import reaches_by_dfs

def _dag(n, m, seed, span=None):
    """A random DAG on 0..n-1 (edges from smaller to larger ids, at most ``span`` apart)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, m)
    b = a + rng.integers(1, span or n, m) if span else rng.integers(0, n, m)
    keep = (b < n) & (a != b)
    a, b = a[keep], b[keep]
    return np.minimum(a, b), np.maximum(a, b)


def _truth(src, dst, n, qs, qt):
    return reaches_by_dfs(src, dst, n, qs, qt) | (qs == qt)


def _small_batches(idx, monkeypatch, size=4_096):
    """Make the index's backend answer in batches of ``size`` pairs."""
    k = idx.kernels
    if k.name == "gpu":
        from dataclasses import replace

        monkeypatch.setattr(k, "settings", replace(k.settings, query_batch=size))
    else:
        monkeypatch.setattr(k, "query_batch", size)


def _check(idx, qs, qt, want, **kw):
    got, stats = idx.reaches_with_stats(qs, qt, **kw)
    np.testing.assert_array_equal(got.to_numpy(zero_copy_only=False), want)
    st = stats.as_dict()
    assert st["bounded_search"] + st["deep_search"] == st["searched"] >= st["search_reachable"]
    settled = sum(st[k] for k in ("null", "same_key", "unknown_vertex", "same_component",
                                  "level_cut", "label_cut", "tree_cut", "hub_cut", "searched"))
    assert settled == st["queries"] == len(qs)
    return stats


def _traced_search(idx, n, src, dst, seed, monkeypatch, **settings) -> list:
    """Pairs near in id (2 * GPU_MIN_QUERIES: answered on the device, not its host copy)
    through the GPU's exact search with ``settings``, each call's round traces recorded
    ``(warps, mode, cap, groups, pairs in, pairs left, seconds)``: the oracle's answers and
    the CPU backend's statistics are checked; the traces, one list per call, returned."""
    from dataclasses import replace

    k = idx.kernels
    monkeypatch.setattr(k, "settings", replace(k.settings, **settings))
    traces, real = [], type(k)._bidir
    monkeypatch.setattr(type(k), "_bidir", lambda self, qi, u, t, trace=None, checkpoint=None:
                        real(self, qi, u, t, traces.append([]) or traces[-1], checkpoint))
    rng = np.random.default_rng(seed)
    qs = rng.integers(0, n, 2 * GPU_MIN_QUERIES)
    qt = np.minimum(qs + rng.integers(1, 3_000, qs.shape[0]), n - 1)
    stats = _check(idx, qs, qt, _truth(src, dst, n, qs, qt), budget=0)
    assert stats == idx.to_backend("cpu").reaches_with_stats(qs, qt, budget=0)[1]
    return traces


@pytest.mark.parametrize("one", ["child", "parent"])
def test_forests_are_settled_by_the_tree_cuts_alone(backend, one):
    """On a forest where every vertex has one child at most (each paper cites one other, as
    in citeseer.scc and uniprot) the tree of chosen children answers every reachable pair; where
    every vertex has one parent at most, the tree of parents does: no reachable pair is
    searched, and the answers are the oracle's. Long chains and wide fans, so that both trees are deep."""
    n = 20_000
    rng = np.random.default_rng(4)
    v = np.arange(1, n)
    near = np.maximum(v - rng.integers(1, 40, n - 1), 0)  # chains
    far = (v * rng.random(n - 1) ** 3).astype(np.int64)    # fans into early vertices
    w = np.where(rng.random(n - 1) < 0.5, near, far)
    keep = rng.random(n - 1) < 0.9
    src, dst = (v[keep], w[keep]) if one == "child" else (w[keep], v[keep])
    idx = gd.build_index(src, dst, backend=backend)
    qs = np.concatenate([rng.integers(0, n, 20_000), src[:5_000]])
    qt = np.concatenate([rng.integers(0, n, 20_000), dst[:5_000]])
    walk = qs[20_000:].copy()
    if one == "child":  # follow each source's one out-edge a few steps: reachable pairs
        nxt = np.arange(n)
        nxt[src] = dst
        for _ in range(7):
            walk = nxt[walk]
        qs, qt = np.concatenate([qs, src[:5_000]]), np.concatenate([qt, walk])
    want = _truth(src, dst, n, qs, qt)
    stats = _check(idx, qs, qt, want)
    assert stats.search_reachable == 0  # the unreachable ones may still take a search
    assert stats.tree_cut + stats.hub_cut + stats.same_component == (want & (qs != qt)).sum()
    assert stats.tree_cut > 5_000


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
@pytest.mark.parametrize("rounds", [((1, 32), (2, 32), (4, 64), (8, 128)),
                                    ((8, 32), (4, 64), (2, 128), (1, 64))])
def test_every_group_size_of_the_exact_search_hands_on_and_answers(rounds, monkeypatch):
    """The GPU's exact search in rounds of 1, 2, 4 and 8 warps per pair (kernels/bidir.cu:
    groups of 2 and 4 share a block and sync on their own barriers), with capacities so small
    that each round hands pairs on to the next (and a last round smaller than the one before
    on to the dense round): the oracle's answers, and the CPU backend's statistics."""
    n = 20_000
    src, dst = _dag(n, 100_000, 5, span=300)
    idx = gd.build_index(src, dst, backend="gpu", labels=1)
    traces = _traced_search(idx, n, src, dst, 6, monkeypatch, bidir_rounds=rounds,
                            fill_first_round=False)
    rows = [r for tr in traces for r in tr]  # (warps, mode, cap, groups, in, left, seconds)
    assert [r[:3] for r in rows[:len(rounds)]] == [(g, 0, c) for g, c in rounds]
    assert all(r[5] > 0 for r in rows[:len(rounds) - 1])  # each round handed pairs on
    if rounds[-1][1] < rounds[-2][1]:
        assert rows[len(rounds)][:3] == (8, 1, idx.n_components) and rows[len(rounds)][4] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
@pytest.mark.parametrize("most, room", [(0, True), (1 << 20, True), (1 << 20, False)])
def test_the_pairs_a_large_round_hands_on_go_to_the_grid_wide_search(most, room, monkeypatch):
    """``wide_search``: the pairs that a round of the given capacity hands on, when few
    enough, are answered by the label-pruned bitmask search on the whole grid (a bit per
    pair, in passes of 64 * W), not by the later rounds: the oracle's answers and the CPU
    backend's statistics; with 0 pairs, or without the device memory it needs free, they go
    on to the next round as before."""
    n = 20_000
    src, dst = _dag(n, 100_000, 5, span=300)
    idx = gd.build_index(src, dst, backend="gpu", labels=1)
    if not room:
        monkeypatch.setattr(type(idx.kernels), "_free_device_bytes", staticmethod(lambda: 0))
    traces = _traced_search(idx, n, src, dst, 7, monkeypatch, bidir_rounds=((1, 32), (4, 64)),
                            fill_first_round=False, wide_search=(32, most))
    handed = [tr for tr in traces if tr[0][5] > 0]  # (warps, mode, cap, groups, in, left, s)
    assert handed
    if most and room:
        assert all(len(tr) == 2 and tr[1][1:3] == (2, idx.n_components) and tr[1][4] == tr[0][5]
                   for tr in handed)
    else:
        assert all(tr[1][:3] == (4, 0, 64) for tr in handed)
        assert all(r[1] != 2 for tr in traces for r in tr)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_a_round_short_of_scratch_takes_more_warps_per_pair():
    """A round whose scratch budget holds fewer groups than the device runs at once at the
    warps asked for doubles them (up to a block); one that holds enough keeps them."""
    from grail_duckdb.kernels import kernels_for

    k = kernels_for("gpu")

    def capacity(g):  # groups of g warps the device runs at once
        name = f"bidir_g{g}_kernel"
        return k._grid(name, k._function(name)) * (8 // g)

    for g in (1, 2, 4, 8):
        assert k._group_warps(g, capacity(g)) == g
        assert k._group_warps(g, 10**9) == g
    assert k._group_warps(1, 0) == 8
    assert k._group_warps(1, capacity(1) - 1) > 1
    assert k._group_warps(4, capacity(4) - 1) == 8


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_the_first_round_grows_while_the_scratch_holds_the_device_full_of_groups():
    """``fill_first_round``: the first round's capacity doubles while the budget holds as
    many of its groups as the device runs at once, up to the second round's, and takes the
    place of the rounds it outgrew; a budget short of that leaves the rounds as they were."""
    from grail_duckdb.kernels.gpu import GpuKernels, GpuSettings

    rounds = ((1, 2048), (4, 32768), (8, 1 << 18))
    k = GpuKernels(GpuSettings(bidir_rounds=rounds))
    at_once = k._groups_at_once(1)
    assert k._bidir_rounds(0) == list(rounds)
    assert k._bidir_rounds(24 * 4096 * at_once - 1) == list(rounds)
    assert k._bidir_rounds(24 * 4096 * at_once) == [(1, 4096), (4, 32768), (8, 1 << 18)]
    assert k._bidir_rounds(24 * 32768 * at_once) == [(1, 32768), (8, 1 << 18)]
    assert k._bidir_rounds(1 << 50) == [(1, 32768), (8, 1 << 18)]
    fixed = GpuKernels(GpuSettings(bidir_rounds=rounds, fill_first_round=False))
    assert fixed._bidir_rounds(1 << 50) == list(rounds)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_a_first_round_grown_by_the_scratch_answers_like_the_oracle(monkeypatch):
    """With scratch enough to grow the first round (a 1 GB floor), the search runs one
    wider first round and answers every pair as the oracle does, with the CPU backend's
    statistics."""
    n = 20_000
    src, dst = _dag(n, 100_000, 5, span=300)
    idx = gd.build_index(src, dst, backend="gpu", labels=1)
    traces = _traced_search(idx, n, src, dst, 8, monkeypatch, min_search_scratch=1 << 30)
    first = [tr[0] for tr in traces if tr]
    assert first and all(r[2] > idx.kernels.settings.bidir_rounds[0][1] for r in first)


@pytest.mark.parametrize("budget", [0, 1, 3, 256])
def test_budgets_that_defeat_the_bounded_search(backend, budget):
    """Deep narrow DAGs with many paths: small budgets defer most pairs to the exact search."""
    n = 3000
    src, dst = _dag(n, 9000, 1, span=40)
    idx = gd.build_index(src, dst, backend=backend, labels=2)
    rng = np.random.default_rng(2)
    qs = rng.integers(0, n, 6000)
    qt = np.minimum(qs + rng.integers(1, 400, 6000), n - 1)
    stats = _check(idx, qs, qt, _truth(src, dst, n, qs, qt), budget=budget)
    if budget == 0:
        assert stats.bounded_search == 0 and stats.deep_search == stats.searched > 0
    if backend.name == "gpu":
        cpu = idx.to_backend("cpu")
        assert cpu.reaches_with_stats(qs, qt, budget=budget)[1] == stats


def test_batches_give_the_answers_of_one_call(backend, monkeypatch):
    n = 2000
    src, dst = _dag(n, 6000, 3)
    idx = gd.build_index(src, dst, backend=backend)
    rng = np.random.default_rng(4)
    qs, qt = rng.integers(0, n + 5, 50_000), rng.integers(0, n + 5, 50_000)
    whole, s_whole = idx.reaches_with_stats(qs, qt)
    _small_batches(idx, monkeypatch)
    parts, s_parts = idx.reaches_with_stats(qs, qt)
    assert parts.equals(whole) and s_parts == s_whole
    want = np.zeros(qs.shape[0], bool)
    known = (qs < n) & (qt < n)
    want[known] = _truth(src, dst, n, qs[known], qt[known])
    want |= qs == qt
    np.testing.assert_array_equal(whole.to_numpy(zero_copy_only=False), want)


@pytest.mark.parametrize("threads,few", [(2, 0), (7, 0), (64, 0), (2, 1 << 20)])
def test_a_chunk_alone_spread_over_cores_answers_as_one_thread(threads, few, monkeypatch):
    """A DuckDB-sized call while no two calls overlap (DuckDB on one thread) is split over
    every core by Numba's threads (chunks of SMALL_CHUNK rows or more, some of them ragged);
    on a machine of few cores (``few``: FEW_CORES past the machine's cores) it stays on the
    calling thread below ALONE_MIN_FEW pairs, and a batch of SERIAL_MAX pairs or more is split
    over the package's threads. Answers and cut counts equal the calling-thread path's and
    the oracle's, NULLs and unknown keys included."""
    from grail_duckdb.kernels import cpu

    monkeypatch.setattr(cpu.IN_FLIGHT, "overlap_at", -1e9)  # no earlier test's overlap
    with cpu.IN_FLIGHT as alone:
        assert alone
    monkeypatch.setattr(cpu, "FEW_CORES", few)
    monkeypatch.setattr(cpu, "SERIAL_MAX", 3000)  # a "large" batch of the sizes below
    parallel = []
    real = cpu._chunk_rows
    monkeypatch.setattr(cpu, "_chunk_rows", lambda *a: parallel.append(real(*a)) or parallel[-1])
    n = 1500
    src, dst = _dag(n, 5000, 21, span=50)
    idx = gd.build_index(src, dst, backend="cpu", labels=2)
    monkeypatch.setattr(idx.kernels, "threads", threads)
    rng = np.random.default_rng(22)
    for size in (cpu.ALONE_MIN, 2048, 2047, 3001):
        qs = pa.array(rng.integers(0, n + 3, size), mask=rng.random(size) < 0.02)
        qt = pa.array(rng.integers(0, n + 3, size))
        spread, s_spread = idx.reaches_with_stats(qs, qt)
        with monkeypatch.context() as m:
            m.setattr(cpu, "ALONE_MIN", 1 << 40)
            m.setattr(cpu, "SERIAL_MAX", 1 << 40)
            serial, s_serial = idx.reaches_with_stats(qs, qt)
        assert spread.equals(serial) and s_spread == s_serial
        if few and size < cpu.SERIAL_MAX:
            assert not parallel  # a few cores' small batch: the calling thread's
        else:
            assert parallel and parallel[-1] == cpu._chunk_rows(size, threads)
        parallel.clear()
        a = qs.fill_null(0).to_numpy()
        b = qt.to_numpy()
        want = a == b
        known = (a < n) & (b < n)
        want[known] |= _truth(src, dst, n, a[known], b[known])
        got = spread.to_numpy(zero_copy_only=False)
        valid = ~qs.is_null().to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(got[valid], want[valid])
        assert spread.null_count == int((~valid).sum())


def test_overlapping_calls_keep_their_chunks_on_their_own_threads(monkeypatch):
    """Once two calls overlap (DuckDB on several threads), small calls stay on their calling
    threads for QUIET seconds; after a quiet spell they may take every core again."""
    from grail_duckdb.kernels import cpu

    flight = cpu._InFlight()
    with flight as alone:
        assert alone
    with flight as first:
        with flight as second:
            assert first and not second
    with flight as later:
        assert not later
    clock = [1e6]
    monkeypatch.setattr(cpu.time, "monotonic", lambda: clock[0])
    flight.overlap_at = clock[0] - flight.QUIET / 2
    with flight as soon:
        assert not soon
    clock[0] += flight.QUIET
    with flight as quiet:
        assert quiet and flight.calls == 1
    assert flight.calls == 0


def test_calls_of_one_size_replay_the_same_answers(backend):
    """Calls of one size, with other pairs each time, alternating between two indices, with and
    without NULLs, sparse keys (wide staging) and dense ones: the GPU captures the device work
    of the second call of a shape as a CUDA graph and replays it later; every call gives the
    oracle's answers."""
    n, size = 1500, 40_000
    cases = []
    for seed, scale in ((8, 1), (9, 1_000_003)):
        src, dst = _dag(n, 5000, seed)
        cases.append((src, dst, scale, gd.build_index(pa.array(src * scale),
                                                     pa.array(dst * scale), backend=backend)))
    rng = np.random.default_rng(10)
    for call in range(8):
        src, dst, scale, idx = cases[call % 2]
        qs, qt = rng.integers(0, n, size), rng.integers(0, n, size)
        want = _truth(src, dst, n, qs, qt)
        verts = np.zeros(n, bool)
        verts[src] = verts[dst] = True
        want &= (verts[qs] & verts[qt]) | (qs == qt)
        if call >= 4:  # NULLs: another shape of batch
            mask = rng.random(size) < 0.1
            got = idx.reaches(pa.array(qs * scale, mask=mask), pa.array(qt * scale))
            assert got.null_count == int(mask.sum())
            np.testing.assert_array_equal(
                np.asarray(got.to_pylist(), object)[~mask], want[~mask])
        else:
            _check(idx, qs * scale, qt * scale, want)


@pytest.mark.parametrize("keys", ["range", "dense", "sparse", "extreme", "strings"])
def test_key_lookups_nulls_and_unknown_keys(backend, keys):
    """Every lookup: a whole range of keys (no table), dense ids with gaps (a table), sorted
    sparse keys (binary search), keys near the int64 limits (no overflow in key - offset),
    strings; NULLs, unknown keys (below and above a range too), equal unknown keys."""
    n = 400
    src, dst = _dag(n, 1200, 5)
    if keys == "range":  # every vertex present (self-loops change no answer)
        src, dst = np.r_[src, np.arange(n)], np.r_[dst, np.arange(n)]
    elif keys == "dense":  # a hole: key n // 2 is no vertex
        keep = (src != n // 2) & (dst != n // 2)
        src, dst = src[keep], dst[keep]
    rng = np.random.default_rng(6)
    qs, qt = rng.integers(0, n + 20, 5000), rng.integers(0, n + 20, 5000)
    qt[::7] = qs[::7]  # equal keys, known and unknown
    want = np.zeros(qs.shape[0], bool)
    known = (qs < n) & (qt < n)
    verts = np.zeros(n + 20, bool)
    verts[src] = verts[dst] = True
    known &= verts[qs] & verts[qt]
    want[known] = _truth(src, dst, n, qs[known], qt[known])
    want |= qs == qt
    to_key = {"range": lambda x: x + 10**12 - 7, "dense": lambda x: x + 5,
              "sparse": lambda x: x * 1_000_003 - 7,
              "extreme": lambda x: np.where(x % 2, np.int64(2**62) + x, -np.int64(2**62) - x),
              "strings": lambda x: np.array([f"k{v}" for v in x], object)}[keys]
    idx = gd.build_index(pa.array(to_key(src)), pa.array(to_key(dst)), backend=backend)
    mode = {"range": LOOKUP_RANGE, "dense": LOOKUP_DENSE, "sparse": LOOKUP_SORTED,
            "extreme": LOOKUP_SORTED, "strings": LOOKUP_IDS}[keys]
    assert idx.query_index().lookup_mode == mode
    far = np.array([2**63 - 1, -2**63, 2**63 - 2], np.int64)
    col_s, col_t = to_key(qs), to_key(qt)
    mask = np.zeros(qs.shape[0], bool)
    mask[::11] = True
    a = pa.array(list(col_s), mask=mask)
    b = pa.array(list(col_t), mask=np.roll(mask, 3))
    got, stats = idx.reaches_with_stats(a, b)
    null = mask | np.roll(mask, 3)
    assert got.null_count == int(null.sum()) == stats.null
    np.testing.assert_array_equal(np.asarray(got.to_pylist(), object)[~null], want[~null])
    if keys != "strings":  # keys at the very ends of int64 are unknown, equal ones reach
        f = idx.reaches(pa.array(np.r_[far, 5]), pa.array(np.r_[far[::-1], 5]))
        assert f.to_pylist()[1] is True and f.to_pylist()[0] is False


def test_cancel_stops_a_call_between_batches(backend, monkeypatch):
    n = 3000
    src, dst = _dag(n, 9000, 7, span=40)
    idx = gd.build_index(src, dst, backend=backend)
    rng = np.random.default_rng(8)
    qs, qt = rng.integers(0, n, 20_000), rng.integers(0, n, 20_000)
    stop = threading.Event()
    stop.set()
    with pytest.raises(queries.QueryCancelled):
        idx.reaches_with_stats(qs, qt, cancel=stop)
    calls = []

    def after_first_check():
        calls.append(1)
        return len(calls) > 1
    _small_batches(idx, monkeypatch)
    with pytest.raises(queries.QueryCancelled):  # the first batch runs, a later check stops
        idx.reaches_with_stats(qs, qt, cancel=after_first_check)
    assert idx.reaches_with_stats(qs[:10], qt[:10], cancel=lambda: False)[0] is not None


def test_cancel_stops_the_exact_search_and_leaves_nothing_behind(backend):
    """A checkpoint that raises stops the exact search of deferred pairs (on the GPU while
    its round runs: the groups stop taking pairs and leave their scratch clean); the same
    pairs then get the oracle's answers, and a checkpoint that lets the search run is called
    with counts of answered pairs."""
    n = 3000
    src, dst = _dag(n, 9000, 1, span=40)
    idx = gd.build_index(src, dst, backend=backend, labels=1)
    rng = np.random.default_rng(3)
    qs = rng.integers(0, n, 2 * GPU_MIN_QUERIES)
    qt = np.minimum(qs + rng.integers(1, 400, qs.shape[0]), n - 1)
    k = idx.kernels
    qi = idx.query_index(need_reverse=True)
    part = k.answer_pairs(qi, qs, qt, None, True, 0)
    m = int(part.counts[DEFERRED])
    rows, u, t = part.deferred
    rows, u, t = np.asarray(to_host(rows[:m])), u[:m].copy(), t[:m].copy()
    assert rows.shape[0] > 100

    class Stop(Exception):
        pass

    def stop(done):
        raise Stop
    with pytest.raises(Stop):
        k.search_pairs(qi, u, t, checkpoint=stop)
    seen = []
    got = np.asarray(k.search_pairs(qi, u, t, checkpoint=seen.append), bool)
    np.testing.assert_array_equal(got, _truth(src, dst, n, qs[rows], qt[rows]))
    assert seen and all(0 <= d <= rows.shape[0] for d in seen)
    checks = []  # the call checks once before its one batch, then in the search
    with pytest.raises(queries.QueryCancelled):
        idx.reaches_with_stats(qs, qt, budget=0,
                               cancel=lambda: checks.append(1) or len(checks) > 1)
    assert len(checks) == 2
    _check(idx, qs, qt, _truth(src, dst, n, qs, qt), budget=0)


def test_long_calls_show_progress(backend, monkeypatch, capsys):
    monkeypatch.setenv("GRAIL_DUCKDB_PROGRESS", "1")
    n = 1000
    src, dst = _dag(n, 3000, 9)
    idx = gd.build_index(src, dst, backend=backend)
    _small_batches(idx, monkeypatch)
    rng = np.random.default_rng(10)
    idx.reaches(rng.integers(0, n, 20_000), rng.integers(0, n, 20_000))
    assert "reaches" in capsys.readouterr().err


def test_concurrent_callers_get_their_own_answers(backend):
    """DuckDB calls the UDF from several threads at once: small chunks (serial kernels) and
    large calls (parallel regions, per-thread GPU buffers) must not mix."""
    n = 2000
    src, dst = _dag(n, 6000, 11, span=60)
    idx = gd.build_index(src, dst, backend=backend)
    rng = np.random.default_rng(12)
    jobs = [(rng.integers(0, n, size), rng.integers(0, n, size))
            for size in (2048, 2048, 40_000, 2048, 40_000, 100)]
    want = [idx.reaches(s, t) for s, t in jobs]
    got = [None] * len(jobs)

    def run(i):
        for _ in range(3):
            got[i] = idx.reaches(*jobs[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(g.equals(w) for g, w in zip(got, want))


def test_cycles_components_and_plain_search(backend):
    """Strongly connected components in the condensation, with the cuts on and off."""
    rng = np.random.default_rng(13)
    n = 1500
    src, dst = rng.integers(0, n, 2500), rng.integers(0, n, 2500)
    idx = gd.build_index(src, dst, backend=backend)
    assert idx.n_components < n
    qs, qt = rng.integers(0, n, 8000), rng.integers(0, n, 8000)
    verts = np.zeros(n, bool)
    verts[src] = verts[dst] = True
    want = np.zeros(qs.shape[0], bool)
    known = verts[qs] & verts[qt]
    want[known] = _truth(src, dst, n, qs[known], qt[known])
    want |= qs == qt
    _check(idx, qs, qt, want)
    _check(idx, qs, qt, want, use_cuts=False)
