"""`python -m tiler.cli ...`: the same command line as `tiler ...`."""

import sys

from . import main

sys.exit(main())
