"""`tiler shapes`, `tiler sweep` and `tiler report`: many problems searched in one run, and their page."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from collections.abc import Iterable

import click

from ..errors import TilerError
from .base import _SEED, _STRATEGY, _InputError, cli


@cli.command()
@click.argument("config", type=click.Path())
@click.option(
    "--op", required=True, help="matmul (every linear, layout=nt) or flash_attention (prefill, decode)."
)
@click.option(
    "--tokens", default="1,128,2048", show_default=True, help="Token counts, one forward pass each."
)
@click.option("--context", default="4096", show_default=True, help="Keys in the cache of a decode step.")
@click.option("--batch", default="1", show_default=True, help="Sequences of a prefill pass (attention).")
@click.option("--tp", default="1", show_default=True, help="Tensor-parallel ranks (Megatron's split).")
@click.option("--dtype", default=None, help="fp16, bf16, fp32, int8 (default: the config's torch_dtype).")
@click.option("--out", "out_path", default=None, help="CSV to write (default: print to stdout).")
def shapes(config, op, tokens, context, batch, tp, dtype, out_path):
    """The operator shapes of a transformer from its Hugging Face config.json (or a folder holding one), as the CSV
    `tiler sweep` reads: every linear as a matmul with layout=nt, attention for prefill and decode, with counts."""
    from .. import api

    frame = api.shapes(config, op, tokens, context, batch, tp, dtype, out_path)
    if out_path is None:
        click.echo(frame.to_csv(index=False), nl=False)
    else:
        click.echo(
            f"wrote {out_path} ({len(frame)} rows, {int(frame['count'].sum())} runs per pass)", err=True
        )


def _resume_command(params: dict) -> str:
    """The command line that continues this sweep: the same options, plus --resume."""
    argv = ["tiler", "sweep", str(params["shapes"]), "--op", params["op"], "--chip", params["chip_ids"]]
    for name, opt in (
        ("out_path", "--out"),
        ("library_path", "--library"),
        ("scheduler", "--scheduler"),
        ("trials", "--trials"),
        ("dtype", "--dtype"),
        ("hardware_dir", "--hardware-dir"),
    ):
        if params.get(name) is not None:
            argv += [opt, str(params[name])]
    if params.get("jobs", 1) != 1:
        argv += ["--jobs", str(params["jobs"])]
    if params.get("strategy", "exhaustive") != "exhaustive":
        argv += ["--strategy", params["strategy"]]
    if params.get("seed", 0) != 0:
        argv += ["--seed", str(params["seed"])]
    for f in params.get("fix") or ():
        argv += ["--fix", f]
    if params.get("quiet"):
        argv.append("--quiet")
    return shlex.join(argv + ["--resume"])


@click.command("sweep")
@click.argument("shapes", type=click.Path(dir_okay=False))
@click.option("--op", required=True, help="Operator (tiler ops); the CSV columns are its problem fields.")
@click.option("--chip", "chip_ids", required=True, help="Chip id, or several separated by commas.")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Output table: .csv (default results/sweep_<op>_<chips>.csv) or .parquet (needs pyarrow).",
)
@click.option(
    "--library",
    "library_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write a tiler.library/v1 JSON of the ok rows (one file per chip: lib.<chip>.json).",
)
@click.option(
    "--jobs", type=int, default=1, show_default=True, help="Local worker processes (0: one per CPU)."
)
@click.option("--resume", is_flag=True, help="Skip the searches already in the journal (<out>.journal.db).")
@_STRATEGY
@_SEED
@click.option("--trials", type=int, default=None, help="Trials per search for tpe/random.")
@click.option("--fix", multiple=True, help="Pin a knob for every row: --fix KNOB=VALUE (repeatable).")
@click.option("--dtype", default=None, help="dtype of rows without a dtype value (default fp16).")
@click.option("--scheduler", default=None, help="Dask distributed scheduler address (needs tiler[dask]).")
@click.option("--quiet", is_flag=True, help="No progress line (it is drawn only on a terminal anyway).")
@click.option(
    "--target",
    default="any",
    show_default=True,
    help="Search only what this code generator can run as exported (see tiler search --target).",
)
@click.option(
    "--hardware-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder of extra chip profiles (default: the tiler group's --hardware-dir).",
)
@click.pass_context
def sweep_command(
    ctx,
    shapes,
    op,
    chip_ids,
    out_path,
    library_path,
    jobs,
    resume,
    strategy,
    seed,
    trials,
    fix,
    dtype,
    scheduler,
    quiet,
    target,
    hardware_dir,
):
    """Search every row of a shape CSV on one or more chips; write one table (and a tiling library).

    Exit codes: 0 all rows ok; 1 some rows failed (status=error, reason in `error`); 2 bad input; 130 interrupted
    by Ctrl-C, 143 by SIGTERM (finished rows are kept: rerun with --resume).
    """
    from .. import api
    from ..sweep import WorkerDied, _split_chips, default_out, journal_path

    if hardware_dir is None and isinstance(ctx.obj, dict):
        hardware_dir = ctx.obj.get("hardware_dir")
    out = out_path or None  # the text as given: Path() would drop a trailing '/' that --out must refuse
    terminated: list[int] = []

    def on_term(signum, frame):  # SIGTERM (kill, timeout, a scheduler) ends the sweep as Ctrl-C does
        terminated.append(signum)
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread():  # signal handlers belong to the main thread
        previous = signal.signal(signal.SIGTERM, on_term)
    try:
        report = api.sweep(
            shapes,
            op,
            chip_ids,
            out,
            library=library_path,
            jobs=jobs,
            resume=resume,
            strategy=strategy,
            seed=seed,
            trials=trials,
            fix=list(fix),
            dtype=dtype,
            scheduler=scheduler,
            quiet=quiet,
            hardware_dir=hardware_dir,
            target=target,
        )
    except TilerError as exc:
        raise _InputError(str(exc)) from None
    except (WorkerDied, KeyboardInterrupt) as exc:
        # a SIGTERM to the process group can kill a worker before the parent's own SIGTERM is handled
        if isinstance(exc, WorkerDied) and not terminated:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(1) from None
        jp = journal_path(out or default_out(op, _split_chips(chip_ids)))
        click.echo(
            f"\n{'terminated (SIGTERM)' if terminated else 'interrupted'}: finished rows are kept in {jp}.\n"
            f"to continue, run the same command with --resume:\n  {_resume_command(ctx.params)}",
            err=True,
        )
        raise SystemExit(143 if terminated else 130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    for line in report.summary():
        click.echo(line, err=True)
    if report.exit_code:
        # SystemExit, not ctx.exit(): it keeps its code through `tiler`'s non-standalone main() as well
        raise SystemExit(report.exit_code)


def sweep_main(argv: Iterable[str] | None = None) -> int:
    """`python -m tiler.sweep ...`: the sweep command on its own (same options and exit codes as `tiler sweep`)."""
    try:
        sweep_command.main(
            args=list(sys.argv[1:] if argv is None else argv), prog_name="tiler sweep", standalone_mode=False
        )
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code if isinstance(exc, _InputError) else 2
    return 0


cli.add_command(sweep_command)


# --------------------------------------------------------------------------------------------------- report


@click.command("report")
@click.argument("result", type=click.Path(dir_okay=True))
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The HTML file to write (folders are created); default: RESULT with the suffix .html.",
)
@click.option(
    "--row",
    type=int,
    default=None,
    help="The row whose per-pipe breakdown is drawn, as numbered in the page (#N); default: the slowest.",
)
@click.pass_context
def report_command(ctx, result, out_path, row):
    """Draw a sweep table or a search/explain JSON document as one self-contained HTML page: a roofline, the
    predicted time of every row (log axis, grouped by shape family) coloured by bound, one row's per-pipe
    breakdown, each row's tiling and the targets that can run it, and a document's code per target (needs
    tiler[report])."""
    from .. import api

    hw = (ctx.obj or {}).get("hardware_dir")
    path = api.report(result, out_path, row, hw)
    click.echo(f"wrote {path}", err=True)


cli.add_command(report_command)
