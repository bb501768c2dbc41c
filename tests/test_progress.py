"""Progress of long work (issue 11, item 12): a line on stderr for builds and steps over 2 s,
nothing for short ones, silenced by GRAIL_DUCKDB_PROGRESS=0 or progress=False."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

import grail_duckdb as gd
from grail_duckdb import progress
from grail_duckdb.progress import BUILD_PHASES, BuildProgress, Progress, build_progress, step
from harness import ROOT, child_env

EDGES = ([1, 2, 3, 3], [2, 3, 1, 4])


def test_build_phase_count_matches_the_engine():
    idx = gd.build_index(*EDGES, backend="cpu", progress=False)
    assert len(idx.build_seconds) == BUILD_PHASES


def test_build_index_reports_every_phase_when_forced(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_VAR, "1")
    gd.build_index(*EDGES, backend="cpu")
    err = capsys.readouterr().err
    assert "building the index" in err
    assert err.count(f"phase {BUILD_PHASES}/{BUILD_PHASES} done (") == 1


def test_a_build_that_saves_counts_its_save_as_a_phase(monkeypatch, capsys, tmp_path):
    """The line does not say "done" while the file is still being written."""
    monkeypatch.setenv(progress.ENV_VAR, "1")
    idx = gd.build_index(*EDGES, backend="cpu", save_to=tmp_path / "e.grail.parquet")
    assert len(idx.build_seconds) == BUILD_PHASES + 1
    err = capsys.readouterr().err
    last = BUILD_PHASES + 1
    assert err.count(f"phase {last}/{last} done (save ") == 1


def test_short_builds_are_silent_and_the_switches_silence(monkeypatch, capsys):
    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    gd.build_index(*EDGES, backend="cpu")                      # well under 2 s
    monkeypatch.setenv(progress.ENV_VAR, "1")
    gd.build_index(*EDGES, backend="cpu", progress=False)      # the SQL layer's off switch
    monkeypatch.setenv(progress.ENV_VAR, "0")
    with BuildProgress(after=0) as report:                     # the environment wins
        report("ids", 0.1)
    assert capsys.readouterr().err == ""


def test_a_callable_gets_the_phases_and_no_line_is_drawn(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_VAR, "1")
    seen = []
    gd.build_index(*EDGES, backend="cpu", progress=lambda phase, s: seen.append(phase))
    assert seen[0] == "ingest" and "fingerprint" in seen and len(seen) == BUILD_PHASES
    assert capsys.readouterr().err == ""


def test_a_long_step_ticks_without_updates():
    out = io.StringIO()
    with step("generating", after=0.05, stream=out, enabled=True) as s:
        s._every = 0.05                                          # redraw often for the test
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("generating") for line in lines)
    assert lines[-1].endswith(" s") and "..." not in lines[-1]   # the final line: elapsed


def test_the_ticker_stops_with_the_work():
    out = io.StringIO()
    with Progress("x", 10, after=0, stream=out, enabled=True, tick=True) as p:
        p.update(5)
    shown = out.getvalue()
    time.sleep(0.3)
    assert out.getvalue() == shown and p not in progress._CLOCK._open


def test_build_progress_passes_callables_through():
    def report(phase, seconds):
        return None
    with build_progress(report) as got:
        assert got is report
    with build_progress(False) as got:
        assert got is None
    with build_progress(None) as got:
        assert isinstance(got, BuildProgress)


@pytest.mark.slow
def test_a_two_second_build_shows_progress_by_default(tmp_path):
    """A build long enough (a generated graph of 1.5M papers: several seconds on CI's CPU)
    shows the line without any switch, from the Python API."""
    code = ("import grail_duckdb as gd; from grail_duckdb.tools.generators import citation_dag;"
            "gd.warm_up(); e = citation_dag(1_500_000, seed=0);"
            "import time; t = time.perf_counter(); gd.build_index(e, backend='cpu');"
            "print(time.perf_counter() - t)")
    env = {k: v for k, v in os.environ.items() if k != progress.ENV_VAR}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env=child_env(env), timeout=600)
    assert r.returncode == 0, r.stderr
    seconds = float(r.stdout.strip().splitlines()[-1])
    if seconds >= 2.5:
        assert "building the index: phase" in r.stderr, r.stderr
    elif seconds < 1.5:
        assert "building the index" not in r.stderr


class _FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _simulated_call(clock, line, *, total, batch, classify_s, deferred_share, search_s,
                    wobble, reports=20):
    """A query call as :func:`grail_duckdb.engine.queries.reaches` makes it, on a fake clock:
    each batch classified (``classify_s`` a pair), then its deferred pairs (``deferred_share``
    of them) searched (``search_s`` a pair, times the batch's ``wobble``), reported as it goes.
    Yields ``(estimated time left or None, the fraction shown, the clock)`` after each report."""
    classified = deferred = searched = 0
    for b, lo in enumerate(range(0, total, batch)):
        hi = min(total, lo + batch)
        with line.phase("classify"):
            clock.now += (hi - lo) * classify_s
        classified, deferred = hi, deferred + round((hi - lo) * deferred_share)
        line.classified(classified, deferred)
        yield line.left(clock.now), clock.now
        step = max((deferred - searched) // reports, 1)
        with line.phase("search"):
            while searched < deferred:
                done = min(step, deferred - searched)
                clock.now += done * search_s * wobble[b % len(wobble)]
                searched += done
                line.searched(searched)
                yield line.left(clock.now), clock.now


def test_the_time_left_of_a_deep_search_call_is_within_2x_once_a_tenth_is_done(monkeypatch):
    """The deep-search workload's shape (1M random pairs on a 1M-paper citation graph, two
    cores): classifying costs ~2 us a pair, 36% of the pairs wait for a deep search of ~0.25
    ms, whose cost varies from batch to batch; the estimate of the time left stays within a
    factor of 2 of the truth from 10% of the call's time on (an estimate by pairs answered
    said "~6 s left" at 26% of a 52 s call)."""
    clock = _FakeClock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    out = io.StringIO()
    line = progress.PairsProgress("reaches", 1_000_000, after=0, stream=out, enabled=True)
    start = clock.now
    seen = list(_simulated_call(clock, line, total=1_000_000, batch=1 << 18, classify_s=2e-6,
                                deferred_share=0.36, search_s=2.5e-4,
                                wobble=(1.0, 1.4, 0.8, 1.2)))
    end = clock.now
    checked = 0
    for left, now in seen:
        if now - start >= 0.1 * (end - start) and now < end:
            truth = end - now
            assert left is not None and truth / 2 <= left <= 2 * truth, (now, left, truth)
            checked += 1
    assert checked > 40
    line.close()
    assert "~" in out.getvalue() and "of the work" in out.getvalue()


def test_no_guess_while_no_deep_search_has_ended(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    out = io.StringIO()
    line = progress.PairsProgress("reaches", 1000, after=0, stream=out, enabled=True)
    with line.phase("classify"):
        clock.now += 1.0
    line.classified(500, 200)
    assert line.left(clock.now) is None
    assert "300/1,000 pairs answered (200 waiting for the deep search), 1.0 s" in out.getvalue()
    with line.phase("search"):
        clock.now += 2.0
        line.searched(100)
        assert line.left(clock.now) == pytest.approx(1.0 + 300 * 0.02)   # 500 left, 300 to search
    line.close()


def test_the_compiler_s_time_is_not_work(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    line = progress.PairsProgress("reaches", 1000, after=0, stream=io.StringIO(), enabled=True)
    with line.phase("classify"):
        progress.COMPILING.start()
        clock.now += 30.0
        progress.COMPILING.end()
        clock.now += 1.0
    line.classified(500, 0)
    assert line.seconds("classify") == pytest.approx(1.0)
    assert line.left(clock.now) == pytest.approx(1.0)
    line.close()
