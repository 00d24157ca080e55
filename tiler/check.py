"""`tiler check`: run each exported view through its target's compile-time rules, from the file alone.

The search enforces the same rules as masks over candidates (tiler.target); this re-derives them from the view a
code generator would read, so a hand-edited file, a file from another version, or a bug in either side is caught
before the kernel build fails (or, worse, before a kernel silently computes part of the output).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import TilerError
from .export import LIBRARY_SCHEMA, validate
from .hardware import load_chip
from .operator import get_operator
from .problem import parse_problem

NO_VIEW = (
    "no view for any target: no code generator can run this tiling as exported (a custom kernel); "
    "re-export it from `tiler search`, which adds the best runnable tiling of each target"
)


@dataclass(frozen=True)
class Finding:
    """One view a target rejects: where it is in the document, the target, and the rule it breaks."""

    where: str
    target: str
    rule: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}"


def check_document(doc, hardware_dir=None, only: str | None = None) -> tuple[int, list[Finding]]:
    """(views checked, findings) for a tiling or library document. Raises TilerError (input error) when the
    document is not one of ours, names an unknown chip or problem, or `only` is not a target of its operator."""
    validate(doc)
    model = get_operator(doc["op"], doc["chip"]["family"])
    if only is not None and only not in model.TARGETS:
        allowed = ", ".join(model.TARGETS) or "none"
        raise TilerError(
            f"target: must be one of {allowed} for {doc['op']} on {doc['chip']['family']}, got {only!r}"
        )
    chip = load_chip(doc["chip"]["id"], hardware_dir)
    if chip.family != doc["chip"]["family"]:
        raise TilerError(
            f"chip: the document says family {doc['chip']['family']!r} but {chip.id} is a {chip.family!r} chip"
        )
    library = doc["schema"] == LIBRARY_SCHEMA
    entries = doc["entries"] if library else [doc]
    checked, findings = 0, []
    for i, entry in enumerate(entries):
        prefix = f"entries/{i}/targets" if library else "targets"
        problem = parse_problem(doc["op"], entry["problem"]["shape"], entry["problem"]["dtype"])
        # a problem the chip family cannot run at all (dtype, layout, format) is an input error (exit 2); a view
        # for a chip or problem its target does not run is a finding (exit 1)
        model.check(problem, chip)
        if (
            not entry["targets"] and only is None
        ):  # a tiling nothing can run as exported is not a promise kept
            why = "; ".join(f"{t}: {r}" for t, r in entry.get("no_view", {}).items())
            findings.append(Finding(prefix, "", NO_VIEW + (f" ({why})" if why else "")))
        for name, view in entry["targets"].items():
            if only is not None and name != only:
                continue
            target = model.TARGETS[name]
            checked += 1
            why = target.why_not(chip, problem)
            rules = [why] if why else target.broken(view, chip, problem)
            findings += [Finding(f"{prefix}/{name}", name, r) for r in rules]
    if only is not None and checked == 0:
        raise TilerError(f"target: the document has no {only} view (it has: {_names(entries)})")
    return checked, findings


def _names(entries) -> str:
    names = sorted({t for e in entries for t in e["targets"]})
    return ", ".join(names) or "none"
