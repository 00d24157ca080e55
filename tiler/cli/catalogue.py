"""`tiler chips` and `tiler ops`: what the tool knows (chip profiles, operators, their fields and targets)."""

from __future__ import annotations

import json

import click

from .base import FORMATS, cli


@cli.command()
@click.option("--format", "fmt", type=FORMATS, default="table")
@click.pass_obj
def chips(obj, fmt):
    """List the known chips: cores, clock, fp16 peak, memory."""
    from .. import api
    from ..hardware import known_chips

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
    from ..operator import get_operator, known_ops, problem_class

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
