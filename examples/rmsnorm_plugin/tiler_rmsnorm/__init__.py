"""tiler-rmsnorm: RMSNorm as a tiler operator that lives outside tiler.

y[r, :] = x[r, :] / sqrt(mean(x[r, :]**2) + eps) * weight over the rows of a [rows, hidden] tensor (fp16, bf16,
fp32). Importing this package registers two operators with tiler (`@register`): `RMSNormAscend` (an AscendC kernel
on the vector cores) and `RMSNormCuda` (the Triton kernels of triton_kernels.py), whose knobs ship beside them in
rmsnorm.toml (`SPACE_FILE`). The entry point `rmsnorm = "tiler_rmsnorm"` in the group `tiler.operators`
(pyproject.toml) makes tiler import it, so once the package is installed `tiler ops` lists rmsnorm and
`tiler search --op rmsnorm` runs it. tiler's docs/operators.md, "An operator in another package", walks through it.
"""

from .ascend import RMSNormAscend
from .cuda import RMSNormCuda
from .problem import RMSNorm

__all__ = ["RMSNorm", "RMSNormAscend", "RMSNormCuda"]
