"""`python -m tiler.sweep ...`: the CLI's sweep command on its own (same options and exit codes as `tiler sweep`)."""

import sys

# it runs the importable tiler.sweep (pickled work for the pool or Dask refers to tiler.sweep, not __main__)
from tiler.cli import sweep_main as _main

sys.exit(_main())
