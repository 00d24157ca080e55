"""What every operator's `--measure triton` runner shares: reading an exported document and turning any failure of
the GPU stack or the kernel into a MeasureError that fails one trial only."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import TilerError


def tiling_from_doc(doc: dict, problem_cls, knobs) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of `problem_cls.OP`."""
    if doc.get("op") != problem_cls.OP:
        raise TilerError(f"runner: expected a {problem_cls.OP} tiling, got op {doc.get('op')!r}")
    shape = doc["problem"]["shape"]
    fields = {k: shape[k] for k in (*problem_cls.FIELDS, *problem_cls.OPTIONAL) if k in shape}
    fields = {k: (v if k in getattr(problem_cls, "CHOICES", {}) else int(v)) for k, v in fields.items()}
    cfg = {k: doc["tiling"][k] for k in knobs}
    return fields, cfg, str(doc["problem"]["dtype"])


def measured_us(run: Callable[[], dict]) -> float:
    """Run a timing (returns {"ms": ...}) and give microseconds; a missing GPU stack, a kernel that does not compile
    or launch, or a wrong result raises MeasureError (tiler.runners.external), which fails this trial only."""
    from ..runners.external import MeasureError

    try:
        res = run()
    except ImportError as exc:
        raise MeasureError(f"triton: the GPU stack is missing ({exc}): pip install 'tiler[gpu]'") from None
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile or launch fails this trial only
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasureError(f"triton: {type(exc).__name__}: {first[:200]}") from None
    return float(res["ms"]) * 1e3
