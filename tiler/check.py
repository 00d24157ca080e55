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
from .operator import absent_defaults, check_constants, get_operator
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
        return f"{self.where}: {self.rule}" if self.where else self.rule


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
    chip = check_constants(load_chip(doc["chip"]["id"], hardware_dir))
    if chip.family != doc["chip"]["family"]:
        raise TilerError(
            f"chip: the document says family {doc['chip']['family']!r} but {chip.id} is a {chip.family!r} chip"
        )
    library = doc["schema"] == LIBRARY_SCHEMA
    entries = doc["entries"] if library else [doc]
    checked, findings = 0, []
    for i, entry in enumerate(entries):
        prefix = f"entries/{i}/targets" if library else "targets"
        try:
            problem = parse_problem(doc["op"], entry["problem"]["shape"], entry["problem"]["dtype"])
        except TilerError as exc:  # name the field as the document has it: problem (entries/i/problem)
            exc.args = (f"{prefix.removesuffix('targets')}problem: {exc}",)
            raise
        # a problem the chip family cannot run at all (dtype, layout, format) is an input error (exit 2); a view
        # for a chip or problem its target does not run is a finding (exit 1)
        model.check(problem, chip)
        if only is None and entry.get("runnable"):
            # the document's own tiling, when the views are of other tilings (a custom kernel): in the space and
            # feasible under the rules it was searched with (its launch is checked where a view is of it)
            search = entry.get("search") or doc.get("search")
            searched = search.get("target") if isinstance(search, dict) else None
            findings += [
                Finding(prefix.removesuffix("/targets").removesuffix("targets"), "", r)
                for r in tiling_findings(
                    doc,
                    {"tiling": entry["tiling"]},
                    chip,
                    problem,
                    "",
                    searched if isinstance(searched, str) and searched in model.TARGETS else None,
                )[0]
            ]
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
            rules = [why] if why else _broken(target, view, chip, problem)
            if not why:
                rules += cross_check(doc, entry, name, view, chip, problem)
            findings += [Finding(f"{prefix}/{name}", name, r) for r in rules]
    if only is not None and checked == 0:
        raise TilerError(f"target: the document has no {only} view (it has: {_names(entries)})")
    return checked, findings


def _names(entries) -> str:
    names = sorted({t for e in entries for t in e["targets"]})
    return ", ".join(names) or "none"


def _broken(target, view, chip, problem) -> list[str]:
    """The target's own rules on the view (Target.check; validate() has already matched the view against the
    target's schema, so it is not matched twice); a view whose values break the arithmetic of a rule (a zero
    extent, a word where a number belongs) breaks that rule rather than ending the check."""
    try:
        return list(target.check(view, chip, problem)) if target.check else []
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as exc:
        return [
            f"the view cannot be checked ({type(exc).__name__}: {str(exc)[:80]}): a value is not what the "
            f"{target.name} rules read"
        ]


def cross_check(doc: dict, entry: dict, name: str, view: dict, chip, problem) -> list[str]:
    """The view against what the document says it is the view of: its target's tiling (`runnable.<target>.tiling`,
    else the document's `tiling`) must pass `tiling_findings` for the target, and give this exact view (tile,
    element types from the problem's dtype, block_dim from the launch). Each difference is one finding."""
    runnable = entry.get("runnable") or {}
    own = runnable.get(name) if isinstance(runnable.get(name), dict) else None
    where = f"runnable/{name}/" if own is not None else ""
    bad, decoded, row = tiling_findings(doc, own or entry, chip, problem, where, name)
    if decoded is None:
        return bad
    expected = get_operator(doc["op"], chip.family, name).TARGETS[name].view(problem, chip, decoded, row)
    return bad + [
        f"{path} is {_short(got)}, the {where}tiling gives {_short(want)}{_stale(doc, chip)}"
        for path, got, want in _diff(view, expected, "")
    ]


def tiling_findings(doc: dict, part: dict, chip, problem, where: str = "", target: str | None = None):
    """(findings, tiling as knob -> value or None, the model's estimate row) for `part["tiling"]` and
    `part["launch"]` (a document, a library entry, or one `runnable` choice): every knob an integer or a label
    inside its domain (cut to `target`'s), every capacity rule of the operator and every rule of the target met,
    the values an export adds beside the knobs (Operator.derived) and the launch (block_dim, waves, tiles,
    schedule) the ones the model gives the tiling on this chip."""
    import numpy as np

    from .space import load_space

    model = (
        get_operator(doc["op"], chip.family)
        if target is None
        else get_operator(doc["op"], chip.family, target)
    )
    space = load_space(doc["op"], chip.family)
    if target is not None:
        space = space.for_target(target)  # each knob cut to what the target expresses
    tiling, launch = part.get("tiling"), part.get("launch")
    if not isinstance(tiling, dict):
        return [f"{where}tiling: must be an object of knob -> value"], None, None
    # a knob the document predates (an export from before the space had it) is the value a kernel without the
    # knob runs with (Operator.ABSENT_DEFAULTS, as the runners and `tiler rank` read it); a knob with no such
    # default must be there
    absent = absent_defaults(model, [k for k in space.names if k in tiling])
    tiling = {**{k: space.knobs[k].parse(v) for k, v in absent.items() if k in space.knobs}, **tiling}
    bad = []
    for k in space.names:
        v = tiling.get(k)
        if v is None:
            bad.append(f"{where}tiling: no {k!r}")
        elif isinstance(v, bool) or not isinstance(v, int | str):
            bad.append(f"{where}tiling: {k} must be an integer or a label, got {_short(v)}")
        elif isinstance(v, str) and not space.knobs[k].labels:
            bad.append(f"{where}tiling: {k} must be an integer, got the text {_short(v)}")
    if bad:
        return bad, None, None
    try:
        cand = space.parse_tiling(tiling)
    except TilerError as exc:
        return [f"{where}tiling: {exc}"], None, None
    masks = model.feasible(problem, chip, cand)
    if target is not None:
        masks.update(model.TARGETS[target].rule_masks(problem, chip, cand))
    broken = [r for r, m in masks.items() if not bool(np.asarray(m)[0])]
    if broken:
        return [f"{where}tiling: breaks {r}: {model.RULE_TEXT.get(r, r)}" for r in broken], None, None
    est = model.estimate(problem, chip, cand)
    row = {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in est.items()}
    decoded = space.decode(cand, 0)
    stale = _stale(doc, chip)
    for k, want in model.derived(problem, decoded, row).items():  # the values an export adds beside the knobs
        if k in tiling and (type(tiling[k]) is not type(want) or tiling[k] != want):
            bad.append(f"{where}tiling: {k} is {_short(tiling[k])}, the knobs give {want!r}{stale}")
    if isinstance(launch, dict):
        for k, want in model.launch(problem, decoded, row).items():
            if k in launch and (type(launch[k]) is not type(want) or launch[k] != want):
                bad.append(f"{where}launch.{k} is {_short(launch[k])}, the tiling gives {want!r}{stale}")
    return bad, decoded, row


def _stale(doc: dict, chip) -> str:
    """A note for a finding on a document exported with another profile of the chip (its numbers may differ)."""
    was = doc["chip"].get("profile_hash")
    return (
        f" (exported with profile {was}, checked with {chip.profile_hash})"
        if was != chip.profile_hash
        else ""
    )


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:36] + "..."


def _diff(got, want, path: str):
    """(path, got, want) for each leaf where `got` differs from `want` (a value of another type differs: 128.0 and
    "128" are not 128)."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            if k not in got:
                yield f"{path}{k}", "missing", want[k]
            else:
                yield from _diff(got[k], want[k], f"{path}{k}.")
        for k in got:
            if k not in want:
                yield f"{path}{k}", got[k], "absent"
        return
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            yield from _diff(g, w, f"{path}{i}.")
        return
    if type(got) is not type(want) or got != want:
        yield path.rstrip("."), got, want
