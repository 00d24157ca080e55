"""A one-line progress bar on stderr for long runs (sweeps, TPE and measured searches): done/total, rate, ETA.

A thin layer over tqdm (installed with optuna): it draws only on a terminal (the stream is a TTY) and not with
`quiet`, so logs, pipes and CI output stay clean. Nothing here knows about sweeps or studies: callers say how much
is done.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TextIO

from tqdm import tqdm

# `sweep matmul 5/10 ( 50.0%) |#####     | 2.50row/s ETA 00:02, best 1.23 us`
BAR_FORMAT = "{desc} {n}/{total} ({percentage:5.1f}%) |{bar:20}| {rate_fmt} ETA {remaining}{postfix}"


def _width(stream) -> int:
    """The terminal's width (a terminal that says 0 columns, like some CI pseudo-terminals: 100)."""
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        cols = 0
    return cols if cols >= 20 else shutil.get_terminal_size((100, 24)).columns or 100


class Progress:
    """`Progress(total, label="sweep")`; `.update(n)` after each unit; `.close()` at the end (or `with`).

    Args:
        total: units expected in all (rows of a sweep, trials of a search).
        done: units already done before this run started (resumed rows or trials): shown, not in the rate.
        enabled: force on/off; default: on when `stream` is a TTY and not `quiet`.
        interval_s: the shortest time between two redraws.
        unit: what one unit is called in the rate (`row/s`, `trial/s`).
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
        unit: str = "it",
    ):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            try:
                enabled = bool(isatty and isatty()) and not quiet
            except (OSError, ValueError):  # a closed stream
                enabled = False
        self.enabled = bool(enabled)
        self.total, self.label = int(total), label
        self._bar = tqdm(
            total=self.total,
            initial=min(int(done), self.total),
            desc=label,
            unit=unit,
            file=self.stream,
            disable=not self.enabled,
            mininterval=interval_s,
            miniters=1,
            bar_format=BAR_FORMAT,
            ncols=_width(self.stream) if self.enabled else None,
            nrows=50,  # a terminal that says 0 lines would otherwise hide the bar
            leave=True,
        )
        self._done = int(done)

    @property
    def done(self) -> int:
        return self._done

    def update(self, n: int = 1) -> None:
        self._done += n
        if self.enabled and n:
            self._bar.update(n)

    def note(self, text: str) -> None:
        """A short status after the counts (`best 12.3 us`), shown at the next redraw."""
        if self.enabled:
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        """Draw the final state and end the line (only if anything was drawn)."""
        if self.enabled:
            self._bar.refresh()
            self.enabled = False
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
