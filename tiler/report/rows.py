"""The report's rows (a problem on a chip, its prediction and targets), their text and their shape families."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..errors import TilerError

INSTALL = "pip install 'tiler[report]'"
TRACE_ROOFLINE = "roofline"  # roofline line traces are named "roofline <chip> <dtype>"
TRACE_TARGET = "target"  # the time chart's per-target markers are named "target <name>"
DIV_IDS = ("tiler-roofline", "tiler-times", "tiler-pipes")
SLOWEST = 5  # the sweep rows detailed under the table: the selected one and this many of the slowest
OPEN_ROWS = 200  # a table of more rows than this starts with every family folded
# A page of more rows than this aggregates: the time chart draws each shape family's distribution (min, quartiles,
# max) instead of a bar per row, the roofline draws points without per-point text, and the table lists each
# family's summary and the TABLE_ROWS slowest rows (every row stays in the sweep's own table). 100,000 rows then
# make a page of a few MB that a browser opens, not 53 MB of table (python -m bench.memory_scale report measures it).
LARGE_ROWS = 2000
TABLE_ROWS = 500
GAP_TIE = 1 + 1e-9  # a target whose best is within this of the unconstrained best reaches it


@dataclass(slots=True)  # slots: a 100,000-row page holds one of these per row and target
class TargetTime:
    """One target's answer for a row: its best predicted time there, that time over the row's unconstrained
    best (`gap`), its bound and tiling where the result gives them; `runs` False: the target cannot run it."""

    runs: bool = True
    time_us: float | None = None
    gap: float | None = None
    bound: str = ""
    tiling: dict | None = None
    same_as_best: bool | None = None


@dataclass(slots=True)  # slots: 100,000 rows without an attribute dict each
class Row:
    """One charted row: what it is, its predicted time and bound, its pipes and its place on the roofline, its
    tiling, shape family and the targets that can run it (None: the result does not say)."""

    label: str
    key: str
    chip_id: str
    dtype: str
    time_us: float
    bound: str
    pipes: dict[str, float] = field(default_factory=dict)
    flops: float = math.nan
    bytes: float = math.nan
    measured_us: float | None = None
    vendor: tuple[str, float] | None = None  # a measured document's vendor call: (name, us)
    title: str = ""  # the label without its number (name or key @ chip; best / alternative i)
    name: str = ""  # the sweep's `name` cell; a document's best / given / alternative i
    family: str = ""
    tiling: dict = field(default_factory=dict)
    targets: dict[str, TargetTime] | None = None
    custom_kernel: bool | None = None
    order: tuple = ()  # the sort key inside the family (chip, token dimension, input order)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else math.nan

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us > 0 else math.nan

    @property
    def tiling_text(self) -> str:
        return tiling_text(self.tiling)

    @property
    def runnable(self) -> list[str]:
        """The targets that can run the row (the result's order)."""
        return [t for t, tt in (self.targets or {}).items() if tt.runs]


@dataclass
class Report:
    source: str
    kind: str  # "sweep" or "document"
    op: str
    entries: list[Row]
    skipped: list[str]  # rows not charted and why
    chips: dict  # chip id -> Chip (those that could be loaded)
    notes: list[str] = field(default_factory=list)
    document: dict | None = None  # the tiler.tiling/v1 document (kind "document"): its views become code


def _plotly():
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise TilerError(f"report: needs plotly, which is not installed: {INSTALL}") from None
    return go


# ------------------------------------------------------------------ text


def _value(v) -> str:
    """A knob value as text: integral floats (a CSV column with empty cells reads as floats) as integers."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    return str(v)


def tiling_text(tiling: dict) -> str:
    """`base_m=128 base_n=256 ...`: the text of a study's `tiling_label`."""
    return " ".join(f"{k}={_value(v)}" for k, v in tiling.items())


def _us(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "-"
    if t < 10:
        return f"{t:.3f} us"
    if t < 1000:
        return f"{t:.2f} us"
    return f"{t:,.1f} us"


def _gap(g: float | None) -> str:
    return "-" if g is None or not math.isfinite(g) else f"{g:.3f}x the best"


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


# ------------------------------------------------------------------ shape families


def name_family(name: str) -> str:
    """A layer's name without its layer index and numbers: `layers.0.qkv_proj` and `model.layers.31.qkv_proj`
    -> `layers.qkv_proj`, `model.layers.qkv_proj`; `blk3.attn_q` -> `blk.attn_q`. Words that are all digits go
    (with the separator before them); a word's trailing digits go unless it is the last word (`mlp.fc1` and
    `mlp.fc2` stay two families: they are two shapes). Empty when nothing but numbers is left."""
    pieces = re.split(r"([._/:\-\s]+)", str(name).strip())
    words, seps = pieces[0::2], pieces[1::2]
    last = max((i for i, w in enumerate(words) if w), default=-1)
    kept: list[tuple[str, str]] = []
    for i, w in enumerate(words):
        if not w or w.isdigit():
            continue
        if i < last:
            w = re.sub(r"(?<=[A-Za-z])\d+$", "", w)
        kept.append((seps[i - 1] if i > 0 else "", w))
    return "".join((s if j else "") + w for j, (s, w) in enumerate(kept))


def shape_family(problem) -> tuple[str, object]:
    """(the family label, the token value) of a problem: every field but the first (the token dimension: M of
    a matmul, rows of a softmax) and the dtype, e.g. `N=4096,K=4096,batch=1 bf16 (M varies)`."""
    shape = problem.shape()
    token = problem.FIELDS[0] if problem.FIELDS else next(iter(shape), "")
    rest = [f"{k}={v}" for k, v in shape.items() if k != token and not problem._default_choice(k, v)]
    return f"{','.join(rest)} {problem.dtype} ({token} varies)", shape.get(token, 0)


def group_rows(rows: list[Row]) -> list[Row]:
    """The rows in the page's order: families in order of first appearance, inside one by `Row.order`; labels
    renumbered `#i` in that order."""
    first: dict[str, int] = {}
    for r in rows:
        first.setdefault(r.family, len(first))
    out = sorted(rows, key=lambda r: (first[r.family], r.order))
    for i, r in enumerate(out):
        r.label = f"#{i} {r.title}"
    return out


def families(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """Consecutive runs of one family (the rows are grouped already)."""
    out: list[tuple[str, list[Row]]] = []
    for r in rows:
        if out and out[-1][0] == r.family:
            out[-1][1].append(r)
        else:
            out.append((r.family, [r]))
    return out
