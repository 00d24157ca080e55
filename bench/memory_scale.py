"""Peak memory of a large sweep, a large report and a large calibration (issue 31's targets: a 10,000-row sweep and
a 100,000-row report each under 500 MB for the whole process tree, the report page a few MB; a calibration inside
tiler.calibrate.CALIBRATE_BYTES_MAX under 1 GB).

    python -m bench.memory_scale sweep     [--rows 10000] [--chip h200] [--jobs 2]
    python -m bench.memory_scale report    [--rows 100000]
    python -m bench.memory_scale calibrate [--rows 33600]

`sweep` writes random matmul shapes (seeded) and runs `tiler sweep` on them; `report` first sweeps 300 random shapes
on the h200, then repeats that table's rows to `--rows` rows with distinct M (so every row is its own problem) and
runs `tiler report` on it; `calibrate` repeats tests/data/h200_matmul_cal.csv to `--rows` rows and runs
`tiler calibrate --folds 4` on it (h200 matmul). Each samples the resident memory of the command and all its children (/proc, every
50 ms) and prints the peak sum, the wall time and the output's size. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its descendants (0 for a process that is gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def run_peak(cmd: list[str]) -> tuple[int, float, int]:
    """(peak tree RSS in bytes, seconds, exit code) of a command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.05)
    err = proc.stderr.read()
    if proc.returncode != 0:
        print(err[-2000:], file=sys.stderr)
    return peak, time.perf_counter() - t0, proc.returncode


def shapes_csv(path: Path, rows: int, seed: int = 0) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    dims = rng.integers(16, 8193, size=(rows, 3))
    path.write_text("M,N,K\n" + "".join(f"{m},{n},{k}\n" for m, n, k in dims))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("sweep", "report", "calibrate"))
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    tiler = [sys.executable, "-m", "tiler"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if a.what == "sweep":
            rows = a.rows or 10_000
            src = shapes_csv(tmp / "shapes.csv", rows)
            out = tmp / "sweep.csv"
            cmd = [*tiler, "sweep", str(src), "--op", "matmul", "--chip", a.chip, "--out", str(out)]
            peak, secs, rc = run_peak([*cmd, "--jobs", str(a.jobs), "--quiet"])
        elif a.what == "calibrate":
            import pandas as pd

            rows = a.rows or 33_600
            cal = pd.read_csv(
                Path(__file__).resolve().parent.parent / "tests" / "data" / "h200_matmul_cal.csv"
            )
            src = tmp / "cal.csv"
            pd.concat([cal] * -(-rows // len(cal)), ignore_index=True).head(rows).to_csv(src, index=False)
            out = tmp / "fitted.toml"
            cmd = [*tiler, "calibrate", "--chip", "h200", "--op", "matmul", "--measurements", str(src)]
            peak, secs, rc = run_peak([*cmd, "--out", str(out), "--folds", "4"])
        else:
            import numpy as np
            import pandas as pd

            rows = a.rows or 100_000
            base = tmp / "base.csv"
            rc = subprocess.run(
                [
                    *tiler,
                    "sweep",
                    str(shapes_csv(tmp / "s.csv", 300)),
                    "--op",
                    "matmul",
                    "--chip",
                    "h200",
                    "--out",
                    str(base),
                    "--quiet",
                ],  # fmt: skip
                capture_output=True,
            ).returncode
            assert rc in (0, 1), "the base sweep failed"
            df = pd.read_csv(base)
            big = df.sample(rows, replace=True, random_state=0).reset_index(drop=True)
            big["M"] = np.arange(16, 16 + rows)
            big["key"] = [
                f"matmul:M={m},N={n},K={k},batch=1:fp16" for m, n, k in zip(big.M, big.N, big.K, strict=True)
            ]
            src = tmp / "big.csv"
            big.to_csv(src, index=False)
            out = tmp / "big.html"
            peak, secs, rc = run_peak([*tiler, "report", str(src), "--out", str(out)])
        size = out.stat().st_size if out.exists() else 0
        print(
            f"{a.what} of {rows} rows: exit {rc}, peak RSS of the process tree {peak / 2**20:.0f} MiB, "
            f"{secs:.1f} s, output {size / 2**20:.1f} MiB"
        )


if __name__ == "__main__":
    main()
