"""A one-line progress report on stderr for long runs: done/total, rate, ETA.

It draws only on a terminal (stderr is a TTY) and not with `quiet`, so logs, pipes and CI output stay clean.
Redraws are throttled; `close()` ends the line. Nothing here knows about sweeps: callers say how much is done.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """`Progress(total, label="sweep")`; `.update(n)` after each unit; `.close()` at the end.

    Args:
        total: units expected in all (rows of a sweep).
        done: units already done before this run started (resumed rows): shown, but not counted in the rate.
        enabled: force on/off; default: on when `stream` is a TTY and not `quiet`.
        interval_s: the shortest time between two redraws.
    """

    def __init__(
        self,
        total: int,
        label: str = "items",
        done: int = 0,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        quiet: bool = False,
        interval_s: float = 0.2,
    ):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and not quiet
        self.enabled = enabled
        self.total, self.done, self.label = int(total), int(done), label
        self._start_done = self.done
        self._t0 = time.monotonic()
        self._last = 0.0
        self._interval = interval_s
        self._width = 0

    @property
    def rate(self) -> float:
        """Units per second counted from this run's start (resumed units excluded)."""
        dt = time.monotonic() - self._t0
        return (self.done - self._start_done) / dt if dt > 0 else 0.0

    def text(self) -> str:
        rate = self.rate
        left = self.total - self.done
        eta = left / rate if rate > 0 else float("inf")
        pct = f"{100.0 * self.done / self.total:5.1f}%" if self.total else "  -  "
        return f"{self.label} {self.done}/{self.total} ({pct})  {rate:.2f}/s  ETA {_clock(eta) if left else '00:00'}"

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= self._interval or self.done >= self.total:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        line = self.text()
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line (only if anything was drawn)."""
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
