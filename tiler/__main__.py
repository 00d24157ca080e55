"""`python -m tiler ...`: the same command line as `tiler ...`."""

import sys

from .cli import main

sys.exit(main())
