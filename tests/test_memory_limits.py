"""Memory bounds that refuse up front (issue 31): a calibration whose rows would pass CALIBRATE_BYTES_MAX is one
line and exit 2 before anything is fitted; a normal one is not. The figures (peak RSS) live in bench.memory_scale
and docs, never in assertions here."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tiler.calibrate import CALIBRATE_BYTES_MAX, CALIBRATE_OVERHEAD, load_measurements
from tiler.hardware import load_chip

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "h200_matmul_cal.csv"


def _calibrate(measurements: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tiler", "calibrate", "--chip", "h200", "--op", "matmul"]
    return subprocess.run(
        [*cmd, "--measurements", str(measurements), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_calibration_over_the_memory_bound_is_refused_up_front_in_one_line(tmp_path):
    df = pd.read_csv(DATA)
    data = load_measurements(load_chip("h200"), "matmul", df)
    per_row = (
        sum(np.asarray(v).nbytes for v in data.prepared.values()) / len(data.seconds) * CALIBRATE_OVERHEAD
    )
    reps = math.ceil(CALIBRATE_BYTES_MAX / per_row / len(data.seconds)) + 2
    big = tmp_path / "big.csv"
    # the text pd.concat([df] * reps, ignore_index=True).to_csv(big, index=False) writes (each row's cells are
    # formatted alone), built from one copy's text: 15 MB written in 0.05 s instead of 1.9 s
    head, _, body = df.to_csv(index=False).partition("\n")
    big.write_text(f"{head}\n{body * reps}")
    res = _calibrate(big, tmp_path / "p.toml")
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert (
        "measurements" in lines[0]
        and "CALIBRATE_BYTES_MAX" in lines[0]
        and f"{CALIBRATE_BYTES_MAX >> 20} MiB" in lines[0]
    )
    assert not (tmp_path / "p.toml").exists()


def test_a_calibration_inside_the_bound_is_not_refused(tmp_path):
    df = pd.read_csv(DATA)
    small = tmp_path / "small.csv"
    df[df["M"].isin(sorted(df["M"].unique())[:2])].to_csv(small, index=False)
    res = _calibrate(small, tmp_path / "p.toml", "--folds", "0")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "CALIBRATE_BYTES_MAX" not in res.stderr and (tmp_path / "p.toml").exists()
