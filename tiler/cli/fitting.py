"""`tiler calibrate`: a chip profile's constants fitted to measured times."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import TilerError
from .base import _SEED, cli


@cli.command()
@click.option("--chip", "chip_id", required=True)
@click.option("--op", required=True, help="Operator (tiler ops) whose constants to fit.")
@click.option("--measurements", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@click.option("--folds", type=int, default=4, show_default=True)
@_SEED
@click.option(
    "--fit-shapes",
    default=None,
    help="Shape labels to fit, ';'-separated, e.g. 1024x1024x1024;4096x4096x4096 (default: all); the file's "
    "other shapes are reported apart, never fitted.",
)
@click.option(
    "--note", default="", help="Appended to the source of every fitted value (e.g. what was held out)."
)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="With an msprof op_summary: the manifest of exported tilings (tiler search --manifest) to match Op Name.",
)
@click.option(
    "--rounds",
    type=int,
    default=None,
    help="Rows without tilings (totals): search <-> fit rounds, the model's best standing in (default 3).",
)
@click.pass_obj
def calibrate(obj, chip_id, op, measurements, out_path, folds, seed, fit_shapes, note, manifest, rounds):
    """Fit the profile's constants to measured latencies (tiler's table, or an msprof op_summary whose pipe columns
    are fitted per pipe); report held-out error per pipe and ranking. Rows with only a problem and a total time (a
    library's kernels) are fitted from totals: the model's best tiling stands in for the library's."""
    from .. import api
    from ..api import calibrate as fit
    from ..calibrate import write_profile
    from ..io import check_writable

    check_writable(out_path, "--out")  # refused before the fit
    from ..search import check_seed

    if not 0 <= folds <= 1000:  # k-fold by shape: 0 or 1 is none; more folds than shapes is one per shape
        raise TilerError(f"--folds: must be an integer in 0..1000, got {folds}")
    check_seed(seed, "--seed")
    chip = api._chip(chip_id, obj["hardware_dir"])
    shapes = [s.strip() for s in fit_shapes.split(";") if s.strip()] if fit_shapes else None
    result = fit(
        op,
        chip,
        measurements,
        folds=folds,
        seed=seed,
        fit_shapes=shapes,
        manifest=manifest,
        rounds=rounds,
        note=note,
        data_name=Path(measurements).name,
    )
    for line in result.notes:
        click.echo(line, err=True)
    write_profile(result, out_path)
    click.echo(result.summary())
    click.echo(f"wrote {out_path}", err=True)
