"""One GEMM launch to profile with Nsight Compute (GPU machine): the runner's kernel for one tiling, run once to
compile, then the launch ncu profiles (--launch-skip 1 --launch-count 1); prints the compiled kernel's registers and
shared memory.

    ncu --kernel-name regex:_gemm_tile_kernel --launch-skip 1 --launch-count 1 --section ... \
        python -m bench.gpu.matmul_ncu M N K BLOCK_M BLOCK_N BLOCK_K num_stages num_warps [GROUP_M ORDER]

`profile()` runs that command for one tiling with a list of metrics and returns the values (bench/archive/stage_probe.py,
bench/archive/matmul_power.py); `known_metrics()` drops the names this ncu does not know; `write_rows()` writes rows as CSV.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def known_metrics(metrics: list[str]) -> list[str]:
    """`metrics` less those this ncu does not know on the GH100 (an unknown name fails the whole command)."""
    res = subprocess.run(
        ["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True, text=True, timeout=120
    )
    names = {ln.split()[0] for ln in res.stdout.splitlines() if ln.strip()}
    return [m for m in metrics if m.split(".")[0] in names]


def profile(M: int, N: int, K: int, knobs: tuple, metrics: list[str]) -> dict | str:
    """Nsight Compute (`--clock-control none`) on the second launch of one tiling: {metric: value as printed,
    thousands separators removed}, or the reason (one line) when ncu printed no row. `knobs` are BLOCK_M, BLOCK_N,
    BLOCK_K, num_stages, num_warps, GROUP_M, ORDER."""
    cmd = ["ncu", "--kernel-name", "regex:_gemm_tile_kernel", "--launch-skip", "1", "--launch-count", "1"]
    cmd += ["--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--page", "raw"]
    cmd += [sys.executable, "-m", "bench.gpu.matmul_ncu", *map(str, (M, N, K, *knobs))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return f"no rows (rc {res.returncode}): {res.stderr[-300:]} {res.stdout[-300:]}".replace("\n", " ")
    head, _units, values = list(csv.reader(io.StringIO("\n".join(lines))))[:3]
    return {h: v.replace(",", "") for h, v in zip(head, values, strict=False) if h in metrics}


def write_rows(path: Path, rows: list[dict]) -> None:
    """Rows (dicts) as a CSV with the union of their keys, in first-seen order; nothing when there are none."""
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    from tiler.ops.matmul.triton_runner import Problem, _plan

    M, N, K, bm, bn, bk, st, w = (int(x) for x in sys.argv[1:9])
    group, order = (int(x) for x in sys.argv[9:11]) if len(sys.argv) > 10 else (1, 0)
    cfg = dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=st, num_warps=w, GROUP_M=group, ORDER=order, SPLIT_K=1
    )
    prob = Problem(M, N, K, reference=False)
    fn, _ = _plan(prob.a, prob.b, cfg)
    for _ in range(2):
        fn()
    import torch

    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
