"""`tiler search`, `tiler explain` and `tiler rank`: the model's tilings for one problem."""

from __future__ import annotations

import contextlib
import json
import sys

import click

from ..errors import TilerError
from .base import (
    _JUDGE_TARGET,
    _SEED,
    _STRATEGY,
    FORMATS,
    _common,
    _estimate_lines,
    _load_tiling,
    _runnable_lines,
    cli,
)


@cli.command()
@_common
@_STRATEGY
@click.option("--trials", type=int, default=None, help="Trials for tpe/random.")
@_SEED
@click.option("--fix", multiple=True, help="Pin a knob: --fix KNOB=VALUE (repeatable).")
@click.option("--top", type=int, default=5, show_default=True, help="How many of the best tilings to show.")
@click.option(
    "--export",
    "export_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the tiler.tiling/v1 JSON here (folders are created); '-': to stdout, the report then to stderr.",
)
@click.option("--format", "fmt", type=FORMATS, default="table")
@click.option("--storage", default=None, help="Optuna storage URL (tpe/random).")
@click.option("--study-name", default=None, help="Optuna study name to create or resume (tpe/random).")
@click.option(
    "--measure", default=None, help="Measure each trial: a command with {tiling}, or a runner name (triton)."
)
@click.option("--measure-timeout", type=float, default=120.0, show_default=True)
@click.option(
    "--vendor",
    is_flag=True,
    help="With --measure <runner>: also time the vendor library's call for the problem (cuBLAS, torch conv2d, the "
    "fastest SDPA backend) and say how fast the measured best runs against it.",
)
@click.option("--warm-start", is_flag=True, help="Enqueue known-good tilings first (tpe).")
@click.option("--guided", type=int, default=0, help="Measured search: measure the model's top-k first.")
@click.option(
    "--diverse/--plain",
    default=None,
    help="Order the top tilings (and --guided's model top-k) as the diverse top-k: the best tiling of each distinct "
    "tile shape first, a hedge on the pipeline depth 4th, with the predicted gap to the best (docs/search.md). Default: "
    "diverse with --guided, plain "
    "otherwise.",
)
@click.option(
    "--target",
    default="any",
    show_default=True,
    help="Search only tilings this code generator can run as exported (tiler ops --format json lists each "
    "operator's targets; matmul: catlass, ascendc on Ascend, triton on CUDA); any: the whole space.",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Append the best tiling to this manifest (its launch name, problem, tiling) for tiler calibrate on msprof.",
)
@click.option(
    "--emit",
    default=None,
    help="Print the best tiling as code for this target instead of the report (catlass: C++ aliases; ascendc: "
    "TCubeTiling setters; triton: a triton.Config; with --top K, K triton.Config lines, diverse unless --plain).",
)
@click.option(
    "--space",
    "space_path",
    default=None,
    help="A user's Triton kernel space (TOML: params, restrictions, key_map, defaults; docs/triton.md): rank exactly "
    "its configs with the model, reported in the user's names; --emit triton --top K prints K triton.Config lines.",
)
@click.pass_obj
def search(
    obj,
    op,
    chip_id,
    shape,
    dtype,
    strategy,
    trials,
    seed,
    fix,
    top,
    export_path,
    fmt,
    storage,
    study_name,
    measure,
    measure_timeout,
    vendor,
    warm_start,
    guided,
    diverse,
    target,
    manifest_path,
    emit,
    space_path,
):
    """Find the best tiling for one problem on one chip, and the best each code generator can run; with --space,
    the best configs of a user's Triton kernel space (docs/triton.md)."""
    from .. import api
    from ..io import check_writable

    # --emit with an explicit --top K prints K configs (a Triton target); without --top, the one best
    many = click.get_current_context().get_parameter_source("top") != click.core.ParameterSource.DEFAULT
    if space_path is not None:
        taken = {
            "--export": export_path,
            "--manifest": manifest_path,
            "--measure": measure,
            "--storage": storage,
            "--study-name": study_name,
            "--guided": guided,
            "--warm-start": warm_start,
        }
        space_args = (obj, op, chip_id, shape, dtype, fix, target, top, many, strategy, trials, diverse, emit)
        _search_user_space(*space_args, fmt, space_path, taken)
        return

    if export_path and export_path != "-":  # a path that cannot take the file is refused before the search
        check_writable(export_path, "--export")
    if manifest_path:
        check_writable(manifest_path, "--manifest")

    if emit is not None and target == "any":
        target = emit  # --emit X searches what X can express
    if emit is not None and emit != target:
        raise TilerError(f"--emit: must be the searched target ({target}), got {emit!r}")
    if top < 1:
        raise TilerError(f"--top: must be >= 1, got {top}")
    from ..search import check_seed
    from ..search.bayes import check_timeout

    check_timeout(measure_timeout)  # 0, nan, inf: refused (not dropped as falsy, nor crashing later)
    check_seed(seed)
    kw = {
        k: v
        for k, v in dict(
            storage=storage,
            study_name=study_name,
            measure=measure,
            measure_timeout=measure_timeout,
            warm_start=warm_start,
            guided=guided,
            vendor=vendor,
        ).items()
        if v or k == "measure_timeout"
    }
    res = api.search(
        op,
        chip_id,
        shape,
        dtype,
        fix=list(fix),
        target=target,
        top=top,
        strategy=strategy,
        trials=trials,
        seed=seed,
        hardware_dir=obj["hardware_dir"],
        diverse=diverse
        if diverse is not None or not (many and emit)
        else True,  # K configs to autotune: diverse
        **kw,
    )
    _write_search(res, export_path, manifest_path, emit, many, fmt)


def _write_search(res, export_path, manifest_path, emit, many: bool, fmt) -> None:
    """`tiler search`'s output: the document (--export, a file or stdout), the manifest line, then the emitted code
    (--emit) or the notes and the table."""
    from ..export import dump_json, emit_code, write_json

    problem, chip, space = res.problem, res.chip, res.space
    doc = res.document()
    if export_path == "-":  # stdout carries the document alone: everything else goes to stderr
        click.echo(dump_json(doc), nl=False)
        click.get_current_context().with_resource(contextlib.redirect_stdout(sys.stderr))
    elif export_path:
        write_json(doc, export_path, "--export")
        click.echo(f"wrote {export_path}", err=True)
    if manifest_path:
        from ..msprof import append_manifest, manifest_row

        line = manifest_row(problem.OP, chip.id, problem, {k: doc["tiling"][k] for k in space.knobs})
        append_manifest(manifest_path, line)
        click.echo(f"manifest {manifest_path}: launch this tiling as {line['op_name']}", err=True)
    if emit is not None:
        for note in res.notes:
            click.echo(note, err=True)
        from ..operator import get_operator

        if many and get_operator(problem.OP, chip.family).TARGETS[emit].language == "python":
            from ..triton import emit_configs

            click.echo(emit_configs(res, emit), nl=False)  # K triton.Config lines to paste into configs=[...]
            return
        click.echo(emit_code(doc, emit), nl=False)
        return
    for note in res.notes:  # failures, resume and stop messages, guided-search counts
        click.echo(note, err=True)
    _print_search(res, doc, fmt)


def _search_user_space(
    obj,
    op,
    chip_id,
    shape,
    dtype,
    fix,
    target,
    top,
    many,
    strategy,
    trials,
    diverse,
    emit,
    fmt,
    space_path,
    taken,
):
    """`tiler search --space FILE`: a user's Triton kernel space ranked by the model (refusing the options that
    have no meaning there, `taken`), printed as configs (--emit), JSON or the report."""
    from .. import api
    from ..triton import TARGET, emit_configs

    for flag, value in taken.items():
        if value:
            raise TilerError(
                f"{flag}: not with --space (the space's configs are ranked as given, by the model)"
            )
    if emit is not None and emit != TARGET:
        raise TilerError(f"--emit: a user space is a Triton kernel's; must be {TARGET}, got {emit!r}")
    if top < 1:
        raise TilerError(f"--top: must be >= 1, got {top}")
    res = api.search(
        op,
        chip_id,
        shape,
        dtype,
        fix=list(fix),
        target=target,
        top=top if many or emit is None else 1,
        strategy=strategy,
        trials=trials,
        hardware_dir=obj["hardware_dir"],
        diverse=diverse if diverse is not None else emit is not None,
        space=space_path,
    )
    for note in res.notes:
        click.echo(note, err=True)
    if emit is not None:
        click.echo(emit_configs(res), nl=False)
        return
    if fmt == "json":
        click.echo(json.dumps(res.summary(), indent=2))
        return
    for line in res.head_lines():
        click.echo(line)
    for line in _estimate_lines(res.row(0)):
        click.echo("  " + line)
    for line in res.tail_lines():
        click.echo(line)


def _print_search(res, doc: dict, fmt: str) -> None:
    """The report of `tiler search` (the best tiling, its estimate, what runs it, the measurement and the vendor's
    time when measured, advice, the search's counts, the next best), or the document with advice and alternatives
    as JSON."""
    problem, chip, space = res.problem, res.chip, res.space
    measured = res.est.get("measured_us")
    if measured is not None:
        doc["measurement"] = {"measured_us": float(measured[0]), "predicted_us": float(res.est["time_us"][0])}
        if (
            res.vendor is not None
        ):  # the vendor's time, and the measured best's speed over it (above 1: faster)
            doc["measurement"]["vendor"] = dict(res.vendor)
            doc["measurement"]["vs_vendor"] = res.vendor["us"] / float(measured[0])
    lines = res.advice()
    if fmt == "json":
        doc["advice"] = lines
        doc["alternatives"] = [
            {
                "tiling": res.tiling(i),
                "time_us": float(res.est["time_us"][i]),
                "bound": str(res.est["bound"][i]),
                **({"gap": float(res.est["gap"][i])} if "gap" in res.est else {}),
            }
            for i in range(1, len(res.est["time_us"]))
        ]
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"{problem.OP} {problem.key()} on {chip.id} ({chip.cores} cores)")
    custom = (
        "  (needs a custom kernel: no code generator runs it as exported)" if doc["custom_kernel"] else ""
    )
    click.echo("best tiling: " + ", ".join(f"{k}={v}" for k, v in res.tiling(0).items()) + custom)
    for line in _estimate_lines(res.row(0)):
        click.echo("  " + line)
    for line in _runnable_lines(doc, res.tiling(0)):
        click.echo(line)
    if measured is not None:
        click.echo(
            f"  measured  {float(measured[0]):.2f} us (the model predicted {float(res.est['time_us'][0]):.2f} us)"
        )
        if res.vendor is not None:
            click.echo(
                f"  vendor    {res.vendor['name']} {res.vendor['us']:.2f} us: the measured best runs at "
                f"{doc['measurement']['vs_vendor']:.2f}x its speed"
            )
    derived = {k: v for k, v in doc["tiling"].items() if k not in space.knobs}
    if derived:  # values the operator derives from the tiling (Ascend matmul: the tail re-cut's sub-blocks)
        click.echo("  derived   " + ", ".join(f"{k}={v}" for k, v in derived.items()))
    click.echo("advice:")
    for line in lines:
        click.echo("  - " + line)
    proof = "optimum proven" if res.proven_optimal else "optimum not proven"
    click.echo(
        f"search: {res.strategy}, {res.evaluated} scored + {res.bounded} bounded of {res.space_size} "
        f"in the space ({res.feasible} feasible enumerated), {proof}, {res.elapsed_s:.2f} s"
    )
    if len(res.est["time_us"]) > 1:
        click.echo("next best:")
        for i in range(1, len(res.est["time_us"])):
            t = res.tiling(i)
            diff = {k: v for k, v in t.items() if v != res.tiling(0)[k]}
            gap = f"  x{res.est['gap'][i]:.3f}" if "gap" in res.est else ""
            click.echo(
                f"  {res.est['time_us'][i]:10.2f} us{gap}  {res.est['bound'][i]:8}  differs: "
                + ", ".join(f"{k}={v}" for k, v in diff.items())
            )


@cli.command()
@_common
@click.option(
    "--tiling", required=True, help="JSON object of knob -> value, or a file (an exported document works)."
)
@click.option("--format", "fmt", type=FORMATS, default="table")
@_JUDGE_TARGET
@click.pass_obj
def explain(obj, op, chip_id, shape, dtype, tiling, fmt, target):
    """Break down one given tiling: pipes, bound, waves and balance, L2, roofline, advice. The tiling may use a
    target's own names (CATLASS, TCubeTiling, Triton tutorial) and may be partial: the model completes the rest."""
    from .. import api

    ex = api.explain(op, chip_id, shape, _load_tiling(tiling), dtype, target, obj["hardware_dir"])
    if fmt == "json":
        click.echo(json.dumps(ex.document(), indent=2))
        return
    click.echo(f"{ex.problem.OP} {ex.problem.key()} on {ex.chip.id} ({ex.chip.cores} cores)")
    click.echo("tiling: " + ", ".join(f"{k}={v}" for k, v in ex.tiling.items()))
    for t, names in ex.native.items():
        click.echo(f"  read as {t} names: {names}")
    if ex.completed:
        click.echo("  completed by the model (the best choice given the rest): " + ", ".join(ex.completed))
    for line in _estimate_lines(ex.row):
        click.echo("  " + line)
    click.echo("advice:")
    for line in ex.advice:
        click.echo("  - " + line)


@cli.command()
@_common
@click.option(
    "--candidates", required=True, type=click.Path(dir_okay=False), help="CSV of tilings (one per row)."
)
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "table"]), default="csv")
@_JUDGE_TARGET
@click.option("--top", type=int, default=None, help="Show only the first N ranked rows (default: all).")
@click.option(
    "--diverse/--plain",
    default=False,
    show_default=True,
    help="Order the ranked rows as the diverse top-k: the best row of each distinct tile shape first, a hedge "
    "on the pipeline depth 4th (then the rest), with a gap column (predicted time over the best); see docs/search.md.",
)
@click.pass_obj
def rank(obj, op, chip_id, shape, dtype, candidates, fmt, target, top, diverse):
    """Score a CSV of tilings for one problem: adds predicted_us and rank; infeasible rows are reported.

    A table with measured times (ms, us, measured_us, ...) also gets the agreement of the model's ranking with them
    (Spearman, top-1 and best-of-k regret, median |log error|) over all its ranked rows: on stderr for csv and json
    (where the document becomes {"ranked": [...], "agreement": {...}}), a block after the table for table. Where
    the table also times the vendor call (rows of another `impl`, as the runners' --vendor record it, or a
    vendor_us / vendor_ms column), the block says how fast the model's pick and the best row run against it (JSON:
    "vendor"). Its
    missing knob columns take the defaults of a kernel without them, named in a note and the `defaulted` column."""
    from .. import api
    from ..rank import defaulted_text

    if top is not None and top < 1:
        raise TilerError(f"--top: must be >= 1, got {top}")
    table = api.rank_table(op, chip_id, shape, candidates, dtype, target, obj["hardware_dir"], top, diverse)
    problem, ranked, rejected, agreed, vendor = (
        table.problem,
        table.ranked,
        table.rejected,
        table.agreed,
        table.vendor,
    )
    skipped, took = table.skipped, table.defaulted
    for _, r in rejected.iterrows():
        click.echo(f"row {r.get('row', '?')}: infeasible: {r.get('reason', '')}", err=True)
    if skipped:
        click.echo(
            f"note: {skipped} of {table.given} rows skipped: another shape, dtype or implementation than "
            f"{problem.label()}",
            err=True,
        )
    if took:
        click.echo(
            f"note: measured rows without a knob's column take the default of a kernel without it (not the "
            f"model's choice): {defaulted_text(took)}",
            err=True,
        )
    block = []
    if agreed is not None:
        col, a = agreed
        block = [
            f"agreement with the measured times ({col}) over {a.pairs} ranked rows of {problem.label()}:",
            *("  " + line for line in a.lines()),
            *(["  " + vendor.line()] if vendor is not None else []),
        ]
    if fmt == "csv":
        click.echo(ranked.to_csv(index=False), nl=False)
    elif fmt == "json":
        records = ranked.to_json(orient="records", indent=2)
        if agreed is None:
            click.echo(records)
        else:
            doc = {
                "ranked": json.loads(records),
                "agreement": {"measured_column": agreed[0], **agreed[1].as_dict()},
                **({"vendor": vendor.as_dict()} if vendor is not None else {}),
            }
            click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(ranked.to_string(index=False))
        if block:
            click.echo("\n" + "\n".join(block))
    if block and fmt != "table":  # csv and json keep stdout a document
        click.echo("\n".join(block), err=True)
