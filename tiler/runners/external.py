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
import time
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
        try:
            proc.kill()
        except OSError:
            pass


TAIL_BYTES = 64 * 1024  # what is kept of each of stdout and stderr (the end: the time is the last line)
DRAIN_S = 2.0  # after the command ends, how long its pipes may stay open (a background child holding them)


def _drain(pipe, keep: bytearray) -> None:
    """Read a pipe to EOF, keeping only its last TAIL_BYTES: a flood never fills memory or blocks the child."""
    try:
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                return
            keep += chunk
            if len(keep) > 2 * TAIL_BYTES:
                del keep[: len(keep) - TAIL_BYTES]
    except (OSError, ValueError):
        return


def _text(data: bytearray) -> str:
    """Bytes as text, whatever they hold (binary garbage becomes replacement characters, never an exception)."""
    return bytes(data[-TAIL_BYTES:]).decode("utf-8", errors="replace").replace("\x00", "")


def _join_all(threads, seconds: float) -> None:
    """Join `threads` within `seconds` in all (not `seconds` each: two pipes a leftover grandchild holds would
    otherwise make tiler wait twice DRAIN_S)."""
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))


def _run(cmd: str, timeout: float) -> tuple[int, str, str]:
    """Run `cmd` in its own process group; (returncode, stdout tail, stderr tail); MeasureError on timeout.

    Both pipes are read by threads while the command runs, so a command that floods either never blocks on a
    full pipe and never makes tiler wait past `timeout` (+ DRAIN_S for pipes a leftover grandchild holds)."""
    import threading

    proc = subprocess.Popen(
        cmd,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    bufs = (bytearray(), bytearray())
    readers = [
        threading.Thread(target=_drain, args=(pipe, buf), daemon=True)
        for pipe, buf in zip((proc.stdout, proc.stderr), bufs, strict=True)
    ]
    for r in readers:
        r.start()
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            raise MeasureError(f"measurement timed out after {timeout:g} s") from None
        _join_all(readers, DRAIN_S)  # one grace period for both pipes, not one after the other
        if any(r.is_alive() for r in readers):
            _kill_group(proc)  # something the command left behind still holds its output: stop it
            _join_all(readers, DRAIN_S)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
    return proc.returncode, _text(bufs[0]), _text(bufs[1])


def measure(cmd_template: str, tiling_doc: dict, timeout: float = 120.0) -> float:
    """Run the command on one tiling and return its time in microseconds (the last stdout line)."""
    check_template(cmd_template)
    try:
        timeout = float(timeout)
    except (TypeError, ValueError):
        timeout = math.nan
    if not math.isfinite(timeout) or timeout <= 0:
        raise TilerError(f"measure: the timeout must be a finite number of seconds > 0, got {timeout!r}")
    fd, name = tempfile.mkstemp(prefix="tiler-tiling-", suffix=".json")
    path = Path(name)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(tiling_doc, f, indent=2)
        cmd = cmd_template.replace(PLACEHOLDER, shlex.quote(str(path)))
        try:
            code, out, err = _run(cmd, timeout)
        except OSError as exc:
            raise MeasureError(f"measurement command could not start: {exc}") from None
        if code != 0:
            why = _last_line(err) or _last_line(out) or "no output"
            raise MeasureError(f"measurement command exited with status {code}: {why[:200]}")
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
