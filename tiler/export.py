"""JSON export: `tiler.tiling/v1` documents and `tiler.library/v1` libraries.

The code-generator views (`targets`), the derived tiling values and the launch section come from the operator
(`Operator.views`, `derived`, `launch`): this module knows the document's frame and the schema, not an operator.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from . import __version__
from .errors import TilerError
from .model.common import pipes, pipes_of_row
from .operator import get_operator
from .problem import Problem
from .space import load_space
from .target import ANY, check_schema, check_view

TILING_SCHEMA = "tiler.tiling/v1"
LIBRARY_SCHEMA = "tiler.library/v1"


def _num(v):
    return v.item() if hasattr(v, "item") else v


def estimate_dict(row: dict, family: str | None = None) -> dict:
    """The estimate record as JSON: units in the key names, pipes grouped under `pipes_us` with the names of the
    chip family's pipes (`model.common.PIPES_OF`: msprof's on Ascend, tensor/load/store... on a GPU); without a
    family, those of the family whose `<pipe>_us` columns the row has."""
    piped = {p: row[f"{p}_us"] for p in pipes(family)} if family else pipes_of_row(row)
    return {
        "time_us": float(row["time_us"]),
        "bound": str(row["bound"]),
        "pipes_us": {p: float(v) for p, v in piped.items()},
        "cores_used": int(row["cores_used"]),
        "waves": int(row["waves"]),
        "balance": float(row["balance"]),
        "l2_hit_rate": float(row["l2_hit_rate"]),
        "hbm_bytes": float(row["hbm_bytes"]),
        "l2_bytes": float(row["l2_bytes"]),
        "roofline_us": float(row["roofline_us"]),
    }


def tiling_document(
    problem: Problem,
    chip,
    tiling: dict,
    row: dict,
    search: dict | None = None,
    target: str = ANY,
    cand: dict | None = None,
    runnable=None,
) -> dict:
    """One `tiler.tiling/v1` object for (chip, op, problem). `target`: the export target the tiling was searched
    for (its view only); `any`: the view of every target whose rules the tiling satisfies. `cand`: the tiling
    as a one-row candidate table (default: parsed from `tiling`).

    `runnable` (tiler.search.runnable.Runnable, from a search): the best tiling of each target that can run the
    problem. Then each target's view is of *its* tiling (`runnable.<target>` carries that tiling, its predicted
    time and its gap to the unconstrained best), and `no_view` says why the other targets have none. Either way
    `custom_kernel` is true when no target can run the document's own `tiling` as exported."""
    op = get_operator(problem.OP, chip.family, target)
    if cand is None:
        cand = load_space(problem.OP, chip.family).parse_tiling(tiling)
    if runnable is None:
        views = op.views(problem, chip, tiling, row, cand)
        custom = not views
    else:
        views = {
            name: op.TARGETS[name].view(problem, chip, c.tiling, c.row)
            for name, c in runnable.choices.items()
        }
        custom = not any(all(c.cand[k][0] == cand[k][0] for k in cand) for c in runnable.choices.values())
    doc = {
        "schema": TILING_SCHEMA,
        **_made_by(chip),
        "op": problem.OP,
        "problem": problem.to_dict(),
        "tiling": {**{k: _num(v) for k, v in tiling.items()}, **op.derived(problem, tiling, row)},
        "launch": op.launch(problem, tiling, row),
        "estimate": estimate_dict(row, chip.family),
        "search": {
            **(search or {"strategy": "given", "evaluated": 1, "seed": None, "proven_optimal": False}),
            "target": target,
        },
        "targets": views,
        "custom_kernel": custom,
    }
    if runnable is not None:
        doc["runnable"] = {
            name: {
                "tiling": {
                    **{k: _num(v) for k, v in c.tiling.items()},
                    **op.derived(problem, c.tiling, c.row),
                },
                "time_us": c.time_us,
                "gap": c.gap,
                "bound": str(c.row["bound"]),
                "same_as_best": c.same_as_best,
                "launch": op.launch(problem, c.tiling, c.row),
                "search": {"strategy": c.strategy, "proven_optimal": c.proven_optimal},
            }
            for name, c in runnable.choices.items()
        }
        doc["no_view"] = dict(runnable.missing)
    return doc


def _made_by(chip) -> dict:
    """The `tool` and `chip` sections every document starts with (tiling and library alike)."""
    return {
        "tool": {"name": "tiler", "version": __version__},
        "chip": {
            "id": chip.id,
            "family": chip.family,
            "cores": chip.cores,
            "profile_hash": chip.profile_hash,
        },
    }


def library_document(chip, op: str, entries: list[dict]) -> dict:
    """A `tiler.library/v1`: many tiling documents of one chip and op, keyed by problem."""
    return {
        "schema": LIBRARY_SCHEMA,
        **_made_by(chip),
        "op": op,
        "entries": entries,
    }


@lru_cache(maxsize=4)
def load_schema(name: str) -> dict:
    text = resources.files("tiler").joinpath("schemas", f"{name}.json").read_text()
    return json.loads(text)


def validate(doc: dict) -> None:
    """Raise TilerError if `doc` does not match its shipped JSON Schema, or a code-generator view does not match
    the schema its operator declares for that target (Operator.TARGETS)."""

    if not isinstance(doc, dict):
        raise TilerError(f"schema: a document must be a JSON object, got {type(doc).__name__}")
    schema = doc.get("schema")
    name = (
        {TILING_SCHEMA: "tiling_v1", LIBRARY_SCHEMA: "library_v1"}.get(schema)
        if isinstance(schema, str)
        else None
    )
    if name is None:
        raise TilerError(f"schema: must be {TILING_SCHEMA} or {LIBRARY_SCHEMA}, got {doc.get('schema')!r}")
    check_schema(doc, load_schema(name), "")
    entries = doc["entries"] if name == "library_v1" else [doc]
    targets = get_operator(doc["op"], doc["chip"]["family"]).TARGETS
    for i, entry in enumerate(entries):
        where = f"entries/{i}/targets" if name == "library_v1" else "targets"
        for target, view in entry.get("targets", {}).items():
            if target not in targets:
                known = ", ".join(targets) or "none"
                raise TilerError(
                    f"export: {where}: {target!r} is not a target of {doc['op']} (targets: {known})"
                )
            check_view(view, targets[target].schema, f"{where}/{target}")


def emit_code(doc: dict, target: str) -> str:
    """The code a user pastes for one target's view of a tiling document (Target.emit)."""
    validate(doc)
    targets = get_operator(doc["op"], doc["chip"]["family"]).TARGETS
    if target not in targets:
        allowed = ", ".join(targets) or "none"
        raise TilerError(
            f"emit: must be one of {allowed} for {doc['op']} on {doc['chip']['family']}, got {target!r}"
        )
    if target not in doc["targets"]:
        raise TilerError(f"emit: the tiling has no {target} view (search with --target {target})")
    emit = targets[target].emit
    if emit is None:
        raise TilerError(f"emit: the {target} target has a view but no code to emit")
    return emit(doc["targets"][target], doc)


def dump_json(doc: dict) -> str:
    """The document as the text `write_json` writes (validated first)."""
    validate(doc)
    return json.dumps(doc, indent=2) + "\n"


def write_json(doc: dict, path: str | Path, what: str = "export") -> None:
    """Validate and write atomically (tiler.io.write_text); `what` names the parameter in an error."""
    from .io import write_text

    write_text(path, dump_json(doc), what)
