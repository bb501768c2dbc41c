"""Progress of long work (builds, large query calls, reading and writing): a line on stderr,
only for long work.

Nothing is shown for work that finishes within ``after`` seconds (2 by default), so everyday
calls stay silent. On a terminal the line is redrawn in place (a bar); elsewhere (logs, DuckDB
sessions) a plain line is written at most every few seconds. ``GRAIL_DUCKDB_PROGRESS=0``
silences every progress line; ``=1`` shows them from the start.

* :class:`Progress`: ``total`` units of work, :meth:`Progress.update` with the units done;
  ``tick=True`` keeps the line moving (elapsed time) while no update comes;
* :class:`PairsProgress`: a query call, whose pairs take two kinds of work of very different
  cost (the cuts, then the deep search of the few they leave), each timed: the time left is
  estimated from each kind's own rate (:func:`pairs_time_left`);
* :func:`step`: one step of unknown length ("reading edges.tsv.gz"), its elapsed time;
* :class:`BuildProgress`: the ``progress(phase, seconds)`` callback of
  :func:`grail_duckdb.build_index` as one line, the phases done and the last one named;
* :func:`build_progress`: what ``build_index(progress=...)`` does with its argument (None: a
  :class:`BuildProgress`; False: nothing; a callable: that callable). The SQL layer passes
  False where its option silences progress.
* :data:`COMPILING`: whether kernels are being compiled (:mod:`grail_duckdb.jit` says so).
  Lines of the work that waits for the compiler stay still meanwhile (the compile has a line
  of its own), leave the time out of their estimate of time left and say it at the end.

>>> import io
>>> out = io.StringIO()
>>> with Progress("answering", 4, unit="pairs", after=0, stream=out, enabled=True) as p:
...     p.update(4)
>>> "answering" in out.getvalue() and "4/4 pairs" in out.getvalue()
True
>>> out = io.StringIO()
>>> with BuildProgress(phases=2, after=0, stream=out, enabled=True) as report:
...     report("ids", 0.5); report("scc", 1.5)
>>> "phase 2/2 done (scc 1.50 s)" in out.getvalue()
True
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time

ENV_VAR = "GRAIL_DUCKDB_PROGRESS"
#: the phases :func:`grail_duckdb.build_index` reports (ingest, read, ids, fingerprint, csr, scc,
#: four label passes, the tree of chosen children, the hubs; and ``save`` after them when it
#: writes the index file as it goes)
BUILD_PHASES = 12


def enabled_by_default() -> bool | None:
    """The environment's choice: False when silenced, True when forced, None to decide by time."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("0", "off", "false", "no"):
        return False
    if value in ("1", "on", "true", "yes"):
        return True
    return None


_SILENCED = 0


@contextlib.contextmanager
def silenced():
    """No progress line for work started inside the block (work run for its side effects,
    such as :func:`grail_duckdb.warm_up`'s); a compile's line still shows."""
    global _SILENCED
    _SILENCED += 1
    try:
        yield
    finally:
        _SILENCED -= 1


class _Compiling:
    """Seconds this process has spent compiling kernels, and whether it is compiling now
    (one compile at a time: Numba's compiler holds a process-wide lock)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._since = 0.0
        self._total = 0.0

    def start(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._since = time.perf_counter()
            self._depth += 1

    def end(self) -> None:
        with self._lock:
            self._depth = max(self._depth - 1, 0)
            if self._depth == 0:
                self._total += time.perf_counter() - self._since

    @property
    def active(self) -> bool:
        return self._depth > 0

    def seconds(self) -> float:
        """Seconds spent compiling so far, the running compile included."""
        with self._lock:
            running = time.perf_counter() - self._since if self._depth else 0.0
            return self._total + running


COMPILING = _Compiling()


class Progress:
    """Progress of ``total`` units of work called ``what``; :meth:`update` with the units done.

    ``total=None`` is work of unknown size: the line shows the elapsed time only. The line
    appears once the work has run for ``after`` seconds, is redrawn at most every 0.2 s on a
    terminal (every 5 s elsewhere) and ends with the elapsed time on :meth:`close`. With
    ``tick`` a background thread redraws it on that schedule even when no update comes (a
    long phase of a build; one clock thread serves every line); with ``eta`` off no time left
    is guessed (units of uneven cost).
    """

    def __init__(self, what: str, total: int | None, *, unit: str = "", after: float = 2.0,
                 stream=None, enabled: bool | None = None, eta: bool = True,
                 tick: bool = False):
        self.what, self.unit, self.eta = what, unit, eta
        self.total = None if total is None else max(int(total), 0)
        self.stream = stream if stream is not None else sys.stderr
        env = enabled_by_default()
        if _SILENCED and not self.during_compiles:
            enabled = False
        self.enabled = env if enabled is None else (enabled and env is not False)
        self.after = 0.0 if env is True else after
        self.start = time.perf_counter()
        self._compile0 = COMPILING.seconds()
        self.done = 0
        self.detail = ""
        self._shown = False
        self._ended = False                 # the final line is drawn: nothing after it
        self._last = 0.0
        self._lock = threading.Lock()
        self._closed = False
        self._ticking = bool(tick and self.enabled is not False)
        if self._ticking:
            _CLOCK.add(self)

    def update(self, done: int, detail: str | None = None) -> None:
        """Record that ``done`` units (in all) are finished; maybe redraw the line."""
        self.done = int(done)
        if detail is not None:
            self.detail = detail
        if self.enabled is False:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        if elapsed < self.after:
            return
        finished = self.total is not None and self.done >= self.total
        if finished:
            self._draw(elapsed, final=True)
        elif now - self._last >= self._every:
            self._draw(elapsed)

    @functools.cached_property
    def _tty(self) -> bool:
        """Whether the line goes to a terminal (asked on first need: most calls never draw)."""
        return bool(getattr(self.stream, "isatty", lambda: False)())

    @functools.cached_property
    def _every(self) -> float:
        """Seconds between two redraws."""
        return 0.2 if self._tty else 5.0

    def _tick(self, now: float) -> None:
        """Redraw the line if it is due (called by the clock thread for ``tick=True``)."""
        if now - self.start >= self.after and now - self._last >= self._every:
            self._draw(now - self.start)

    def compile_seconds(self) -> float:
        """Seconds of this line's work spent waiting for the compiler."""
        return COMPILING.seconds() - self._compile0

    def left(self, elapsed: float) -> float | None:
        """Estimated seconds left (None: no estimate): the work's own rate so far, the
        compiler's time left out. Subclasses that know the work's parts estimate better."""
        frac = self.done / self.total if self.total else 1.0
        if not 0 < frac < 1:
            return None
        return max(elapsed - self.compile_seconds(), 0.0) * (1 - frac) / frac

    def _text(self, elapsed: float, final: bool) -> tuple[str, float | None]:
        """The line's text and the fraction done (None when the size is unknown)."""
        detail = f" ({self.detail})" if self.detail else ""
        compiling = 0.0 if self.during_compiles else self.compile_seconds()
        waited = f" ({compiling:.1f} s of it compiling)" if compiling >= 0.1 else ""
        if self.total is None:
            return f"{self.what}{'' if final else '...'}{detail} {elapsed:.1f} s{waited}", None
        frac = self.done / self.total if self.total else 1.0
        unit = f" {self.unit}" if self.unit else ""
        if self.eta:
            text = f"{self.what}: {frac:4.0%} {self.done:,}/{self.total:,}{unit}{detail}"
        else:
            text = f"{self.what}: phase {self.done}/{self.total} done{detail}"
        text += f", {elapsed:.1f} s{waited}"
        left = self.left(elapsed) if self.eta and not final else None
        if left is not None:
            text += f", ~{left:.0f} s left"
        return text, frac

    #: whether the line is drawn while kernels compile (only the compile's own line is)
    during_compiles = False

    def _draw(self, elapsed: float, final: bool = False) -> None:
        if not (final or self.during_compiles) and COMPILING.active:
            return
        with self._lock:
            if self._ended or (self._shown and self._closed and not final):
                return
            self._ended = final
            text, frac = self._text(elapsed, final)
            if self._tty:
                width = 24
                if frac is None:
                    bar = "".join("#" if (i - int(elapsed * 8)) % width < 4 else "."
                                  for i in range(width))
                else:
                    filled = int(round(frac * width))
                    bar = "#" * filled + "." * (width - filled)
                self.stream.write(f"\r[{bar}] {text}\x1b[K")
                if final:
                    self.stream.write("\n")
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
            self._shown = True
            self._last = time.perf_counter()

    def close(self) -> None:
        """Stop the ticker and end the line (only if it was ever shown or the work was long)."""
        self._closed = True
        if self._ticking:
            _CLOCK.remove(self)
        if self._shown or (self.enabled is not False
                           and time.perf_counter() - self.start >= self.after):
            self._draw(time.perf_counter() - self.start, final=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pairs_time_left(total: int, classified: int, deferred: int, searched: int,
                    classify_s: float, search_s: float) -> float | None:
    """Seconds left to a query call, from each kind of its work at its own rate so far:
    classifying a pair (the cuts and the bounded search: about the same cost a pair), and the
    deep search of a pair they leave (orders of magnitude dearer, and most of a long call).

    ``classified`` of ``total`` pairs are classified in ``classify_s`` seconds and have left
    ``deferred`` pairs to the deep search, of which ``searched`` are searched, in ``search_s``
    seconds; the pairs still to classify leave as many to search, in proportion. None while
    nothing is classified, or while pairs wait for a deep search and none is done yet (its
    cost is then unknown).

    >>> pairs_time_left(1000, 250, 50, 10, 1.0, 2.0)   # 3 s to classify, 190 searches at 0.2 s
    41.0
    >>> pairs_time_left(1000, 250, 50, 0, 1.0, 0.0) is None
    True
    """
    if classified <= 0:
        return None
    to_classify = total - classified
    to_search = deferred + to_classify * deferred / classified - searched
    left = to_classify * classify_s / classified
    if to_search > 0:
        if searched <= 0:
            return None
        left += to_search * search_s / searched
    return left


class PairsProgress(Progress):
    """Progress of a query call of ``total`` pairs, with its time left from
    :func:`pairs_time_left`: the caller times each kind of work with :meth:`phase` and reports
    with :meth:`classified` and :meth:`searched`. The line says how much of the work (by the
    estimated time) is done, the pairs answered and the deep searches done; while no deep
    search has ended, it says how many pairs wait for one instead of guessing."""

    def __init__(self, what: str, total: int, **kw):
        super().__init__(what, total, unit="pairs", **kw)
        self.n_classified = self.n_deferred = self.n_searched = 0
        self._seconds = {"classify": 0.0, "search": 0.0}
        self._running = None                # (kind, start, compile seconds then)

    @contextlib.contextmanager
    def phase(self, kind: str):
        """Time a stretch of ``kind`` work (``"classify"`` or ``"search"``), the compiler's
        time left out."""
        self._running = (kind, time.perf_counter(), COMPILING.seconds())
        try:
            yield
        finally:
            self._seconds[kind] = self.seconds(kind)
            self._running = None

    def seconds(self, kind: str) -> float:
        """Seconds of ``kind`` work so far, the running stretch included."""
        done = self._seconds[kind]
        running = self._running
        if running is not None and running[0] == kind:
            done += max(time.perf_counter() - running[1] - (COMPILING.seconds() - running[2]),
                        0.0)
        return done

    def classified(self, pairs: int, deferred: int) -> None:
        """``pairs`` pairs classified so far, ``deferred`` of them left to the deep search."""
        self.n_classified, self.n_deferred = int(pairs), int(deferred)
        self.update(self.n_classified - self.n_deferred + self.n_searched)

    def searched(self, pairs: int) -> None:
        """``pairs`` deep searches done so far."""
        self.n_searched = int(pairs)
        self.update(self.n_classified - self.n_deferred + self.n_searched)

    def left(self, elapsed: float) -> float | None:
        return pairs_time_left(self.total, self.n_classified, self.n_deferred, self.n_searched,
                               self.seconds("classify"), self.seconds("search"))

    def _text(self, elapsed: float, final: bool) -> tuple[str, float | None]:
        if final or not self.n_deferred:
            return super()._text(elapsed, final)
        compiling = self.compile_seconds()
        waited = f" ({compiling:.1f} s of it compiling)" if compiling >= 0.1 else ""
        answered = f"{self.done:,}/{self.total:,} pairs answered"
        left = self.left(elapsed)
        if left is None:
            waiting = self.n_deferred - self.n_searched
            return (f"{self.what}: {answered} ({waiting:,} waiting for the deep search), "
                    f"{elapsed:.1f} s{waited}", self.done / max(self.total, 1))
        spent = self.seconds("classify") + self.seconds("search")
        frac = spent / (spent + left) if spent + left > 0 else 1.0
        expected = round(self.n_deferred * self.total / max(self.n_classified, 1))
        return (f"{self.what}: ~{frac:.0%} of the work, {answered} (deep search "
                f"{self.n_searched:,}/~{expected:,}), {elapsed:.1f} s{waited}, "
                f"~{left:.0f} s left", frac)


class _Clock:
    """One daemon thread, started on first use, that redraws every open ticking
    :class:`Progress` when it is due; it sleeps while none is open. (A thread per build
    would cost more than a small build itself.)"""

    PERIOD = 0.1

    def __init__(self):
        self._open: set = set()
        self._cond = threading.Condition()
        self._thread = None

    def add(self, line: Progress) -> None:
        with self._cond:
            self._open.add(line)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="grail-progress",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, line: Progress) -> None:
        with self._cond:
            self._open.discard(line)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._open:
                    self._cond.wait()
                lines = list(self._open)
            now = time.perf_counter()
            for line in lines:
                line._tick(now)
            time.sleep(self.PERIOD)


_CLOCK = _Clock()


def step(what: str, **kw) -> Progress:
    """One step of long work of unknown size, as a context manager: after 2 s a line shows
    ``what`` and the elapsed time, kept moving until the step ends.

    >>> import io
    >>> out = io.StringIO()
    >>> with step("reading edges.tsv", after=0, stream=out, enabled=True):
    ...     pass
    >>> out.getvalue().startswith("reading edges.tsv")
    True
    """
    return Progress(what, None, tick=True, **kw)


class BuildProgress(Progress):
    """The ``progress(phase, seconds)`` callback of :func:`grail_duckdb.build_index` as one
    progress line: ``building the index: phase 4/10 done (scc 3.10 s), 6.2 s``, ticking
    while a long phase runs. Use it as a context manager (it must be closed)."""

    def __init__(self, what: str = "building the index", phases: int = BUILD_PHASES, **kw):
        super().__init__(what, phases, eta=False, tick=True, **kw)

    def __call__(self, phase: str, seconds: float) -> None:
        self.update(min(self.done + 1, self.total), detail=f"{phase} {seconds:.2f} s")


@contextlib.contextmanager
def build_progress(progress=None, what: str = "building the index",
                   phases: int = BUILD_PHASES):
    """The phase callback a build reports to, for the ``progress`` argument of
    :func:`grail_duckdb.build_index`: None (the default) gives a :class:`BuildProgress` line
    on stderr for builds over 2 s (of ``phases`` phases), False nothing, a callable itself."""
    if progress is False:
        yield None
    elif progress is None or progress is True:
        with BuildProgress(what, phases) as line:
            yield line
    else:
        yield progress
