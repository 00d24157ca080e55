"""Depthwise convolution on Ascend (910B-style separated cube and vector cores): group_loop, group_opt, vector.

The output is an img2col product per channel: M = output pixels over the batch, K = kh*kw taps, N = 1. A *tile*
is `tile_m` output pixels of `groups_per_op` channels (G); tiles go to cores in order, the M tiles of one channel
group after another (tile i -> core i mod cores, schedule.column_major_counts), so a core's next tile usually keeps the
group's weight in L1. Per scheme, a tile costs:

* group_loop (G = 1): one cube op per channel, K = kh*kw padded to the fractal depth K0 (32 bytes: 16 fp16
  elements) and N = 1 padded to 16, so the cube issues 16*roundK0(kh*kw)/(kh*kw) times the useful MACs; the loop over channels repeats the op's instruction, flag and
  loop overhead and moves one channel's rows per transfer (small strided transfers).
* group_opt (G >= 2): G channels in one op with a block-diagonal weight, K = roundK0(G*kh*kw), N = round16(G):
  the useful fraction is G*kh*kw / (K*N) (geometry.useful_fraction); one transfer instruction moves G channels'
  rows, and the overhead is paid once per G channels. The expanded weight is read from GM (K*N elements per op)
  and, with weight_expand=per_call, first built by a vector pass in every call (its time is added).
* vector: direct convolution on the vector cores (AIV): kh*kw fp32 multiply-adds per output (64 lanes a cycle),
  one vector instruction per channel, tap and 16 KB of lanes; a stride > 1 gathers its taps with an extra pass.

Each pipe's time is bytes or operations over its rate (profile numbers); with double_buffer the tile costs its
slowest pipe, without it the load, compute and write-out in series plus one GM latency. The kernel takes the
busiest core's tiles (edge tiles at their real size), the HBM floor of all bytes, and the head overhead. Halo
rows read again by the next tile of a channel are L2 hits. docs/model.md "Depthwise convolution" has the
equations, the reasons, and what is a guess.
"""

from __future__ import annotations

import numpy as np

from ...model.common import (
    PIPES_OF,
    ceil_div,
    classify_bound,
    group_rows,
    roofline_us,
    round_up,
    segment_efficiency,
)
from ...model.schedule import column_major_counts
from ...operator import Operator, register
from ...space import load_space
from ...target import Target
from . import views
from .geometry import GROUP_LOOP, GROUP_OPT, VECTOR, input_elems, k0, packed_k, scheme_groups, useful_fraction
from .problem import DepthwiseConv

KNOBS = ("scheme", "groups_per_op", "tile_m", "double_buffer", "weight_expand")
RULES = {
    "dtype": ("scheme",),
    "scheme_groups": ("scheme", "groups_per_op"),
    "groups": ("groups_per_op",),
    "tile": ("tile_m",),
    "l0a": ("scheme", "tile_m"),
    "l0c": ("scheme", "groups_per_op", "tile_m"),
    "l1": ("scheme", "groups_per_op", "tile_m", "double_buffer"),
    "ub": ("scheme", "groups_per_op", "tile_m", "double_buffer"),
}
RULE_TEXT = {
    "dtype": "the cube schemes need the chip's matrix unit for the dtype; the vector scheme casts to fp32 and takes "
    "fp16, fp32 and (where the architecture has bf16 datapaths) bf16, not int8",
    "scheme_groups": "group_loop packs 1 channel per op (groups_per_op = 1); group_opt packs at least 2",
    "groups": "groups_per_op <= C (no more channels per op than the layer has)",
    "tile": "tile_m a multiple of 16 (the cube fractal's M)",
    "l0a": "one fractal-deep (32-byte) slice of the img2col tile, tile_m*32 B*2 (ping-pong) <= L0A",
    "l0c": "the fp32 accumulator tile_m*round16(groups_per_op)*4 <= L0C",
    "l1": "cube schemes: the input rows of G channels (x2 with double_buffer) + the expanded weight <= L1",
    "ub": "vector: input rows, fp32 accumulator and output of G channels (x2 with double_buffer) <= UB",
}
EDGE_TYPES = 4  # work vector columns per reuse state: full tile, last group, last pixel tile, corner


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _l1_bytes(p: DepthwiseConv, c: dict) -> np.ndarray:
    g, m = _i(c, "groups_per_op"), _i(c, "tile_m")
    rows = g * input_elems(p, m) * p.in_bytes * (1 + _i(c, "double_buffer"))
    weight = packed_k(p, g) * round_up(g, 16) * p.in_bytes
    return rows + weight


def _ub_bytes(p: DepthwiseConv, c: dict) -> np.ndarray:
    g, m = _i(c, "groups_per_op"), _i(c, "tile_m")
    per = g * (input_elems(p, m) * p.in_bytes + m * p.out_bytes)
    return per * (1 + _i(c, "double_buffer")) + g * m * 4  # fp32 accumulator, single


def _vector_dtype(p: DepthwiseConv, chip) -> bool:
    """Whether the vector scheme runs the dtype: it casts to fp32, which fp16 and fp32 allow everywhere and bf16
    where the architecture has bf16 datapaths (its cube does); int8 is left to the cube."""
    return p.dtype in ("fp16", "fp32") or (p.dtype == "bf16" and chip.macs_per_cycle("bf16") > 0)


def _peak_flops(p: DepthwiseConv, chip) -> float:
    """The faster of the two units that can run the problem: the cube at its dtype rate, the vector cores at
    their fp32 multiply-add rate (the vector scheme's)."""
    vector = chip["vector_flops_per_cycle_fp16"] / 2 * _vector_units(chip) * chip.clock_hz
    return max(chip.peak_tflops(p.dtype) * 1e12, vector if _vector_dtype(p, chip) else 0.0)


def _vector_units(chip) -> int:
    """Cores the vector scheme spreads over: the AIVs of a separated chip, the AI cores of a coupled one."""
    return int(chip["vector_cores"]) or chip.cores


def _input_transfers(p: DepthwiseConv, scheme, g, run) -> tuple[np.ndarray, np.ndarray]:
    """(share of the read bytes that are useful, transfer instructions) of a tile's input, by the layout:

    * nchw: one contiguous run of `run` elements per channel; one transfer per channel (group_loop, vector's
      per-channel rows), one strided transfer of g blocks for group_opt;
    * nhwc: each pixel's g channels are one segment of g*b bytes (the whole run when g is every channel), all
      in one strided transfer (a pixel's narrow segment pays its 32-byte granule);
    * nc1hwc0: g channels span ceil(g / C0) blocks, each a contiguous run of `run` pixels x C0 channels, all
      in one strided transfer; a block's channels past g are read too (C0 is the read's unit)."""
    b = p.in_bytes
    if p.layout == "nhwc":
        seg = segment_efficiency(np.where(g >= p.C, run * p.C * b, g * b))
        return seg, np.ones_like(seg)
    if p.layout == "nc1hwc0":
        blocks = ceil_div(g, p.c0)
        seg = segment_efficiency(run * p.c0 * b) * g / (blocks * p.c0)
        return seg, np.ones_like(seg)
    seg = segment_efficiency(run * b)
    return seg * np.ones(np.shape(g)), np.where(scheme == GROUP_OPT, 1, g)


def tile_cost(p: DepthwiseConv, chip, c: dict, m, g, reuse, active) -> dict:
    """Seconds one tile of `m` pixels x `g` channels keeps each pipe of its core busy, and the tile's time.

    reuse: the core's previous tile had the same channel group (its weight is still in L1); active: cores
    loading at once (they share the HBM). Arguments broadcast over candidates.
    """
    f = chip.clock_hz
    b = p.in_bytes
    scheme, buf = _i(c, "scheme"), _i(c, "double_buffer")
    cube = scheme != VECTOR
    hbm_share = chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"] / active
    lat = chip["gm_latency_cycles"] / f
    # --- MTE2 (GM -> L1 or UB): the input rows of g channels (their pixels' window)
    run = input_elems(p, m)
    in_bytes = g * run * b
    w_bytes = np.where(
        reuse, 0.0, np.where(scheme == GROUP_OPT, packed_k(p, g) * round_up(g, 16) * b, g * p.taps * b)
    )
    seg, xfers = _input_transfers(p, scheme, g, run)
    core_gm = chip["gm_to_l1_bytes_per_cycle"] * f
    t_mte2 = in_bytes / (np.minimum(core_gm, hbm_share) * seg) + w_bytes / np.minimum(core_gm, hbm_share)
    xfers = xfers + (w_bytes > 0)
    # --- cube: img2col into L0A (Load3D), weight into L0B, MMAD, fixpipe write-out
    kp, np16, m16 = packed_k(p, g), round_up(g, 16), round_up(m, 16)
    macs = m16 * kp * np16
    # (a dtype the cube lacks leaves only vector rows feasible: the rate's floor keeps their arrays finite)
    rate = max(chip.macs_per_cycle(p.dtype) * chip["mac_efficiency"], 1e-9)
    t_mac = np.where(cube, macs / rate / f, 0.0)
    t_mte1 = np.where(
        cube,
        (
            m16 * kp * b / chip["l1_to_l0a_bytes_per_cycle"]
            + np.where(reuse, 0.0, kp * np16 * b / chip["l1_to_l0b_bytes_per_cycle"])
        )
        / f,
        0.0,
    )
    # the fixpipe drains the whole L0C tile (round16(g) columns) at its rate, but only the g useful columns
    # reach GM (one output row of m pixels per channel), at the core's share of the HBM
    drain = m16 * np16 * p.out_bytes / (chip["fixpipe_bytes_per_cycle"] * f)
    t_fix = np.where(cube, np.maximum(drain, g * m * p.out_bytes / hbm_share), 0.0)
    # --- vector: kh*kw fp32 FMAs per output (half the fp16 lanes), an extra gather pass per tap for stride > 1,
    # the fp16 <-> fp32 casts of input and output; MTE3 writes the output from UB
    lanes = (
        chip["vector_flops_per_cycle_fp16"] / 4
    )  # fp32 FMAs per cycle (two flops each, half the fp16 lanes)
    passes = p.taps * (1 + (p.stride > 1)) + 2
    vec_ops = g * m * passes
    t_vec = np.where(cube, 0.0, vec_ops / (lanes * chip["mac_efficiency"]) / f)
    t_mte3 = np.where(
        cube, 0.0, g * m * p.out_bytes / np.minimum(chip["ub_to_gm_bytes_per_cycle"] * f, hbm_share)
    )
    # --- scalar: each instruction is issued by the scalar unit, each loop iteration pays its head and flags
    vec_instr = (
        g * passes * ceil_div(m * 4, 255 * 256)
    )  # one instruction per channel, pass and 255 repeats of 256 B
    cube_instr = 3 + ceil_div(kp, k0(p))  # Load3D per K fractal column, Load2D, MMAD, fixpipe
    instr = xfers + np.where(cube, cube_instr, vec_instr + 1)
    t_scalar = (
        instr * chip["scalar_cycles_per_instr"] + chip["scalar_cycles_per_loop"] + 3 * chip["sync_cycles"]
    ) / f
    # --- composition: double-buffered tiles cost their slowest pipe; single-buffered ones load, compute and
    # write in series and wait one GM latency
    t_out = np.where(cube, t_fix, t_mte3)
    t_comp = np.where(cube, np.maximum(t_mac, t_mte1), t_vec)
    piped = np.maximum(np.maximum(t_mte2 + t_out, t_comp), t_scalar)  # reads and writes share the GM port
    serial = t_mte2 + lat + t_comp + t_out + t_scalar
    busy = np.where(buf == 1, piped, serial)
    return {
        "busy": busy,
        "fill": np.where(buf == 1, lat + t_mte2, 0.0),
        "mac": t_mac,
        "vec": t_vec,
        "scalar": t_scalar,
        "mte1": t_mte1,
        "mte2": t_mte2,
        "mte3": t_mte3,
        "fixpipe": t_fix,
        "read": in_bytes + w_bytes,
        "macs": np.where(cube, macs, 0.0),
    }


def _grid(p: DepthwiseConv, c: dict) -> dict:
    g, m = _i(c, "groups_per_op"), _i(c, "tile_m")
    gm, gn = ceil_div(p.pixels, m), ceil_div(p.C, g)
    return {
        "gm": gm.astype(np.int64),
        "gn": gn.astype(np.int64),
        "m_last": p.pixels - (gm - 1) * m,
        "g_last": p.C - (gn - 1) * g,
        "tiles": (gm * gn).astype(np.int64),
    }


def _expand_us(p: DepthwiseConv, chip, c: dict) -> np.ndarray:
    """weight_expand=per_call: a vector kernel writes the block-diagonal weight to GM before the cube kernel (its
    write time over the vector cores and a second launch head); offline expansion costs nothing per call."""
    g = _i(c, "groups_per_op")
    per_call = (_i(c, "scheme") == GROUP_OPT) & (_i(c, "weight_expand") == 1)
    bytes_ = ceil_div(p.C, g) * packed_k(p, g) * round_up(g, 16) * p.in_bytes
    write = bytes_ / (chip["ub_to_gm_bytes_per_cycle"] * chip.clock_hz * _vector_units(chip)) * 1e6
    return np.where(per_call, write + chip["head_base_us"], 0.0)


ASCENDC_CONV = Target(
    name="ascendc_conv",
    doc="an AscendC depthwise kernel: scheme, packing, tile and the on-chip buffers a tile fills",
    schema=views.ASCENDC_CONV_SCHEMA,
    view=lambda p, chip, t, row: views.ascendc_conv_view(p, t, row, _vector_units(chip)),
    check=lambda v, chip, p: views.check_ascendc_conv(v, chip, p, _vector_units(chip)),
    emit=views.ASCENDC_TILING.emit,
    language="cpp",
    includes=views.ASCENDC_TILING.includes,
    entry=views.ASCENDC_TILING.entry,
)


@register
class DepthwiseConvAscend(Operator):
    OP = "depthwise_conv"
    FAMILY = "ascend"
    PROBLEM = DepthwiseConv
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    SAMPLE_ORDER = ("scheme", "groups_per_op", "tile_m")
    GRID_KNOBS = ("scheme", "groups_per_op", "tile_m")
    SHAPE_KNOBS = ("scheme", "groups_per_op", "tile_m")
    CHECKLIST = {
        "cube": "compute bound: the cube issues padded MACs; pack more channels per op (group_opt) or move the "
        "taps to the vector unit",
        "vector": "vector bound: kh*kw multiply-adds per output; the cube (group_opt) has more throughput if its "
        "padding waste is below the vector/cube rate ratio",
        "mte2": "memory bound: read each input row once (larger tile_m cuts halo re-reads), make transfers long "
        "and contiguous, double-buffer",
        "mte1": "L1->L0 bound: the img2col expansion moves K_pad elements per pixel; fewer padded taps",
        "mte3": "write-out bound (UB -> GM): larger, contiguous output runs",
        "fixpipe": "write-out bound: the fixpipe drains round16(G) columns per pixel; G a multiple of 16",
        "scalar": "scalar bound: fewer, larger ops (more channels per op, larger tiles), fewer loop heads",
        "latency": "no pipe saturated: double-buffer the input so MTE2 overlaps compute",
    }
    WHAT_IF = {
        "double_buffer": ("latency: ping-pong the input buffer", (0, 1)),
        "tile_m": (
            "memory: tile length (halo re-reads, transfer size, per-tile overhead)",
            (256, 1024, 4096),
        ),
        "weight_expand": ("weight: expand the block-diagonal weight offline, once", (0,)),
    }
    TARGETS = {"ascendc_conv": ASCENDC_CONV}

    def advice(self, p: DepthwiseConv, chip, c: dict, est: dict, row: int) -> list[str]:
        """The scheme comparison (each other scheme's best packing at this tile) and the useful-MAC fraction."""
        out = []
        t = {k: int(np.asarray(v)[row]) for k, v in c.items()}
        base = float(est["time_us"][row])
        if t["scheme"] != VECTOR:
            frac = float(est["useful_mac_fraction"][row])
            out.append(
                f"compute: {frac:.1%} of the cube's issued MACs are useful (K = {t['groups_per_op']}*{p.taps} taps "
                f"padded to {int(packed_k(p, t['groups_per_op']))}, N = {t['groups_per_op']} padded to "
                f"{int(round_up(t['groups_per_op'], 16))})"
            )
        names = {GROUP_LOOP: "group_loop", GROUP_OPT: "group_opt", VECTOR: "vector"}
        domain = np.array(load_space(self.OP, self.FAMILY, builtin=True).knobs["groups_per_op"].values)
        for s in (GROUP_LOOP, GROUP_OPT, VECTOR):
            if s == t["scheme"]:
                continue
            gs = domain[scheme_groups(np.full(domain.size, s), domain)]
            alt = {k: np.full(gs.size, v, dtype=np.int64) for k, v in t.items()}
            alt.update(
                scheme=np.full(gs.size, s), groups_per_op=gs, weight_expand=np.zeros(gs.size, dtype=np.int64)
            )
            ok = np.logical_and.reduce(list(self.feasible(p, chip, alt).values()))
            if not ok.any():
                continue
            times = self.estimate(p, chip, {k: v[ok] for k, v in alt.items()})["time_us"]
            i = int(np.argmin(times))
            gain = 1.0 - float(times[i]) / base
            verb = f"predicts -{gain:.0%}" if gain > 0 else f"would be {-gain:.0%} slower"
            out.append(
                f"scheme: {names[s]} with groups_per_op={int(gs[ok][i])} at this tile_m {verb} "
                f"({base:.1f} -> {float(times[i]):.1f} us)"
            )
        return out + super().advice(p, chip, c, est, row)

    def warm_start(self, p: DepthwiseConv, chip) -> dict:
        """CANN's group-opt choice for fp16 depthwise: lcm(1 channel per group, 16) = 16 channels per cube op,
        double-buffered, the weight expanded offline."""
        return dict(
            scheme="group_opt", groups_per_op=16, tile_m=1024, double_buffer=1, weight_expand="offline"
        )

    def check(self, p: DepthwiseConv, chip) -> None:
        """Some scheme must run the dtype: the cube when the matrix unit has it, else the vector unit."""
        if not _vector_dtype(p, chip):
            chip.require_dtype(p.dtype)

    def feasible(self, p: DepthwiseConv, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        out = {}
        for r in names:
            if r == "dtype":
                out[r] = np.where(
                    _i(c, "scheme") == VECTOR, _vector_dtype(p, chip), chip.macs_per_cycle(p.dtype) > 0
                )
            elif r == "scheme_groups":
                out[r] = scheme_groups(_i(c, "scheme"), _i(c, "groups_per_op"))
            elif r == "groups":
                out[r] = _i(c, "groups_per_op") <= p.C
            elif r == "tile":
                out[r] = _i(c, "tile_m") % 16 == 0
            elif r == "l0a":
                out[r] = (_i(c, "scheme") == VECTOR) | (_i(c, "tile_m") * 32 * 2 <= chip["l0a_bytes"])
            elif r == "l0c":
                fits = _i(c, "tile_m") * round_up(_i(c, "groups_per_op"), 16) * 4 <= chip["l0c_bytes"]
                out[r] = (_i(c, "scheme") == VECTOR) | fits
            elif r == "l1":
                out[r] = (_i(c, "scheme") == VECTOR) | (_l1_bytes(p, c) <= chip["l1_bytes"])
            elif r == "ub":
                out[r] = (_i(c, "scheme") != VECTOR) | (_ub_bytes(p, c) <= chip["ub_bytes"])
        return out

    def dominated(self, p: DepthwiseConv, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """weight_expand changes nothing but group_opt: elsewhere per_call is an exact twin of offline."""
        domains = domains or {}
        if "weight_expand" not in c or "scheme" not in c:
            return super().dominated(p, chip, c, domains)
        twin = 0 in domains.get("weight_expand", (0,))
        return twin & (_i(c, "scheme") != GROUP_OPT) & (_i(c, "weight_expand") == 1)

    def estimate(self, p: DepthwiseConv, chip, c: dict) -> dict[str, np.ndarray]:
        """The estimate record plus `tiles`, `useful_mac_fraction`, `issued_macs` and the L1 / UB bytes a tile
        fills, per candidate."""
        n = len(c["scheme"])
        scheme = _i(c, "scheme")
        cube = scheme != VECTOR
        grid = _grid(p, c)
        units = np.where(cube, chip.cores, _vector_units(chip)).astype(np.int64)
        # per-core work: each distinct (grid, units) simulated once; tile types 0-3 (edge), +4 weight reuse
        first, gi = group_rows([grid["gm"], grid["gn"], units, grid["m_last"], grid["g_last"]])
        works, sums = [], []  # per grid: the distinct per-core work vectors (D, 8), and all cores' sum (8,)
        for i in first:
            gm, gn, k = int(grid["gm"][i]), int(grid["gn"][i]), int(units[i])
            edge_m, edge_n = (
                bool(grid["m_last"][i] < c["tile_m"][i]),
                bool(grid["g_last"][i] < c["groups_per_op"][i]),
            )
            # the M tiles of one channel group, then the next group, in closed form (any number of tiles)
            counts = column_major_counts(gm, gn, k, edge_m, edge_n)
            works.append(np.unique(counts, axis=0))
            sums.append(counts.sum(axis=0))
        m_full, g_full = _i(c, "tile_m"), _i(c, "groups_per_op")
        sizes_m = (m_full, m_full, grid["m_last"], grid["m_last"])
        sizes_g = (g_full, grid["g_last"], g_full, grid["g_last"])
        active = np.minimum(units, grid["tiles"]).astype(np.float64)
        cost = {}
        for t in range(2 * EDGE_TYPES):
            tc = tile_cost(p, chip, c, sizes_m[t % 4], sizes_g[t % 4], t >= 4, active)
            for k, v in tc.items():
                cost.setdefault(k, np.zeros((n, 2 * EDGE_TYPES)))[:, t] = v
        busy = np.zeros(n)
        crit = np.zeros((n, 2 * EDGE_TYPES))
        mean = np.zeros(n)
        used = np.zeros(n)
        for j, vec in enumerate(works):
            rows = np.flatnonzero(gi == j)
            t = cost["busy"][rows] @ vec.T  # (rows, D): each distinct core's busy time
            pick = t.argmax(axis=1)
            busy[rows] = t[np.arange(rows.size), pick]
            crit[rows] = vec[pick]
            mean[rows] = cost["busy"][rows] @ sums[j]
            used[rows] = min(int(units[first[j]]), int(grid["tiles"][first[j]]))
        fill = cost["fill"][:, 0]
        make = busy + fill
        mean = (mean + fill * used) / units
        totals = np.stack(sums)[gi]
        read = np.einsum("rt,rt->r", cost["read"], totals)
        out_bytes = float(p.pixels * p.C * p.out_bytes)
        hbm = p.compulsory_bytes + np.where(
            (scheme == GROUP_OPT),
            ceil_div(p.C, g_full) * packed_k(p, g_full) * round_up(g_full, 16) * p.in_bytes,
            0,
        )
        hbm_floor = hbm / (chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"])
        head = chip["head_base_us"] + chip["head_per_core_us"] * used
        expand = _expand_us(p, chip, c)
        time_us = np.maximum(make, hbm_floor) * 1e6 + head + expand
        pipes = {k: np.zeros(n) for k in PIPES_OF["ascend"]}
        for k in ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe"):
            pipes[k] = np.einsum("rt,rt->r", cost[k], crit) * 1e6
        # reads and write-outs share the core's GM port: together they are the transfer bound
        zero = np.zeros(n)
        gm = dict(pipes, mte2=pipes["mte2"] + pipes["fixpipe"] + pipes["mte3"], fixpipe=zero, mte3=zero)
        bound = np.where(
            pipes["fixpipe"] > pipes["mte2"],
            classify_bound(pipes, make * 1e6),
            classify_bound(gm, make * 1e6),
        )
        bound = np.where(hbm_floor > make, "mte2", bound)
        issued = np.where(cube, np.einsum("rt,rt->r", cost["macs"], totals), p.pixels * p.C * p.taps)
        useful = np.where(cube, useful_fraction(p, g_full, packed_k(p, g_full), round_up(g_full, 16)), 1.0)
        return {
            "time_us": time_us,
            "bound": bound,
            **{f"{k}_us": v for k, v in pipes.items()},
            "cores_used": used.astype(np.int64),
            "waves": ceil_div(grid["tiles"], units).astype(np.int64),
            "balance": mean / np.maximum(make, 1e-30),
            "l2_hit_rate": 1.0 - np.minimum(hbm - out_bytes, read) / np.maximum(read, 1.0),
            "hbm_bytes": hbm.astype(np.float64),
            "l2_bytes": read + out_bytes,
            "roofline_us": roofline_us(
                p.flops, p.compulsory_bytes, _peak_flops(p, chip), chip["hbm_gbps"] * 1e9, head
            ),
            "tiles": grid["tiles"],
            "useful_mac_fraction": useful,
            "issued_macs": issued.astype(np.float64),
            # the on-chip buffers a tile fills (the rules' left-hand sides; the export view names them)
            "l1_bytes": np.where(cube, _l1_bytes(p, c), 0).astype(np.int64),
            "ub_bytes": np.where(cube, 0, _ub_bytes(p, c)).astype(np.int64),
        }
