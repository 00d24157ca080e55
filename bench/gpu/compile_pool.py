"""What the GPU benches share besides the matmul bench's helpers (gpu_measure): the machine record, and a pool of
spawned processes that compile a kernel file's configs into Triton's on-disk cache before the timing starts.

A kernel file here is one loaded by path (no tiler import on the GPU machine) that has
`precompile(shape, cfg, dtype)` returning Triton's compiled kernel: tiler/ops/depthwise_conv/triton_kernels.py and
tiler/ops/softmax/triton_kernels.py.
"""

from __future__ import annotations

import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.gpu.gpu_measure import load_module, log, smi_state


def machine_info() -> dict:
    """The GPU, its driver, the library versions and the host's cores, for a run's `_env.json`."""
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    smi = smi_state()
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__,
        "gpu": p.name,
        "driver": smi.split(",")[1].strip() if smi and smi.count(",") >= 1 else None,
        "sm_count": p.multi_processor_count,
        "capability": f"{p.major}.{p.minor}",
        "memory_gib": round(p.total_memory / 2**30, 1),
        "l2_mb": round(getattr(p, "L2_cache_size", 0) / 1e6, 1) or None,
        "cpu_count": os.cpu_count(),
        "nvidia_smi": smi,
    }


_KERNELS: tuple[str, str] | None = None  # (module name, file) of the kernel file a worker compiles from


def _worker_init(name: str, path: str) -> None:
    global _KERNELS
    _KERNELS = (name, path)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    try:  # pay the imports and the CUDA context once per worker, not in the first task's compile time
        import torch

        load_module(name, Path(path))
        torch.empty(1, device="cuda")
    except Exception:  # noqa: BLE001 - the tasks report it
        pass


def _compile_one(task):
    idx, shape, cfg = task
    t = time.perf_counter()
    try:
        k = load_module(_KERNELS[0], Path(_KERNELS[1])).precompile(shape, cfg, shape["dtype"])
        regs = spills = shared = -1
        try:
            init = getattr(k, "_init_handles", None)
            if init is not None:
                init()
            regs, spills, shared = int(k.n_regs), int(k.n_spills), int(k.metadata.shared)
        except Exception:  # noqa: BLE001 - the resource report is optional
            pass
        return idx, True, "", time.perf_counter() - t, (regs, spills, shared)
    except Exception as e:  # noqa: BLE001 - reported; the main process skips the config
        msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return idx, False, msg[:300], time.perf_counter() - t, None


def precompile_all(tasks: list, jobs: int, deadline: float, kernels: tuple[str, Path]) -> tuple[dict, dict]:
    """Compile tasks [(idx, shape, cfg)] of the kernel file `kernels` = (module name, path) in `jobs` spawned
    processes until done or `deadline` (time.time()).

    Returns (stats, {idx: (ok, message, (registers, spilled, shared bytes) or None)})."""
    import multiprocessing as mp

    stats = {"tasks": len(tasks), "done": 0, "failed": 0, "seconds": [], "wall_s": 0.0, "cut": False}
    results: dict = {}
    if not tasks or jobs < 1:
        return stats, results
    t0 = time.time()
    pool = mp.get_context("spawn").Pool(
        jobs, initializer=_worker_init, initargs=(kernels[0], str(kernels[1]))
    )
    try:
        it = pool.imap_unordered(_compile_one, tasks, chunksize=1)
        while len(results) < len(tasks):
            left = deadline - time.time()
            if left <= 0:
                stats["cut"] = True
                log(f"[compile] deadline reached after {len(results)}/{len(tasks)}; the rest is not timed")
                break
            try:
                idx, ok, msg, sec, res = it.next(timeout=left)
            except mp.TimeoutError:
                continue
            results[idx] = (ok, msg, res)
            stats["seconds"].append(sec)
            stats["done" if ok else "failed"] += 1
            if not ok:
                log(f"[compile] task {idx}: {msg}")
            n = len(results)
            if n % 100 == 0 or n == len(tasks):
                log(f"[compile] {n}/{len(tasks)} in {time.time() - t0:.0f}s")
    finally:
        pool.terminate()
        pool.join()
    stats["wall_s"] = round(time.time() - t0, 1)
    return stats, results
