"""Progress of long work (builds, large query calls): a line on stderr, only for long work.

Nothing is shown for work that finishes within ``after`` seconds (2 by default), so everyday
calls stay silent. On a terminal the line is redrawn in place (a bar); elsewhere (logs, DuckDB
sessions) a plain line is written at most every few seconds. ``GRAIL_DUCKDB_PROGRESS=0``
silences every progress line; ``=1`` shows them from the start.

>>> import io
>>> out = io.StringIO()
>>> with Progress("answering", 4, unit="pairs", after=0, stream=out, enabled=True) as p:
...     p.update(4)
>>> "answering" in out.getvalue() and "4/4 pairs" in out.getvalue()
True
"""
from __future__ import annotations

import os
import sys
import time

ENV_VAR = "GRAIL_DUCKDB_PROGRESS"


def enabled_by_default() -> bool | None:
    """The environment's choice: False when silenced, True when forced, None to decide by time."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("0", "off", "false", "no"):
        return False
    if value in ("1", "on", "true", "yes"):
        return True
    return None


class Progress:
    """Progress of ``total`` units of work called ``what``; :meth:`update` with the units done.

    The line appears once the work has run for ``after`` seconds, is redrawn at most every
    0.2 s on a terminal (every 5 s elsewhere) and ends with the elapsed time on :meth:`close`.
    """

    def __init__(self, what: str, total: int, *, unit: str = "", after: float = 2.0,
                 stream=None, enabled: bool | None = None):
        self.what, self.total, self.unit = what, max(int(total), 0), unit
        self.stream = stream if stream is not None else sys.stderr
        env = enabled_by_default()
        self.enabled = env if enabled is None else (enabled and env is not False)
        self.after = 0.0 if env is True else after
        self.start = time.perf_counter()
        self.done = 0
        self._shown = False
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, done: int) -> None:
        """Record that ``done`` units (in all) are finished; maybe redraw the line."""
        self.done = int(done)
        if self.enabled is False:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        if elapsed < self.after:
            return
        if now - self._last >= (0.2 if self._tty else 5.0) or self.done >= self.total:
            self._draw(elapsed)
            self._last = now

    def _draw(self, elapsed: float, final: bool = False) -> None:
        frac = self.done / self.total if self.total else 1.0
        unit = f" {self.unit}" if self.unit else ""
        text = f"{self.what}: {frac:4.0%} {self.done:,}/{self.total:,}{unit}, {elapsed:.1f} s"
        if 0 < frac < 1 and not final:
            text += f", ~{elapsed * (1 - frac) / frac:.0f} s left"
        if self._tty:
            width = 24
            filled = int(round(frac * width))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
            if final:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line (only if it was ever shown)."""
        if self._shown or (self.enabled is not False
                           and time.perf_counter() - self.start >= self.after > 0):
            self._draw(time.perf_counter() - self.start, final=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
