"""`--measure triton` for softmax: time an exported tiling with the Triton kernels (triton_kernels.run).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ..triton_measure import measured_us
from ..triton_measure import tiling_from_doc as _from_doc
from .problem import Softmax


def tiling_from_doc(doc: dict) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of softmax."""
    from .cuda import KNOBS

    return _from_doc(doc, Softmax, KNOBS)


def measure_document(doc: dict) -> float:
    """The median time in microseconds of a tiling document (a failure fails this trial only)."""

    def run():
        from . import triton_kernels

        problem, cfg, dtype = tiling_from_doc(doc)
        return triton_kernels.run(problem, cfg, dtype=dtype)

    return measured_us(run)
