"""`--measure triton` for flash_attention: time an exported tiling with the project's kernel (triton_kernels).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ..triton_measure import measured_us
from ..triton_measure import tiling_from_doc as _from_doc
from .problem import FlashAttention


def tiling_from_doc(doc: dict) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of flash_attention."""
    from .triton_kernels import KNOBS

    return _from_doc(doc, FlashAttention, KNOBS)


def measure_document(doc: dict) -> float:
    """The median time in microseconds of a tiling document (a failure fails this trial only)."""

    def run():
        from . import triton_kernels

        problem, cfg, dtype = tiling_from_doc(doc)
        if triton_kernels.triton is None:
            raise ImportError("triton")
        return triton_kernels.time_config(problem, cfg, dtype=dtype)

    return measured_us(run)
