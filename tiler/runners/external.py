"""Measure a tiling with an external command: the measured objective of `tiler search --measure CMD`.

The command template holds `{tiling}`; it is replaced by the (shell-quoted) path of a temporary file that holds
the `tiler.tiling/v1` document (`tiler.export.tiling_document`). The command runs through the shell, in its own
process group (a timeout kills the whole group, not only the shell), and must print the kernel time in
microseconds as the last non-empty line of stdout. Anything else — a non-zero exit, a timeout, a last line that
is not a positive number — raises `MeasureError` with the reason in one line.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import tempfile
from pathlib import Path

from ..errors import TilerError

PLACEHOLDER = "{tiling}"


class MeasureError(TilerError):
    """One measurement failed (crash, timeout, garbage output): the trial fails, the search goes on."""


def check_template(cmd_template: str) -> None:
    """Raise TilerError if the command cannot be a measurement command (checked once, before any trial)."""
    if not isinstance(cmd_template, str) or not cmd_template.strip():
        raise TilerError("measure: needs a command, e.g. 'python3 bench.py {tiling}', or 'triton'")
    if PLACEHOLDER not in cmd_template:
        raise TilerError(
            f"measure: the command must contain {PLACEHOLDER} (the path of the tiling JSON), "
            f"got {cmd_template!r}"
        )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def measure(cmd_template: str, tiling_doc: dict, timeout: float = 120.0) -> float:
    """Run the command on one tiling and return its time in microseconds (the last stdout line)."""
    check_template(cmd_template)
    fd, name = tempfile.mkstemp(prefix="tiler-tiling-", suffix=".json")
    path = Path(name)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(tiling_doc, f, indent=2)
        cmd = cmd_template.replace(PLACEHOLDER, shlex.quote(str(path)))
        proc = subprocess.Popen(
            cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise MeasureError(f"measurement timed out after {timeout:g} s") from None
        if proc.returncode != 0:
            why = _last_line(err) or _last_line(out) or "no output"
            raise MeasureError(f"measurement command exited with status {proc.returncode}: {why}")
        last = _last_line(out)
        if not last:
            raise MeasureError("measurement printed nothing on stdout (expected the time in microseconds)")
        try:
            us = float(last)
        except ValueError:
            raise MeasureError(
                f"measurement output is not a number of microseconds: last stdout line {last[:80]!r}"
            ) from None
        if not math.isfinite(us) or us <= 0:
            raise MeasureError(f"measurement output is not a positive number of microseconds: {last[:80]!r}")
        return us
    finally:
        path.unlink(missing_ok=True)


__all__ = ["MeasureError", "check_template", "measure"]
