"""The `tiler` click group and what its commands share: option blocks, tilings read, report lines."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import TilerError, one_line

FORMATS = click.Choice(["table", "json"])


def _load_tiling(text: str) -> dict:
    """--tiling: inline JSON, or a path to a JSON file (a bare tiling dict or an exported document)."""
    from ..space import read_text_file

    src, what = text, "not valid JSON ({}) and not a file"
    if not text.lstrip().startswith("{"):
        try:
            is_path = Path(text).exists() or Path(text).is_symlink()
        except (OSError, ValueError):  # a name too long, a NUL byte: not a path
            is_path = False
        if is_path:  # a file: read as UTF-8 text; a folder, a dangling link, binary: one line naming it
            try:
                src, what = read_text_file(text, "the tiling"), f"{text}: not valid JSON ({{}})"
            except TilerError as exc:
                raise TilerError(f"--tiling: {exc}") from None
    try:
        doc = json.loads(src)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise TilerError("--tiling: " + what.format(where)) from None
    except (RecursionError, ValueError) as exc:  # nested 100k deep; an integer of more than 4300 digits
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise TilerError("--tiling: " + what.format(why)) from None
    if not isinstance(doc, dict):
        raise TilerError("--tiling: must be a JSON object of knob -> value")
    if isinstance(doc.get("tiling"), dict):  # an exported tiler.tiling/v1 document: whole (its dtype counts)
        return doc
    targets = doc.get("targets")
    if (
        isinstance(targets, dict) and targets
    ):  # a document carrying only code-generator views: their knob keys
        return {k: v for view in targets.values() if isinstance(view, dict) for k, v in view.items()}
    return doc


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return str(v)


def _estimate_lines(row: dict, family: str | None = None) -> list[str]:
    """The estimate as text; the pipes named as the chip family names them (given, or read from the row's
    `<pipe>_us` columns): msprof's on Ascend, tensor/load/store... on a GPU."""
    from ..model.common import pipes, pipes_of_row

    piped = {p: row[f"{p}_us"] for p in pipes(family)} if family else pipes_of_row(row)
    busy = "  ".join(f"{p}={us:.1f}" for p, us in piped.items() if us > 0)
    return [
        f"time      {row['time_us']:.2f} us   (roofline {row['roofline_us']:.2f} us, "
        f"{row['roofline_us'] / row['time_us']:.0%} of the floor)",
        f"bound     {row['bound']}",
        f"pipes us  {busy}   (critical core)",
        f"cores     {row['cores_used']} used, {row['waves']} waves, balance {row['balance']:.2f}",
        f"memory    L2 hit {row['l2_hit_rate']:.0%}, HBM {row['hbm_bytes'] / 1e6:.1f} MB, L2 {row['l2_bytes'] / 1e6:.1f} MB",
    ]


def _runnable_lines(doc: dict, best: dict) -> list[str]:
    """Each target's best runnable tiling (the document's `runnable`): time, gap to the best, what differs; then
    the targets without a view and why."""
    runnable, missing = doc.get("runnable", {}), doc.get("no_view", {})
    if not runnable and not missing:
        return []
    out = ["runnable as exported (the best tiling each code generator can run):"]
    for name, c in runnable.items():
        gap = "" if c["gap"] is None else f"  x{c['gap']:.3f}"
        diff = {k: v for k, v in c["tiling"].items() if k in best and v != best[k]}
        what = "the best tiling" if not diff else "differs: " + ", ".join(f"{k}={v}" for k, v in diff.items())
        out.append(f"  {name:16} {c['time_us']:10.2f} us{gap}  {c['bound']:8}  {what}")
    for name, why in missing.items():
        out.append(f"  {name:16} no view: {why}")
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for input errors.")
@click.option(
    "--hardware-dir",
    type=click.Path(file_okay=False),
    envvar="TILER_HARDWARE_DIR",
    help="Folder of extra chip profiles (searched before the shipped ones).",
)
@click.version_option(package_name="tiler")
@click.pass_context
def cli(ctx, debug, hardware_dir):
    """Tiling-strategy autotuner for Ascend NPU and NVIDIA GPU kernels."""
    ctx.obj = {"debug": debug, "hardware_dir": hardware_dir}


def _common(f):
    for dec in reversed(
        [
            click.option("--op", required=True, help="Operator (tiler ops)."),
            click.option(
                "--chip", "chip_id", required=True, help="Chip id (tiler chips) or a profile .toml."
            ),
            click.option("--shape", required=True, help="Problem fields as K=V,... (tiler ops lists them)."),
            click.option("--dtype", default=None, help="fp16 (default), bf16, fp32, int8."),
        ]
    ):
        f = dec(f)
    return f


# option blocks shared by several commands (search, sweep, explain, rank, calibrate)
_STRATEGY = click.option(
    "--strategy", default="exhaustive", show_default=True, help="exhaustive, tpe, random or auto."
)
_SEED = click.option("--seed", type=int, default=0, show_default=True)
_JUDGE_TARGET = click.option(
    "--target",
    default="any",
    show_default=True,
    help="Judge the tiling(s) by this code generator's rules too (see tiler search --target).",
)


# --------------------------------------------------------------------------------------------------- sweep


class _InputError(click.ClickException):
    """A TilerError inside the command: one line, exit code 2 (also when the command runs standalone)."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)
