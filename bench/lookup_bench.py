"""Library look-up speed: `tiler.lookup` (no model imported) against `tiler.library` (full problem classes).

    python -m bench.lookup_bench [--chip ascend910b3] [--entries 1000] [--queries 1000] [--seed 0]

1. A real library: `tiler sweep` of examples/shapes/llama3_8b.csv on the chip (exhaustive, proven optima).
2. A large library for the scan: that library's first entry cloned under `--entries` random shapes (M, N, K
   log-uniform in 16..16384, batch 1 or 8, fp16 or bf16, layout nn or nt), tilings copied: for timing only.
3. `--queries` random queries, each an entry's problem with M, N and K moved by up to 4x either way (nine in
   ten: nearest answers) or kept (exact keys), answered (the first answers build the indexes: timed too) by
   one loaded `tiler.lookup.Library` in this process (the issue's target: 1,000 in under 1 s), and by
   `tiler.library.Library` (query parsed by the operator's problem class, then the same matcher); both must give
   the same key for every query.
4. Fresh interpreters (median of 5): `import tiler.lookup` + load + one answer, against `tiler.library`, and
   the modules each leaves imported (numpy, pandas, optuna, jsonschema, the operator models); one
   `tiler lookup` command line, wall time.
Prints the figures and the ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def real_library(chip: str, folder: Path) -> Path:
    from tiler.sweep import run_sweep

    lib = folder / "real.json"
    run_sweep(
        str(ROOT / "examples/shapes/llama3_8b.csv"), "matmul", chip, folder / "o.csv", library=lib, quiet=True
    )
    return lib


def big_library(real: Path, n: int, rng: random.Random, folder: Path) -> Path:
    doc = json.loads(real.read_text())
    proto = doc["entries"][0]
    entries, seen = [], set()
    while len(entries) < n:
        s = random_shape(rng)
        key = key_of(s)
        if key in seen:
            continue
        seen.add(key)
        e = json.loads(json.dumps(proto))
        e["key"] = key
        e["problem"]["shape"] = {k: s[k] for k in ("M", "N", "K", "batch", "layout", "b_format")}
        e["problem"]["dtype"] = s["dtype"]
        e["problem"]["layout"] = s["layout"]
        entries.append(e)
    doc["entries"] = entries
    path = folder / "big.json"
    path.write_text(json.dumps(doc))
    return path


def random_shape(rng: random.Random) -> dict:
    def dim():
        return int(round(2 ** rng.uniform(4, 14)))

    return {
        "M": dim(),
        "N": dim(),
        "K": dim(),
        "batch": rng.choice([1, 8]),
        "layout": rng.choice(["nn", "nt"]),
        "b_format": "nd",
        "dtype": rng.choice(["fp16", "bf16"]),
    }


def key_of(s: dict) -> str:
    lay = "" if s["layout"] == "nn" else f",layout={s['layout']}"
    return f"matmul:M={s['M']},N={s['N']},K={s['K']},batch={s['batch']}{lay}:{s['dtype']}"


def queries(path: Path, n: int, rng: random.Random) -> list[dict]:
    entries = json.loads(path.read_text())["entries"]
    out = []
    for i in range(n):
        e = rng.choice(entries)
        q = {**e["problem"]["shape"], "dtype": e["problem"]["dtype"]}
        if i % 10:  # nine in ten: M, N and K each moved by up to 4x either way (nearest); else the exact key
            q.update({k: max(1, int(q[k] * 2 ** rng.uniform(-2, 2))) for k in ("M", "N", "K")})
        out.append(q)
    return out


def timed(lib, qs) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    keys = [lib.lookup(q)["key"] for q in qs]
    return time.perf_counter() - t0, keys


SNIPPET = """
import sys, time
t0 = time.perf_counter()
import {mod} as L
lib = L.load({path!r})
hit = lib.lookup("M=300,N=4096,K=4096", dtype="bf16")
dt = time.perf_counter() - t0
heavy = [m for m in ("numpy", "pandas", "optuna", "jsonschema", "tiler.ops", "tiler.model.common")
         if m in sys.modules]
print(dt, ",".join(heavy) or "-")
"""


def fresh(mod: str, path: Path, runs: int = 5) -> tuple[float, str]:
    times, heavy = [], ""
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", SNIPPET.format(mod=mod, path=str(path))],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.split()
        times.append(float(out[0]))
        heavy = out[1]
    return statistics.median(times), heavy


def cli_wall(path: Path, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tiler",
                "lookup",
                "--library",
                str(path),
                "--shape",
                "M=300,N=4096,K=4096",
                "--dtype",
                "bf16",
            ],
            capture_output=True,
            check=True,
            cwd=ROOT,
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chip", default="ascend910b3")
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    import tiler.library as full
    import tiler.lookup as fast

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        real = real_library(a.chip, folder)
        big = big_library(real, a.entries, rng, folder)
        print(
            f"libraries: real {a.chip} sweep of llama3_8b ({len(fast.load(real))} entries), "
            f"synthetic {a.entries} entries (tilings cloned, timing only)"
        )
        for name, path in (("real", real), ("synthetic", big)):
            load_fast = load_full = math.inf
            for _ in range(3):  # best of 3 (the first read of the file pays the page cache)
                t0 = time.perf_counter()
                lf = fast.load(path)
                load_fast = min(load_fast, time.perf_counter() - t0)
                t0 = time.perf_counter()
                lfull = full.load(path)
                load_full = min(load_full, time.perf_counter() - t0)
            qs = queries(path, a.queries, rng)
            t_fast, k_fast = timed(lf, qs)
            t_full, k_full = timed(lfull, qs)
            same = sum(x == y for x, y in zip(k_fast, k_full, strict=True))
            exact = sum(k == fast.Library.parse(lf, q)[2] for k, q in zip(k_fast, qs, strict=True))
            print(f"\n[{name}] {len(lf)} entries, {len(qs)} queries ({exact} exact hits)")
            print(
                f"  load (best of 3): tiler.lookup {load_fast * 1e3:8.1f} ms   tiler.library {load_full * 1e3:8.1f} ms "
                f"(JSON Schema validation)"
            )
            print(
                f"  {len(qs)} queries:     tiler.lookup {t_fast:8.3f} s    tiler.library {t_full:8.3f} s   "
                f"ratio {t_full / t_fast:5.1f}x; target < 1 s: {'met' if t_fast < 1 else 'NOT met'}"
            )
            print(
                f"  per query:        tiler.lookup {t_fast / len(qs) * 1e6:8.1f} us   "
                f"tiler.library {t_full / len(qs) * 1e6:8.1f} us"
            )
            print(f"  same answers:     {same}/{len(qs)}")
        t_lk, heavy_lk = fresh("tiler.lookup", real)
        t_lib, heavy_lib = fresh("tiler.library", real)
        print("\nfresh interpreter, import + load + one answer (median of 5):")
        print(f"  tiler.lookup  {t_lk * 1e3:7.1f} ms   imports of note: {heavy_lk}")
        print(
            f"  tiler.library {t_lib * 1e3:7.1f} ms   imports of note: {heavy_lib}   ratio {t_lib / t_lk:4.1f}x"
        )
        print(
            f"`tiler lookup` command line, wall (median of 3): {cli_wall(real) * 1e3:.0f} ms "
            f"(the CLI imports click and its other commands)"
        )


if __name__ == "__main__":
    main()
