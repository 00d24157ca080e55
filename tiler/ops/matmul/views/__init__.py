"""Matmul's export targets: CATLASS (Atlas A2), AscendC's TCubeTiling and the project's Triton kernel.

Each target (tiler.target.Target) is a constraint on the search space, not a view computed afterwards: `DOMAINS`
pins the knobs to what the code generator can express, `rules` are its compile-time checks as masks over
candidates (the search sees them beside the capacity rules), `view` writes what the generator takes, `check`
re-derives the same rules from a view alone (what `tiler check` runs on a file, independently of the search's
masks, so a test can catch either being wrong) and `emit` prints the code a user pastes. docs/targets/*.md
describe each target, with what it cannot express.

One module a target, each with its schema beside its view: `catlass`, `ascendc`, `triton`; `shared` holds what
they have in common. This package re-exports their public names (and `_header`, `_indent`, which others use), so
`tiler.ops.matmul.views.X` reads as before.
"""

from __future__ import annotations

from .ascendc import (  # noqa: F401
    ASCENDC,
    ASCENDC_API_CHOSEN,
    ASCENDC_DOCS_SNAPSHOT,
    ASCENDC_DOMAINS,
    ASCENDC_INCLUDES,
    ASCENDC_NATIVE_NAMES,
    ASCENDC_RULES,
    ASCENDC_TEXT,
    TCUBE_FIELDS,
    TCUBE_SCHEMA,
    ascendc_api_form,
    ascendc_entry,
    ascendc_masks,
    ascendc_native,
    ascendc_supports,
    check_tcube,
    emit_ascendc,
    tcube_view,
)
from .catlass import (  # noqa: F401
    ATLAS_A2,
    CATLASS,
    CATLASS_DOMAINS,
    CATLASS_INCLUDES,
    CATLASS_NATIVE_NAMES,
    CATLASS_RULES,
    CATLASS_SCHEMA,
    CATLASS_SNAPSHOT,
    CATLASS_TEXT,
    catlass_entry,
    catlass_launcher,
    catlass_masks,
    catlass_native,
    catlass_splitk_factor,
    catlass_supports,
    catlass_view,
    check_catlass,
    emit_catlass,
)
from .shared import (  # noqa: F401
    CPP_BYTES,
    CPP_ELEMENT,
    CPP_OUTPUT,
    _header,
    _indent,
)
from .triton import (  # noqa: F401
    TRITON,
    TRITON_KERNELS,
    TRITON_KWARGS,
    TRITON_SCHEMA,
    check_triton,
    emit_triton,
    triton_supports,
    triton_view,
)
