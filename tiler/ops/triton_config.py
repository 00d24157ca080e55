"""What the Triton targets of every operator emit: the `triton.Config` a user pastes."""

from __future__ import annotations


def triton_config(kwargs: dict, num_warps: int, num_stages: int) -> str:
    """One `triton.Config(...)` expression, as a user pastes it into `@triton.autotune(configs=[...])`."""
    args = ", ".join(f'"{k}": {v}' for k, v in kwargs.items())
    return f"triton.Config({{{args}}}, num_warps={num_warps}, num_stages={num_stages})"


def triton_entry(view: dict, doc: dict) -> dict:
    """One library entry of a Python dispatch unit (Target.entry): the arguments of its `triton.Config`, as data
    (the unit builds the Config when asked, so it imports without triton)."""
    return {
        "kwargs": dict(view["kwargs"]),
        "num_warps": int(view["num_warps"]),
        "num_stages": int(view["num_stages"]),
    }
