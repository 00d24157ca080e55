"""`--measure triton` for rmsnorm: time an exported tiling with the Triton kernels (triton_kernels.run).

torch and triton are optional (`pip install 'tiler-rmsnorm[gpu]'`) and imported only when a measurement runs; without
them (or without a GPU) a measurement fails with one line (tiler's MeasureError), which fails that trial only.
"""

from __future__ import annotations

from .problem import RMSNorm


def tiling_from_doc(doc: dict) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of rmsnorm."""
    from tiler.errors import TilerError

    from .cuda import KNOBS

    if doc.get("op") != RMSNorm.OP:
        raise TilerError(f"runner: expected a {RMSNorm.OP} tiling, got op {doc.get('op')!r}")
    shape = doc["problem"]["shape"]
    fields = {k: int(shape[k]) for k in RMSNorm.FIELDS}
    cfg = {k: int(doc["tiling"][k]) for k in KNOBS}
    return fields, cfg, str(doc["problem"]["dtype"])


def measure_document(doc: dict) -> float:
    """The median time in microseconds of a tiling document; a missing GPU stack, a kernel that does not compile or
    launch, or a wrong result raises MeasureError (one line)."""
    from tiler.runners.external import MeasureError

    problem, cfg, dtype = tiling_from_doc(doc)
    try:
        from . import triton_kernels

        res = triton_kernels.run(problem, cfg, dtype=dtype)
    except ImportError as exc:
        raise MeasureError(
            f"triton: the GPU stack is missing ({exc}): pip install 'tiler-rmsnorm[gpu]'"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile, launch or verify fails this trial only
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasureError(f"triton: {type(exc).__name__}: {first[:200]}") from None
    return float(res["ms"]) * 1e3
