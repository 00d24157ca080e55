"""Matmul on Ascend, the space's definition: its knobs, enumeration levels and capacity/alignment rules."""

from __future__ import annotations

KNOBS = (
    "base_m",
    "base_n",
    "base_k",
    "step_m",
    "step_n",
    "step_ka",
    "step_kb",
    "l1_stages",
    "preload",
    "l0_pingpong",
    "multi_load",
    "weight_resident",
    "iterate_order",
    "swizzle_offset",
    "swizzle_direction",
    "serpentine",
    "tail_split",
    "split_k",
    "core_split",
)
# Knobs that only change which core runs which tile (and so L2 hits, balance): bound() holds for all of them.
SCHEDULE_KNOBS = ("swizzle_offset", "swizzle_direction", "serpentine", "tail_split", "core_split")
# Knobs whose best value follows from the others in closed form (see resolve()); not enumerated unless pinned.
RESOLVED = ("l0_pingpong", "l1_stages", "preload")


# Enumeration levels: each level's rules prune before the next level multiplies the table.
LEVELS = (
    ("base_m", "base_n", "base_k", "split_k"),
    ("step_m", "step_n", "step_ka", "step_kb", "weight_resident"),
    ("multi_load", "iterate_order"),
)
# Capacity and alignment rules and the knobs each needs (AscendC TCubeTiling rules, research §3).
RULES = {
    "align": ("base_m", "base_n", "base_k"),
    "fix_split": ("base_m", "base_n", "base_k"),
    "split_k": ("base_k", "split_k"),
    "l0a": ("base_m", "base_k", "l0_pingpong"),
    "l0b": ("base_n", "base_k", "l0_pingpong"),
    "l0c": ("base_m", "base_n"),
    "mdl_step": ("base_k", "step_m", "step_n", "step_ka", "step_kb", "split_k"),
    "k_step_ratio": ("base_k", "step_ka", "step_kb", "split_k", "weight_resident"),
    "l1": (
        "base_m",
        "base_n",
        "base_k",
        "step_m",
        "step_n",
        "step_ka",
        "step_kb",
        "l1_stages",
        "weight_resident",
        "split_k",
    ),
    "preload": ("l1_stages", "preload"),
}
RULE_TEXT = {
    "align": "base_m/base_n multiples of 16, base_k a multiple of 16 and of C0 (32 B / element)",
    "fix_split": "base_m <= align16(M), base_n <= align16(N), base_k <= alignC0(K) (SetFixSplit)",
    "split_k": "split_k <= number of base_k steps in K",
    "l0a": "base_m*base_k*bytes*(1+l0_pingpong) <= L0A",
    "l0b": "base_n*base_k*bytes*(1+l0_pingpong) <= L0B",
    "l0c": "base_m*base_n*4 <= L0C (fp32/int32 accumulator)",
    "mdl_step": "step_m > 1 needs A fully loaded along K (step_ka*base_k >= K slice); same for step_n and B",
    "k_step_ratio": "A's and B's L1 load counts along K (kaStepIter, kbStepIter) must divide one another",
    "l1": "A and B L1 buffers (all stages; a resident B panel holds its whole K slice) <= L1",
    "preload": "preload < l1_stages",
}
