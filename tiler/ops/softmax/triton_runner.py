"""`--measure triton` for softmax: time an exported tiling with the Triton kernels (triton_kernels.run).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ..triton_measure import DocumentRunner
from .problem import Softmax

RUNNER = DocumentRunner(Softmax, knobs=f"{__package__}.cuda:KNOBS", time=f"{__package__}.triton_kernels:run")
tiling_from_doc = RUNNER.tiling_from_doc
measure_document = RUNNER.measure_document
