"""`--measure triton` for softmax: time an exported tiling with the Triton kernels (triton_kernels.run).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ...errors import TilerError
from .problem import Softmax


def tiling_from_doc(doc: dict) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of softmax."""
    if doc.get("op") != "softmax":
        raise TilerError(f"runner: expected a softmax tiling, got op {doc.get('op')!r}")
    from .cuda import KNOBS

    shape = doc["problem"]["shape"]
    problem = {k: int(shape[k]) for k in (*Softmax.FIELDS, *Softmax.OPTIONAL)}
    cfg = {k: doc["tiling"][k] for k in KNOBS}
    return problem, cfg, str(doc["problem"]["dtype"])


def measure_document(doc: dict) -> float:
    """The median time in microseconds of a tiling document; any failure (no GPU stack, a kernel that does not
    compile or launch, a wrong result) is a MeasureError that fails this trial only."""
    from ...runners.external import MeasureError

    try:
        from . import triton_kernels

        problem, cfg, dtype = tiling_from_doc(doc)
        res = triton_kernels.run(problem, cfg, dtype=dtype)
    except ImportError as exc:
        raise MeasureError(f"triton: the GPU stack is missing ({exc}): pip install 'tiler[gpu]'") from None
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile or launch fails this trial only
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasureError(f"triton: {type(exc).__name__}: {first[:200]}") from None
    return float(res["ms"]) * 1e3
