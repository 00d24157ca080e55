"""The package's own tests: tiler's shipped conformance suite on both families (run them where the package is
installed: `pip install ./examples/rmsnorm_plugin && python -m pytest examples/rmsnorm_plugin/tests`)."""

import pytest

from tiler.testing import check_operator


@pytest.mark.parametrize("family", ["ascend", "cuda"])
def test_rmsnorm_passes_the_conformance_suite(family):
    check_operator("rmsnorm", family)
