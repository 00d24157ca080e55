"""The Ascend matmul model against published measurements that compare two tilings or schemes.

    python -m bench.ascend_published [--csv bench/data/ascend_published.csv] [--show-tilings]

Each row of bench/data/ascend_published.csv is one published comparison (CATLASS docs and example READMEs, the
AscendC Matmul best-practice cases): a chip, a shape, and two variants A and B as JSON of the model's knob names
(`search_spaces/matmul.toml [ascend.*]`), with the published ratio time(A) / time(B). For each variant the model
predicts the time of the **best tiling of the space with the published knobs pinned**
(`tiler.search.search(problem, chip, load_space("matmul", "ascend").pin(overrides))`): knobs a variant does not
fix are completed the model's best way, each variant on its own, so the ratio compares the two published settings
each completed as well as the model can. The predicted ratio is time(A) / time(B) of those two best tilings.

Keys of a variant that are not knobs:
  * `b_format` (`nd`/`nz`): a problem field (B stored in NZ fractals), set per variant;
  * `transpose` (1): evaluate the equivalent product Cᵀ = Bᵀ·Aᵀ (M and N swapped, each operand's layout letter
    flipped), so the model's B-panel knobs (`weight_resident`) act on A; the variant's knobs are then those of the
    transposed problem;
  * `scheme`: a scheme the model cannot express; the row is recorded and reported but not scored.
A chip without a profile in hardware/ is reported and not scored. `metric = mte2_time` compares the model's MTE2
busy time (`mte2_us` of the best tiling) with a published aic_mte2_time instead of the kernel time.

Two adjustments, printed per row: a pinned base_m/base_n larger than the 16-aligned M/N (or base_k larger than the
C0-aligned K) is clamped to it, since such a tile moves and computes only the real rows (CATLASS pads them to 16 on
the way); the model's `fix_split` rule would otherwise reject it. A pinned value outside a closed knob's domain
(split_k = 20, 5) is admitted as that knob's only value.

Direction: each ratio is `+` (> 2 % slower A), `-` (> 2 % faster A) or `=` (within 2 %, |log r| < log 1.02); the
model agrees when both have the same class. Error: log(predicted / published). Summary split by `fitted` (rows the
constants were fitted on: none yet) and per knob. `--set KEY=VALUE` replaces a chip profile value for every row
(a what-if to see which term a miss depends on, not a calibration).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import time
from dataclasses import replace
from pathlib import Path

from tiler.errors import TilerError
from tiler.hardware import known_chips, load_chip
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space

DATA = Path(__file__).resolve().parent / "data"
EQUAL = math.log(1.02)
PROBLEM_KEYS = ("b_format", "transpose")
FLIP = {"n": "t", "t": "n"}
# what each published metric is, as an estimate column: the kernel's time, the cube cores' busy time (msprof's
# aic_time: no launch head, no split-K cast pass on the vector cores), or the MTE2 pipe's busy time
METRIC_COLUMN = {"time": "time_us", "aic_time": "core_us", "mte2_time": "mte2_us"}


def direction(r: float) -> str:
    lr = math.log(r)
    return "=" if abs(lr) < EQUAL else ("+" if lr > 0 else "-")


def pin_space(space, pins: dict, notes: list[str]):
    """space.pin(pins), admitting a value outside a closed knob's domain as that knob's only value."""
    ok, extra = {}, {}
    for k, v in pins.items():
        kn = space.knobs[k]
        code = kn.codes[kn.labels.index(v)] if (kn.labels and isinstance(v, str)) else int(v)
        if code in kn.values or kn.open:
            ok[k] = v
        else:
            extra[k] = code
            notes.append(f"{k}={v} admitted outside its domain")
    space = space.pin(ok)
    if extra:
        knobs = dict(space.knobs)
        for k, code in extra.items():
            knobs[k] = replace(knobs[k], values=(code,))
        space = replace(space, knobs=knobs)
    return space


def predict(row: dict, variant: dict, chip, base_space, notes: list[str]) -> tuple[float, dict, dict]:
    """(predicted value, best tiling, its estimate row) of one variant of a published row."""
    fields = dict(
        M=int(row["M"]),
        N=int(row["N"]),
        K=int(row["K"]),
        batch=int(row["batch"] or 1),
        layout=row["layout"] or "nn",
        b_format=variant.get("b_format", "nd"),
    )
    if int(variant.get("transpose", 0)):
        if fields["b_format"] != "nd":
            raise TilerError("transpose needs an ND B")
        lay = fields["layout"]
        fields.update(M=fields["N"], N=fields["M"], layout=FLIP[lay[1]] + FLIP[lay[0]])
    problem = parse_problem("matmul", fields, dtype=row["dtype"])
    pins = {k: v for k, v in variant.items() if k not in PROBLEM_KEYS}
    c0 = 32 // problem.in_bytes
    for knob, size, align in (
        ("base_m", problem.M, 16),
        ("base_n", problem.N, 16),
        ("base_k", problem.K, max(16, c0)),
    ):
        cap = -(-size // align) * align
        if knob in pins and int(pins[knob]) > cap:
            notes.append(f"{knob} {pins[knob]}->{cap}")
            pins[knob] = cap
    res = search(problem, chip, pin_space(base_space, pins, notes), top=1)
    est = res.row(0)
    value = est[METRIC_COLUMN[row["metric"]]]
    return float(value), res.tiling(0), est


def evaluate(rows: list[dict], show_tilings: bool, overrides: dict[str, float] | None = None) -> list[dict]:
    base_space = load_space("matmul", "ascend")
    chips = known_chips()
    out = []
    for row in rows:
        a, b = json.loads(row["variant_a"]), json.loads(row["variant_b"])
        pub = float(row["published_ratio"])
        rec = dict(
            id=row["id"],
            knob=row["knob"],
            chip=row["chip"],
            fitted=int(row["fitted"] or 0),
            pub=pub,
            metric=row["metric"],
            status="scored",
            notes=[],
        )
        if "scheme" in a or "scheme" in b:
            rec["status"] = "not expressible"
        elif row["chip"] not in chips:
            rec["status"] = "no chip profile"
        else:
            chip = load_chip(row["chip"])
            if overrides:
                chip = chip.with_values(overrides, tag="what-if", source="bench/ascend_published.py --set")
            try:
                ta, tile_a, est_a = predict(row, a, chip, base_space, rec["notes"])
                tb, tile_b, est_b = predict(row, b, chip, base_space, rec["notes"])
            except TilerError as e:  # an infeasible pin set: reported, not scored
                rec["status"] = f"infeasible: {str(e).splitlines()[0][:90]}"
            else:
                pred = ta / tb
                rec.update(
                    pred=pred,
                    ta=ta,
                    tb=tb,
                    bound_a=est_a["bound"],
                    bound_b=est_b["bound"],
                    agree=direction(pred) == direction(pub),
                    err=math.log(pred / pub),
                )
                if show_tilings:
                    rec["tilings"] = (tile_a, tile_b)
        out.append(rec)
    return out


def report(recs: list[dict], elapsed: float) -> None:
    print(f"{'id':34s} {'knob':18s} {'pub':>7s} {'pred':>7s} dir  {'log err':>8s}  model A / B (us, bound)")
    for r in recs:
        if r["status"] != "scored":
            print(f"{r['id']:34s} {r['knob']:18s} {r['pub']:7.3f} {'':>7s}  -   {'':>8s}  [{r['status']}]")
            continue
        d = f"{direction(r['pub'])}{direction(r['pred'])}{'ok' if r['agree'] else 'XX'}"
        extra = f"  [{'; '.join(r['notes'])}]" if r["notes"] else ""
        what = {"mte2_time": " mte2", "aic_time": " aic"}.get(r["metric"], "")
        print(
            f"{r['id']:34s} {r['knob']:18s} {r['pub']:7.3f} {r['pred']:7.3f} {d:5s}{r['err']:+8.3f}  "
            f"{r['ta']:.1f} {r['bound_a']} / {r['tb']:.1f} {r['bound_b']}{what}{extra}"
        )
        if "tilings" in r:
            for tag, t in zip("AB", r["tilings"], strict=True):
                print(f"    {tag}: " + " ".join(f"{k}={v}" for k, v in t.items()))

    def summary(label: str, sel: list[dict]) -> None:
        s = [r for r in sel if r["status"] == "scored"]
        if not s:
            print(f"  {label:30s} rows {len(sel):3d}, scored 0")
            return
        acc = sum(r["agree"] for r in s) / len(s)
        med = statistics.median(abs(r["err"]) for r in s)
        print(
            f"  {label:30s} rows {len(sel):3d}, scored {len(s):3d}, direction {sum(r['agree'] for r in s):2d}/{len(s):2d}"
            f" = {acc:5.1%}, median |log(pred/pub)| {med:.3f} (x{math.exp(med):.2f})"
        )

    print("\nsummary")
    for f, name in ((1, "fitted (constants fitted on)"), (0, "kept out of fitting")):
        summary(name, [r for r in recs if r["fitted"] == f])
    print("per knob (all rows)")
    for k in sorted({r["knob"] for r in recs}):
        summary(k, [r for r in recs if r["knob"] == k])
    skipped = [r for r in recs if r["status"] != "scored"]
    if skipped:
        reasons = {}
        for r in skipped:
            reasons[r["status"]] = reasons.get(r["status"], 0) + 1
        print("not scored: " + ", ".join(f"{n} {why}" for why, n in reasons.items()))
    docs = {r["source"].split("#")[0] for r in recs}
    scored_docs = {r["source"].split("#")[0] for r in recs if r["status"] == "scored"}
    print(
        f"sources: {len(docs)} documents, {len(scored_docs)} of them with scored rows; elapsed {elapsed:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(DATA / "ascend_published.csv"))
    ap.add_argument(
        "--show-tilings", action="store_true", help="print the model's best tiling of each variant"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what-if: replace a chip profile value for every row (repeatable); not a calibration",
    )
    args = ap.parse_args()
    overrides = {k: float(v) for k, v in (item.split("=", 1) for item in args.set)}
    if overrides:
        print("what-if, chip values replaced: " + ", ".join(f"{k}={v:g}" for k, v in overrides.items()))
    t0 = time.perf_counter()
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    recs = evaluate(rows, args.show_tilings, overrides)
    for r, row in zip(recs, rows, strict=True):
        r["source"] = row["source"]
    report(recs, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
