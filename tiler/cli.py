"""The `tiler` command line: a thin layer that parses, calls one library function and renders.

Exit codes: 0 success; 2 bad input (one line on stderr naming the field and the allowed values); 1 internal
error (a bug: the traceback is kept). Program output (JSON/CSV) goes to stdout; progress and notes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

import click

from .errors import TilerError, one_line

FORMATS = click.Choice(["table", "json"])


def _load_tiling(text: str) -> dict:
    """--tiling: inline JSON, or a path to a JSON file (a bare tiling dict or an exported document)."""
    from .space import read_text_file

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
    from .model.common import pipes, pipes_of_row

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


@cli.command()
@click.option("--format", "fmt", type=FORMATS, default="table")
@click.pass_obj
def chips(obj, fmt):
    """List the known chips: cores, clock, fp16 peak, memory."""
    from . import api
    from .hardware import known_chips

    rows = []
    for cid in known_chips(obj["hardware_dir"]):
        c = api._chip(cid, obj["hardware_dir"])
        rows.append(
            {
                "id": c.id,
                "family": c.family,
                "name": c.name,
                "cores": c.cores,
                "clock_mhz": c["clock_mhz"],
                "fp16_tflops": round(c.peak_tflops("fp16"), 1),
                "hbm_gbps": c["hbm_gbps"],
                "l2_mb": round(c["l2_bytes"] / 2**20, 1),
                "memory_gb": round(c["hbm_bytes"] / 2**30, 1),
            }
        )
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        f"{'id':16} {'family':7} {'cores':>5} {'MHz':>6} {'fp16 TF':>8} {'HBM GB/s':>9} {'L2 MB':>6} {'mem GB':>7}  name"
    )
    for r in rows:
        click.echo(
            f"{r['id']:16} {r['family']:7} {r['cores']:>5} {r['clock_mhz']:>6} {r['fp16_tflops']:>8} "
            f"{r['hbm_gbps']:>9} {r['l2_mb']:>6} {r['memory_gb']:>7}  {r['name']}"
        )


@cli.command()
@click.option("--format", "fmt", type=FORMATS, default="table")
def ops(fmt):
    """List the operators, the families each has a model for, and their problem fields."""
    from .operator import get_operator, known_ops, problem_class

    rows = {}
    for op, fam in known_ops():
        cls = problem_class(op)
        example = ",".join(f"{k}={v}" for k, v in cls.EXAMPLE.items())
        fields = list(cls.FIELDS) + list(cls.OPTIONAL)
        rows.setdefault(op, {"op": op, "families": [], "fields": fields, "example": example, "targets": []})
        rows[op]["families"].append(fam)
        rows[op]["targets"] += [
            {
                "name": t.name,
                "family": fam,
                "doc": t.doc,
                "emit": t.emit is not None,  # tiler search --emit NAME
                "unit": t.language or None,  # tiler emit LIBRARY --target NAME: cpp (a header) or python
                "native_names": list(t.native_names),  # tiler explain/rank read a tiling in these names
            }
            for t in get_operator(op, fam).TARGETS.values()
        ]
    if fmt == "json":
        click.echo(json.dumps(list(rows.values()), indent=2))
        return
    for r in rows.values():
        targets = ", ".join(f"{t['name']} ({t['family']})" for t in r["targets"]) or "none"
        click.echo(
            f"{r['op']:16} families: {', '.join(r['families']):14} fields: {', '.join(r['fields'])}"
            f"   e.g. --shape {r['example']}   targets: {targets}"
        )


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
    from . import api
    from .export import dump_json, emit_code, write_json
    from .io import check_writable

    # --emit with an explicit --top K prints K configs (a Triton target); without --top, the one best
    many = click.get_current_context().get_parameter_source("top") != click.core.ParameterSource.DEFAULT
    if space_path is not None:
        from .triton import TARGET, emit_configs

        taken = {
            "--export": export_path,
            "--manifest": manifest_path,
            "--measure": measure,
            "--storage": storage,
        }
        taken.update({"--study-name": study_name, "--guided": guided, "--warm-start": warm_start})
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
    from .search import check_seed
    from .search.bayes import check_timeout

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
    problem, chip, space = res.problem, res.chip, res.space
    doc = res.document()
    if export_path == "-":  # stdout carries the document alone: everything else goes to stderr
        click.echo(dump_json(doc), nl=False)
        click.get_current_context().with_resource(contextlib.redirect_stdout(sys.stderr))
    elif export_path:
        write_json(doc, export_path, "--export")
        click.echo(f"wrote {export_path}", err=True)
    if manifest_path:
        from .msprof import append_manifest, manifest_row

        line = manifest_row(problem.OP, chip.id, problem, {k: doc["tiling"][k] for k in space.knobs})
        append_manifest(manifest_path, line)
        click.echo(f"manifest {manifest_path}: launch this tiling as {line['op_name']}", err=True)
    if emit is not None:
        for note in res.notes:
            click.echo(note, err=True)
        from .operator import get_operator

        if many and get_operator(problem.OP, chip.family).TARGETS[emit].language == "python":
            from .triton import emit_configs

            click.echo(emit_configs(res, emit), nl=False)  # K triton.Config lines to paste into configs=[...]
            return
        click.echo(emit_code(doc, emit), nl=False)
        return
    for note in res.notes:  # failures, resume and stop messages, guided-search counts
        click.echo(note, err=True)
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
    from . import api

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
    from . import api
    from .rank import defaulted_text

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
    from . import api
    from .api import calibrate as fit
    from .calibrate import write_profile
    from .io import check_writable

    check_writable(out_path, "--out")  # refused before the fit
    from .search import check_seed

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


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--target", default=None, help="Check only this target's views (default: every view).")
@click.pass_obj
def check(obj, files, target):
    """Check exported tilings (tiling or library JSON) against each target's compile-time rules.

    Exit 0: every view passes; 1: a view breaks a rule (each printed as FILE: WHERE: RULE); 2: a file is not a
    tiler document, or names an unknown chip, operator or target."""
    from . import api

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
    from .lookup import answer
    from .lookup import lookup as run_lookup

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
    from . import api

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
    from . import api

    frame = api.shapes(config, op, tokens, context, batch, tp, dtype, out_path)
    if out_path is None:
        click.echo(frame.to_csv(index=False), nl=False)
    else:
        click.echo(
            f"wrote {out_path} ({len(frame)} rows, {int(frame['count'].sum())} runs per pass)", err=True
        )


# --------------------------------------------------------------------------------------------------- sweep


class _InputError(click.ClickException):
    """A TilerError inside the command: one line, exit code 2 (also when the command runs standalone)."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)


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
    from . import api
    from .sweep import WorkerDied, _split_chips, default_out, journal_path

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
    from . import api

    hw = (ctx.obj or {}).get("hardware_dir")
    path = api.report(result, out_path, row, hw)
    click.echo(f"wrote {path}", err=True)


cli.add_command(report_command)


def _version_everywhere() -> None:
    """`--version` on every subcommand too (`tiler search --version`), not only on the group."""
    for command in cli.commands.values():
        if not any(p.name == "version" for p in command.params):
            click.version_option(package_name="tiler")(command)


_version_everywhere()


def _as_flag(message: str, args: list[str]) -> str:
    """Library errors name their parameter (`trials: ...`); on the command line that is a flag (`--trials: ...`).
    Only the options of the command that ran are renamed; problem fields and other names stay as they are."""
    command = next((a for a in args if a in cli.commands), None)
    head, sep, rest = message.partition(":")
    word = head.split(" ")[0]
    if command is None or not sep:
        return message
    for param in cli.commands[command].params:
        named = param.name == word or f"--{word}" in param.opts  # `export:` for --export (export_path)
        if isinstance(param, click.Option) and named and param.opts[0].startswith("--"):
            return param.opts[0] + head[len(word) :] + sep + rest
    return message


def main(argv=None) -> int:
    """Entry point: turns input errors into one stderr line and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        rv = cli.main(args=args, prog_name="tiler", standalone_mode=False)
    except (
        SystemExit
    ) as exc:  # a command that sets its own exit code (sweep: 1 when rows failed, 130 on Ctrl-C)
        return exc.code if isinstance(exc.code, int) else 1
    except TilerError as exc:
        if debug:
            raise
        click.echo(f"error: {one_line(_as_flag(str(exc), args))}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        click.echo(f"error: {one_line(exc.format_message())}", err=True)
        return 2
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
