"""`tiler lookup`, `tiler emit` and `tiler check`: dispatch libraries and exported tilings."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import TilerError
from .base import cli


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--target", default=None, help="Check only this target's views (default: every view).")
@click.pass_obj
def check(obj, files, target):
    """Check exported tilings (tiling or library JSON) against each target's compile-time rules.

    Exit 0: every view passes; 1: a view breaks a rule (each printed as FILE: WHERE: RULE); 2: a file is not a
    tiler document, or names an unknown chip, operator or target."""
    from .. import api

    failed = False
    for name in files:
        checked, findings = api.check(name, target, obj["hardware_dir"])
        for f in findings:
            click.echo(f"{name}: {f}")
        failed |= bool(findings)
        if not findings:
            click.echo(f"{name}: ok ({checked} view{'s' * (checked != 1)} checked, no rule broken)")
    if failed:
        raise SystemExit(1)


@cli.command()
@click.option(
    "--library", "library_path", required=True, help="A tiler.library/v1 file (tiler sweep --library)."
)
@click.option("--op", default=None, help="Operator; must be the library's (checked when given).")
@click.option("--chip", "chip_id", default=None, help="Chip id; must be the library's (checked when given).")
@click.option("--shape", required=True, help="Problem fields, e.g. M=300,N=4096,K=4096.")
@click.option("--dtype", default=None, help="fp16 (default), bf16, fp32 or int8.")
@click.option(
    "--slowdown", is_flag=True, help="Also run the model: the slowdown of reusing a nearest tiling."
)
@click.pass_obj
def lookup(obj, library_path, op, chip_id, shape, dtype, slowdown):
    """The library's tiling for a shape: the exact entry or the nearest (tiler.lookup), as JSON; no model is
    imported unless --slowdown."""
    from ..lookup import answer
    from ..lookup import lookup as run_lookup

    try:
        hit = run_lookup(library_path, op, chip_id, shape, dtype, slowdown, obj["hardware_dir"])
    except LookupError as exc:
        raise TilerError(str(exc).strip("'\"")) from None
    click.echo(json.dumps(answer(hit), indent=2))


@cli.command()
@click.argument("library", type=click.Path(dir_okay=False))
@click.option(
    "--target", required=True, help="The code generator: catlass, ascendc (a C++ header), triton (Python)."
)
@click.option(
    "--out", "out_dir", default=None, help="Folder to write the unit into (default: print it to stdout)."
)
@click.option("--op", default=None, help="Operator; must be the library's (checked when given).")
@click.option("--chip", "chip_id", default=None, help="Chip id; must be the library's (checked when given).")
def emit(library, target, out_dir, op, chip_id):
    """Turn a sweep's library into a dispatch unit: the table of shapes, the look-up rule as code and each entry's
    kernel type, TCubeTiling or triton.Config list (docs/sweep.md, "From a library to code")."""
    from .. import api

    unit = api.emit(library, target, out_dir, op, chip_id)
    if unit.skipped:
        click.echo(
            f"note: {len(unit.skipped)} entries have no {target} view and are not in the unit:", err=True
        )
        for line in unit.skipped:
            click.echo(f"  {line}", err=True)
    if out_dir is None:
        click.echo(unit.text, nl=False)
        return
    click.echo(
        f"wrote {Path(out_dir) / unit.name} ({unit.entries} entries, {unit.variants} variants)", err=True
    )
