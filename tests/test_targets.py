"""Export targets (tiler.target): what a target-restricted search emits is what the target's code generator accepts.

Three layers:
- a fast property over >= 2,000 random (chip, shape, dtype, layout) cases per target: random candidates of the
  target's space, filled in and filtered the way the exhaustive search does it (first level, `resolve`, every
  mask, `dominated`), estimated in one call per case; the view of each passes the target's rules, and the best is
  exported under the target and passes `tiler.check.check_document` (what `tiler check` runs);
- an end-to-end layer: the real exhaustive search under `--target` through the CLI, `tiler check` on the exported
  file, the emitted code, and the direction facts (a restriction is never faster than the whole space);
- negative tests (a hand-broken view fails `tiler check` with exit 1, naming the rule) and bad input (exit 2, one
  `error:` line, no traceback).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter

import numpy as np
import pytest

from tiler.check import check_document
from tiler.cli import main
from tiler.errors import InfeasibleError, TilerError
from tiler.export import emit_code, tiling_document
from tiler.hardware import known_chips, load_chip
from tiler.operator import _codes, get_operator, problem_class
from tiler.ops.matmul import views
from tiler.problem import parse_problem
from tiler.search import search
from tiler.search.proven import first_level
from tiler.space import length, load_space, take

MATMUL = problem_class("matmul")
# the optional storage fields of the matmul problem (when the problem class has them)
LAYOUTS = tuple(MATMUL.CHOICES.get("layout", ("nn",)))
B_FORMATS = tuple(MATMUL.CHOICES.get("b_format", ("nd",)))

ASCEND = sorted(c for c in known_chips() if load_chip(c).family == "ascend")
ATLAS_A2 = ["ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4", "ascend910_9392"]
NOT_A2 = ["ascend910a", "ascend310p3", "ascend310b1"]
CUDA = ["h200", "h100", "h20", "a100"]
CHIPS = {"catlass": ATLAS_A2, "ascendc": ASCEND, "triton": CUDA}
DTYPES = {
    "catlass": ("fp16", "bf16", "fp32", "int8"),
    "ascendc": ("fp16", "bf16", "fp32", "int8"),
    "triton": ("fp16", "bf16"),
}
TARGETS = tuple(CHIPS)
SEED = {"catlass": 2101, "ascendc": 2102, "triton": 2103}

CASES = 2000  # exercised cases per target in the fast property
MAX_DRAWS = 3000  # draws allowed to reach them (refused and infeasible cases are drawn too)
SAMPLED = 256  # random candidates drawn per case
# the cuda space's TAIL_SPLIT > 1 runs only on the persistent template without SPLIT_K (rule tail_split): about 38% of
# random draws pass that rule, so the triton target draws three times as many for the same share of cases missed
SAMPLED_OF = {"triton": 3 * SAMPLED}
ESTIMATED = 8  # of which at most this many feasible ones are estimated (one vectorised call)
E2E = {"catlass": 25, "ascendc": 25, "triton": 6}  # exhaustive searches per target in the end-to-end layer
DIM_MAX = 65536


# ----------------------------------------------------------------------------------------------------- helpers


def _dim(rng) -> int:
    """A problem dimension, log-uniform in 1..65536: mostly ragged, a quarter rounded to a multiple of 16 or 256."""
    v = int(math.exp(rng.uniform(0.0, math.log(DIM_MAX + 1))))
    v = min(max(v, 1), DIM_MAX)
    if rng.random() < 0.25:
        q = 256 if rng.random() < 0.5 else 16
        v = min(max(q, round(v / q) * q), DIM_MAX)
    return v


_SPACES: dict = {}
_CHIPS: dict = {}


def chip_of(chip_id: str):
    """The chip profile (loaded once per test session)."""
    if chip_id not in _CHIPS:
        _CHIPS[chip_id] = load_chip(chip_id)
    return _CHIPS[chip_id]


def draw_case(rng, target: str):
    """(chip, problem) for one random case of `target`: a chip it names, a dtype that chip's matrix unit runs,
    batch sometimes > 1, any layout, and B in NZ sometimes (on a GPU rarely: the cuda family refuses it)."""
    chip = chip_of(CHIPS[target][rng.integers(len(CHIPS[target]))])
    dtypes = [d for d in DTYPES[target] if chip.macs_per_cycle(d) > 0]
    shape = {"M": _dim(rng), "N": _dim(rng), "K": _dim(rng)}
    if rng.random() < 0.15:
        shape["batch"] = int(rng.choice([2, 3, 4, 8]))
    if len(LAYOUTS) > 1:
        shape["layout"] = LAYOUTS[rng.integers(len(LAYOUTS))]
    if "nz" in B_FORMATS and rng.random() < (0.25 if chip.family == "ascend" else 0.03):
        shape["b_format"] = "nz"
    return chip, parse_problem("matmul", shape, dtypes[rng.integers(len(dtypes))])


def target_space(family: str, target: str):
    """The space restricted to `target` (cached: it is the same for every case of a family)."""
    key = (family, target)
    if key not in _SPACES:
        _SPACES[key] = load_space("matmul", family).for_target(target)
    return _SPACES[key]


_VALUES: dict = {}


def _knob_values(space) -> dict[str, np.ndarray]:
    """Each knob's values as an int64 array (cached per space: target_space's spaces live for the session)."""
    key = id(space)
    if key not in _VALUES or _VALUES[key][0] is not space:
        _VALUES[key] = (space, {k: np.asarray(kn.values, dtype=np.int64) for k, kn in space.knobs.items()})
    return _VALUES[key][1]


def feasible_sample(problem, chip, space, model, rng, n: int = SAMPLED, keep: int = ESTIMATED):
    """Random candidates of `space` that the search could score: first-level rows that pass their rules, the other
    knobs drawn from their domains, the RESOLVED knobs filled by `model.resolve`, then every mask (the operator's
    rules and the target's) and `dominated`, as tiler.search.proven does. None when the first level has no
    feasible row (then no tiling is feasible at all)."""
    resolved = set(model.RESOLVED)
    if model.LEVELS:
        prefixes, _ = first_level(problem, chip, space, model)
        if not length(prefixes):
            return None
        c = take(prefixes, rng.integers(length(prefixes), size=n))
    else:
        c = {}
    for k, values in _knob_values(space).items():
        if k not in c and k not in resolved:
            # rng.choice(values, size=n)'s draws (with replacement it takes rng.integers(len, size=n) and indexes:
            # the same stream, the same rows) without choice's argument checks, 5 us a knob
            c[k] = values[rng.integers(len(values), size=n)]
    if resolved:
        c = model.resolve(problem, chip, c, space.domains(model.RESOLVED))
    ok = np.ones(n, dtype=bool)
    for m in model.masks(problem, chip, c).values():  # an array or a scalar: &= broadcasts it (no copy)
        ok &= m
    ok &= ~model.dominated(problem, chip, c, space.domains())
    return take(c, np.flatnonzero(ok)[:keep])


def _row(est: dict, i: int) -> dict:
    return {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in est.items()}


def _rows(est: dict, n: int) -> list[dict]:
    """[_row(est, i) for i in range(n)], each column converted once (ndarray.tolist gives item()'s values)."""
    cols = {
        k: v.tolist() if isinstance(v, np.ndarray) else [_row({k: v}, i)[k] for i in range(n)]
        for k, v in est.items()
    }
    return [{k: col[i] for k, col in cols.items()} for i in range(n)]


def row_problems(problem, chip, space, model, cands, est) -> list[str]:
    """Every estimated candidate: the operator's views of it are exactly its target's, and that view breaks none of
    the target's rules (Target.check, from the view alone). One line per candidate that fails."""
    target = model.target
    out = []
    tilings = [space.decode(cands, i) for i in range(length(cands))]
    every = model.views_of(problem, chip, tilings, _rows(est, length(cands)), cands)
    for tiling, got in zip(tilings, every, strict=True):
        if set(got) != {target.name}:
            bad = [f"views {sorted(got)}"]
        else:
            bad = target.check(got[target.name], chip, problem)
        if bad:
            out.append(f"{chip.id} {problem} {tiling}: {'; '.join(bad)}")
    return out


def export_problems(problem, chip, space, target: str, cands, est, i: int) -> list[str]:
    """Everything wrong with the `target` export of candidate i: its view missing, the document or the view's
    schema broken, or a finding of `tiler check` (check_document). Empty: the target and `tiler check` accept it.
    One line for the candidate.

    check_document covers all of Target.broken (so the view is not also run through it here): it matches the
    view against the same target's schema (export.validate, raising TilerError) and runs the same Target.check
    on it (a finding per broken rule), then checks the view against the tiling it says it is the view of."""
    tiling = space.decode(cands, i)
    doc = tiling_document(
        problem, chip, tiling, _row(est, i), target=target, cand=take(cands, slice(i, i + 1))
    )
    if set(doc["targets"]) != {target}:
        bad = [f"the {target} export carries views {sorted(doc['targets'])}"]
    else:
        try:
            checked, findings = check_document(doc)
        except TilerError as exc:  # the document or its view does not match its schema
            checked, findings = 1, [f"refused: {exc}"]
        bad = [f"tiler check checked {checked} views"] if checked != 1 else []
        bad += [f"tiler check: {f}" for f in findings]
    return [f"{chip.id} {problem} {tiling}: {'; '.join(bad)}"] if bad else []


def shape_text(problem) -> str:
    return ",".join(f"{k}={v}" for k, v in problem.shape().items())


def one_error_line(capsys, argv: list[str], *needles: str) -> str:
    """Run the CLI: exit 2, exactly one stderr line starting with `error:` that contains every needle."""
    try:
        rc = main(argv)
    except Exception as exc:  # an input error must never reach the user as a traceback (exit 1)
        pytest.fail(f"tiler {' '.join(argv)} raised {exc!r} instead of exiting 2 with one line")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert rc == 2, f"exit {rc}\nstdout: {out}\nstderr: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ----------------------------------------------------------------------------------- the target's own chips


def test_catlass_runs_on_the_atlas_a2_chips_only():
    """The chips the catlass property draws are exactly the known Ascend chips CATLASS's AtlasA2 arch runs on."""
    p = parse_problem("matmul", {"M": 256, "N": 256, "K": 256})
    runs = [c for c in ASCEND if views.CATLASS.why_not(load_chip(c), p) is None]
    assert runs == sorted(ATLAS_A2)
    assert sorted(set(ASCEND) - set(runs)) == sorted(NOT_A2)


def _expresses_row(model, t, p, chip, one) -> bool:
    """The per-row definition: the row's knobs in the target's domains, then every rule of the operator and of
    the target met (each evaluated on the one-row table)."""
    for knob, values in t.domains.items():
        if knob in one and int(one[knob][0]) not in _codes(model, knob, values):
            return False
    masks = {**model.feasible(p, chip, one), **t.rule_masks(p, chip, one)}
    return all(bool(np.asarray(m)[0]) for m in masks.values())


def test_a_table_of_rows_is_expressed_row_for_row():
    """Operator.expressed on a table (what views_of, and so every export, uses) is, row for row, the per-row
    definition on a one-row table: no rule reads another row of the table."""
    rng = np.random.default_rng(31)
    seen = Counter()
    for family, chip_id in (("ascend", "ascend910b3"), ("ascend", "ascend310p3"), ("cuda", "h200")):
        chip = chip_of(chip_id)
        model = get_operator("matmul", family)
        space = load_space("matmul", family)
        for _ in range(12):
            p = parse_problem("matmul", {"M": _dim(rng), "N": _dim(rng), "K": _dim(rng)}, "fp16")
            c = {
                k: rng.choice(np.asarray(kn.values, dtype=np.int64), size=40) for k, kn in space.knobs.items()
            }
            for t in model.TARGETS.values():
                got = model.expressed(t, p, chip, c)
                want = [_expresses_row(model, t, p, chip, take(c, slice(i, i + 1))) for i in range(40)]
                assert got.tolist() == want, (chip_id, p, t.name)
                seen.update(got.tolist())
    assert seen[True] and seen[False], seen  # both answers occur


# --------------------------------------------------------------------------- layer (a): the fast property


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_every_sampled_tiling_passes_its_target(target):
    """>= 2,000 random cases per target: every feasible candidate the target's search could emit (sampled, resolved
    and filtered as the search does) exports a view that passes the target's rules and `tiler check`."""
    rng = np.random.default_rng(SEED[target])
    seen = Counter()
    failures: list[str] = []
    while seen["exercised"] < CASES and seen["drawn"] < MAX_DRAWS:
        seen["drawn"] += 1
        chip, p = draw_case(rng, target)
        model = get_operator("matmul", chip.family, target)
        try:
            model.admit(p, chip)
        except TilerError as exc:  # the target (or the family) cannot run the problem: a one-line input error
            assert "\n" not in str(exc)
            seen["refused"] += 1
            continue
        space = target_space(chip.family, target)
        cands = feasible_sample(p, chip, space, model, rng, SAMPLED_OF.get(target, SAMPLED))
        if cands is None or not length(cands):
            # no feasible row sampled: the exhaustive search decides whether there is none at all
            try:
                search(p, chip, space, top=1)
                seen["missed"] += 1
            except InfeasibleError:
                seen["infeasible"] += 1
            continue
        est = model.estimate(p, chip, cands)
        t = np.asarray(est["time_us"], dtype=np.float64)
        assert np.all(np.isfinite(t) & (t > 0)), (chip.id, p)
        bad = row_problems(p, chip, space, model, cands, est)
        # the best of them (the one a search over these rows would emit): the whole export, and `tiler check`
        bad += export_problems(p, chip, space, target, cands, est, int(np.argmin(t)))
        failures += bad
        seen["exercised"] += 1
        seen["rows"] += length(cands)
        seen["failed"] += bool(bad)
    assert not failures, f"{len(failures)} candidate(s) rejected ({dict(seen)}):\n" + "\n".join(failures[:6])
    assert seen["exercised"] >= CASES, dict(seen)
    admitted = seen["drawn"] - seen["refused"]
    # a target space with no feasible tiling for the problem: uncommon (catlass: about 10% of these draws, int8
    # with M or N <= 16: the 32-element CATLASS alignment of L1TileShape exceeds align16(M), the fix_split rule);
    # a sample that missed every row of a space that has some: rare
    assert seen["infeasible"] <= 0.12 * admitted, dict(seen)
    assert seen["missed"] <= 0.01 * admitted, dict(seen)


# ------------------------------------------------------------------------------- layer (b): end to end


def _any_best(problem, chip) -> float:
    return float(search(problem, chip, load_space("matmul", chip.family), top=1).est["time_us"][0])


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_search_export_check_emit_end_to_end(target, tmp_path, capsys):
    """The exhaustive search under `--target` through the CLI: its export carries the target's view only, passes
    `tiler check` (exit 0, `ok`), emits code, and is no faster than the unconstrained search's best (a restriction
    of the space cannot find a faster tiling)."""
    rng = np.random.default_rng(SEED[target] + 7)
    done = infeasible = drawn = 0
    failures: list[str] = []
    while done < E2E[target]:
        drawn += 1
        assert drawn < 4 * E2E[target], "too many draws refused or infeasible"
        chip, p = draw_case(rng, target)
        try:
            get_operator("matmul", chip.family, target).admit(p, chip)
        except TilerError:
            continue
        path = tmp_path / f"{target}_{drawn}.json"
        argv = ["search", "--op", "matmul", "--chip", chip.id, "--shape", shape_text(p), "--dtype", p.dtype]
        argv += ["--target", target, "--top", "1", "--export", str(path)]
        rc = main(argv)
        out, err = capsys.readouterr()
        if rc == 2 and "no feasible tiling" in err:  # the target's space is empty for this problem: one line
            assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
            infeasible += 1
            continue
        assert rc == 0, f"tiler {' '.join(argv)}: exit {rc}\n{err}"
        done += 1
        doc = json.loads(path.read_text())
        assert doc["search"]["target"] == target and doc["search"]["proven_optimal"] is True
        assert set(doc["targets"]) == {target}, (chip.id, p, doc["targets"])
        assert emit_code(doc, target).strip()
        rc = main(["check", str(path)])
        out, err = capsys.readouterr()
        if rc != 0 or out.strip() != f"{path}: ok (1 view checked, no rule broken)":
            failures.append(f"tiler {' '.join(argv)}; tiler check: exit {rc}: {out.strip()} {err.strip()}")
        best_any = _any_best(p, chip)
        if doc["estimate"]["time_us"] < best_any * (1 - 1e-9):
            failures.append(
                f"{chip.id} {p}: {target} best {doc['estimate']['time_us']} < any best {best_any}"
            )
    assert not failures, f"{len(failures)} of {done} searches:\n" + "\n".join(failures)
    assert infeasible <= max(2, E2E[target] // 5)


@pytest.mark.parametrize(
    "target, chip_id", [("catlass", "ascend910b3"), ("ascendc", "ascend910b4"), ("triton", "h200")]
)
def test_cli_emit_prints_the_exported_views_code(target, chip_id, tmp_path, capsys):
    """`--emit T` prints what emit_code writes for the `--target T` export of the same search."""
    path = tmp_path / "t.json"
    argv = ["search", "--op", "matmul", "--chip", chip_id, "--shape", "M=1000,N=768,K=512"]
    assert main([*argv, "--target", target, "--export", str(path)]) == 0
    capsys.readouterr()
    assert main([*argv, "--emit", target]) == 0
    out, _ = capsys.readouterr()
    assert out == emit_code(json.loads(path.read_text()), target)


def test_any_exports_carry_only_views_that_pass():
    """The unconstrained search's best (a few ragged problems per chip family) exports, under `any`, only views
    whose target accepts them (a tiling no target runs has no view: check's no-view finding, not a broken rule)."""
    rng = np.random.default_rng(77)
    for target in ("catlass", "ascendc", "triton"):
        for _ in range(3):
            chip, p = draw_case(rng, target)
            try:
                get_operator("matmul", chip.family).admit(p, chip)
            except TilerError:
                continue
            res = search(p, chip, load_space("matmul", chip.family), top=1)
            doc = tiling_document(p, chip, res.tiling(0), res.row(0), cand=take(res.cands, slice(0, 1)))
            assert [f for f in check_document(doc)[1] if f.target] == [], (chip.id, p, res.tiling(0))


def test_catlass_restriction_on_the_issues_case():
    """910B3, 4096^3 fp16: the unconstrained best cannot be written as CATLASS (A and B take different L1 K steps,
    so CATLASS's one L1TileShape K overflows the 512 KiB L1); the catlass search's best is slower and passes. The
    910B3's efficiencies and head as they were when the case was found (issue 29's fit moved them, and the optimum
    with them: its tiles are then written as CATLASS by another rule)."""
    chip = load_chip("ascend910b3").with_values(
        {"mac_efficiency": 0.95, "l2_efficiency": 0.8, "hbm_efficiency": 0.85, "head_base_us": 1.0}
    )
    p = parse_problem("matmul", {"M": 4096, "N": 4096, "K": 4096}, "fp16")
    free = search(p, chip, load_space("matmul", "ascend"), top=1)
    best = search(p, chip, load_space("matmul", "ascend").for_target("catlass"), top=1)
    t_free, t_cat = float(free.est["time_us"][0]), float(best.est["time_us"][0])
    assert t_cat > t_free

    one = take(free.cands, slice(0, 1))
    masks = views.catlass_masks(p, chip, one, list(views.CATLASS_RULES))
    assert not masks["catlass_l1"][0] and not masks["catlass_one_k"][0]
    forced = views.catlass_view(p, chip, free.tiling(0), free.row(0))
    broken = views.check_catlass(forced, chip, p)
    assert any(r.startswith("L1TileShape exceeds L1") for r in broken), broken
    doc = tiling_document(p, chip, free.tiling(0), free.row(0), cand=one)
    assert "catlass" not in doc["targets"]  # an `any` export never carries a view its target rejects

    tiling = best.tiling(0)
    assert tiling["step_ka"] == tiling["step_kb"]
    doc = tiling_document(p, chip, tiling, best.row(0), target="catlass", cand=take(best.cands, slice(0, 1)))
    view = doc["targets"]["catlass"]
    l1m, l1n, l1k = view["L1TileShape"]
    assert (l1m * l1k + l1k * l1n) * 2 * view["DispatchPolicy"].get("L1_STAGES", 2) <= 512 * 1024
    assert views.CATLASS.broken(view, chip, p) == []
    assert check_document(doc) == (1, [])


# ------------------------------------------------------------------------------- check can fail (exit 1)


@pytest.fixture(scope="module")
def good_docs():
    """A good export per target: 1000x768x512 fp16, catlass on 910B3, ascendc on 910B4, triton on H200."""
    out = {}
    for target, chip_id in (("catlass", "ascend910b3"), ("ascendc", "ascend910b4"), ("triton", "h200")):
        chip = load_chip(chip_id)
        p = parse_problem("matmul", {"M": 1000, "N": 768, "K": 512}, "fp16")
        res = search(p, chip, load_space("matmul", chip.family).for_target(target), top=1)
        doc = tiling_document(
            p, chip, res.tiling(0), res.row(0), target=target, cand=take(res.cands, slice(0, 1))
        )
        assert check_document(doc) == (1, [])
        out[target] = doc
    return out


def _check_fails(doc, tmp_path, capsys, *needles: str) -> list[str]:
    """`tiler check` on `doc`: exit 1, every finding on stdout as FILE: WHERE: RULE, the needles among them."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    assert main(["check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = out.strip().splitlines()
    assert lines and all(line.startswith(f"{path}: targets/") for line in lines), out
    for needle in needles:
        assert any(needle in line for line in lines), (needle, out)
    return lines


def test_check_rejects_a_catlass_l1_tile_over_512_kib(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["catlass"])
    view = doc["targets"]["catlass"]
    pol = view["DispatchPolicy"]
    stages = pol["L1_STAGES"] if pol["name"] == "MmadAtlasA2PreloadAsync" else 2
    m, n, k = view["L1TileShape"]
    while (m * k + k * n) * 2 * stages <= 512 * 1024:
        k += 256  # stays 32-byte aligned and >= the L0 K
    view["L1TileShape"][2] = k
    assert views.CATLASS.broken(
        view, load_chip("ascend910b3"), parse_problem("matmul", doc["problem"]["shape"])
    )
    lines = _check_fails(doc, tmp_path, capsys, "L1TileShape exceeds L1", "L1TileShape.2 is")
    # the rule broken once, and the view no longer the one of the document's tiling
    assert len(lines) == 2 and sum("exceeds" in line for line in lines) == 1, lines


def test_check_rejects_a_tcube_tiling_with_another_core_count(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["ascendc"])
    f = doc["targets"]["ascendc"]["TCubeTiling"]
    f["usedCoreNum"] = f["usedCoreNum"] - 1 if f["usedCoreNum"] > 1 else 2
    _check_fails(doc, tmp_path, capsys, "usedCoreNum")


def test_check_rejects_a_triton_config_over_shared_memory(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["triton"])
    view = doc["targets"]["triton"]
    kw, limit = view["kwargs"], load_chip("h200")["smem_bytes_per_block"]
    while (kw["BLOCK_M"] * kw["BLOCK_K"] + kw["BLOCK_K"] * kw["BLOCK_N"]) * 2 * view["num_stages"] <= limit:
        kw["BLOCK_K"] *= 2
    lines = _check_fails(doc, tmp_path, capsys, "shared memory", "kwargs.BLOCK_K is")
    assert len(lines) == 2 and sum("shared memory" in line for line in lines) == 1, lines


@pytest.mark.parametrize("chip_id", NOT_A2)
def test_check_rejects_a_catlass_view_on_a_chip_it_does_not_run_on(good_docs, chip_id, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["catlass"])
    doc["chip"]["id"] = chip_id
    _check_fails(doc, tmp_path, capsys, "AtlasA2", chip_id)


# ---------------------------------------------------------------------------------- bad input (exit 2)


def _write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_check_missing_file(tmp_path, capsys):
    path = str(tmp_path / "nope.json")
    one_error_line(capsys, ["check", path], path, "cannot read")


@pytest.mark.parametrize(
    "name, content, needle",
    [
        ("binary.json", bytes(range(256)) * 4, "cannot read"),
        ("bad.json", '{"schema": "tiler.tiling/v1", ', "not JSON"),
        ("array.json", [1, 2, 3], "JSON object"),
        ("other.json", {"schema": "other/v1"}, "schema"),
        ("empty.json", "", "not JSON"),
        ("deep.json", "[" * 100000, "not JSON"),
    ],
)
def test_check_not_a_tiler_document(name, content, needle, tmp_path, capsys):
    path = _write(tmp_path, name, content)
    one_error_line(capsys, ["check", path], path, needle)


def test_check_unknown_target_in_the_document(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["catlass"])
    doc["targets"]["nosuch"] = doc["targets"]["catlass"]
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], "nosuch")


def test_check_a_target_of_the_other_family_in_the_document(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["ascendc"])
    doc["targets"]["triton"] = good_docs["triton"]["targets"]["triton"]
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], "triton")


def test_check_unknown_chip(good_docs, tmp_path, capsys):
    doc = copy.deepcopy(good_docs["ascendc"])
    doc["chip"]["id"] = "ascend999z"
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], "ascend999z")


@pytest.mark.parametrize(
    "target, chip_id", [("ascendc", "h200"), ("catlass", "a100"), ("triton", "ascend910b3")]
)
def test_check_a_chip_of_another_family_than_the_document(good_docs, target, chip_id, tmp_path, capsys):
    """A foreign document: `chip.family` says one family, `chip.id` names a chip of the other."""
    doc = copy.deepcopy(good_docs[target])
    doc["chip"]["id"] = chip_id
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], chip_id)


@pytest.mark.skipif("nz" not in B_FORMATS, reason="the matmul problem has no b_format field")
def test_check_a_layout_the_family_cannot_do(good_docs, tmp_path, capsys):
    """B in Ascend's NZ format in a GPU (triton) document: the cuda family cannot read it."""
    doc = copy.deepcopy(good_docs["triton"])
    doc["problem"]["shape"]["b_format"] = "nz"
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], "b_format")


def test_check_a_dtype_the_chip_cannot_run(good_docs, tmp_path, capsys):
    """A bf16 problem on the 910A (no bf16 matrix unit), its AscendC view otherwise intact."""
    doc = copy.deepcopy(good_docs["ascendc"])
    doc["chip"]["id"] = "ascend910a"
    doc["problem"]["dtype"] = "bf16"
    path = _write(tmp_path, "t.json", doc)
    one_error_line(capsys, ["check", path], "bf16")


@pytest.mark.parametrize("target", ["nosuch", "triton"])
def test_check_option_target_not_of_the_operator(good_docs, target, tmp_path, capsys):
    path = _write(tmp_path, "t.json", good_docs["catlass"])
    one_error_line(capsys, ["check", "--target", target, path], target)


SEARCH = ["search", "--op", "matmul", "--shape", "M=256,N=256,K=256"]


def test_search_unknown_target(capsys):
    one_error_line(capsys, [*SEARCH, "--chip", "ascend910b3", "--target", "nosuch"], "--target", "nosuch")


def test_search_target_of_the_other_family(capsys):
    one_error_line(capsys, [*SEARCH, "--chip", "h200", "--target", "catlass"], "catlass", "triton")
    one_error_line(capsys, [*SEARCH, "--chip", "ascend910b3", "--target", "triton"], "triton", "catlass")


@pytest.mark.parametrize("chip_id", NOT_A2)
def test_search_catlass_on_a_chip_that_is_not_atlas_a2(chip_id, capsys):
    one_error_line(capsys, [*SEARCH, "--chip", chip_id, "--target", "catlass"], "catlass", chip_id)


def test_search_emit_another_target_than_searched(capsys):
    argv = [*SEARCH, "--chip", "ascend910b3", "--target", "ascendc", "--emit", "catlass"]
    one_error_line(capsys, argv, "--emit", "catlass")


@pytest.mark.parametrize(
    "target, pin",
    [("catlass", "serpentine=0"), ("catlass", "core_split=block"), ("ascendc", "core_split=walk")],
)
def test_search_pin_the_target_cannot_express(target, pin, capsys):
    argv = [*SEARCH, "--chip", "ascend910b3", "--target", target, "--fix", pin]
    one_error_line(capsys, argv, pin.split("=")[0], target)


@pytest.mark.skipif("nz" not in B_FORMATS, reason="the matmul problem has no b_format field")
@pytest.mark.parametrize("target", ["any", "triton"])
def test_search_b_nz_on_a_gpu(target, capsys):
    argv = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=256,N=256,K=256,b_format=nz"]
    one_error_line(capsys, [*argv, "--target", target], "b_format", "nz")


@pytest.mark.skipif(len(LAYOUTS) < 2, reason="the matmul problem has no layout field")
def test_search_unknown_layout(capsys):
    argv = ["search", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=256,N=256,K=256,layout=xy"]
    one_error_line(capsys, argv, "layout", "xy")
