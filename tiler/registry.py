"""The operator registry as the data layer sees it: problem classes and target domains looked up by name.

`tiler.problem.parse_problem` and `tiler.space.Space.for_target` need the registered operators, but the registry
(`tiler.operator`) sits above them and imports the operators. This module inverts that dependency: `tiler.operator`
installs its look-ups here when it is imported. A data-layer call made before anything imported the registry (a
script that parses a problem first) loads it by name, the same late binding as the entry-point plugins; loading a
chip profile or a space file never does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_LOOKUPS: dict[str, Callable[..., Any]] = {}


def install(**lookups: Callable[..., Any]) -> None:
    """Called by tiler.operator: problem_class(op) and target_domains(op, family, target)."""
    _LOOKUPS.update(lookups)


def _lookup(name: str) -> Callable[..., Any]:
    if name not in _LOOKUPS:
        importlib.import_module("tiler.operator")  # installs the look-ups (the lazy path; see the docstring)
    return _LOOKUPS[name]


def problem_class(op: str):
    """The problem class of `op` (an unknown op names the known ones)."""
    return _lookup("problem_class")(op)


def target_domains(op: str, family: str, target: str) -> dict | None:
    """Knob -> the values export target `target` can express for (op, family); None for no target (`any`)."""
    return _lookup("target_domains")(op, family, target)


__all__ = ["install", "problem_class", "target_domains"]
