"""Chip profiles: load `hardware/<id>.toml`, validate it against a schema that is data, freeze it.

A profile is a TOML file with top-level `id`, `family`, `name` and sections whose keys each hold an inline table
`{ value = ..., source = "...", tag = "confirmed" | "derived" | "estimated" | "fitted" }`. Units live in the key
names (`_bytes`, `_gbps`, `_mhz`, `_us`, `_cycles`, `_per_cycle`). The `efficiency` section holds the constants that
`tiler calibrate` fits, kept apart from datasheet numbers so a calibrated profile shows what was fitted. The ranges
of the operators' own constants there are the operators' to check (`tiler.operator.check_constants`, which the use
cases run after loading a chip): this module is data and imports no operator.

Search order for profiles: `--hardware-dir`, then `$TILER_HARDWARE_DIR`, then the shipped `hardware/` folder.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import ConfigError, ProblemError, closest

TAGS = ("confirmed", "derived", "estimated", "fitted")
FAMILIES = ("ascend", "cuda")

# key -> (type, exclusive minimum, required): a value must be > minimum, so 0 means "positive" and -1 allows
# zero (an unsupported dtype has 0 MACs per cycle). `_NUM` accepts ints and floats.
_NUM = (int, float)
_OPEN = "*"  # in a schema section: keys not listed are accepted, checked as the entry under it says
_COMMON = {
    "compute": {
        "cores": (int, 0, True),
        "clock_mhz": (_NUM, 0, True),
        "macs_per_cycle_fp16": (_NUM, 0, True),
        "macs_per_cycle_bf16": (_NUM, -1, True),
        "macs_per_cycle_fp32": (_NUM, -1, True),
        "macs_per_cycle_int8": (_NUM, -1, True),
    },
    "memory": {
        "l2_bytes": (int, 0, True),
        "hbm_bytes": (int, 0, True),
    },
    "bandwidth": {
        "hbm_gbps": (_NUM, 0, True),
        "l2_gbps": (_NUM, 0, True),
    },
}
SCHEMA: dict[str, dict[str, dict[str, tuple]]] = {
    "ascend": {
        "compute": {
            **_COMMON["compute"],
            "vector_cores": (int, -1, True),
            "coupled": (bool, None, True),
            "vector_flops_per_cycle_fp16": (_NUM, 0, True),
        },
        "memory": {
            **_COMMON["memory"],
            "l0a_bytes": (int, 0, True),
            "l0b_bytes": (int, 0, True),
            "l0c_bytes": (int, 0, True),
            "l1_bytes": (int, 0, True),
            "ub_bytes": (int, 0, True),
        },
        "bandwidth": {
            **_COMMON["bandwidth"],
            "gm_to_l1_bytes_per_cycle": (_NUM, 0, True),
            "l1_to_l0a_bytes_per_cycle": (_NUM, 0, True),
            "l1_to_l0b_bytes_per_cycle": (_NUM, 0, True),
            "fixpipe_bytes_per_cycle": (_NUM, 0, True),
            "ub_to_gm_bytes_per_cycle": (_NUM, 0, True),
            "gm_burst_bytes": (int, 0, True),
            "gm_min_efficient_transfer_bytes": (int, 0, True),
            "gm_misaligned_efficiency": (_NUM, 0, True),
        },
        "overhead": {
            "head_base_us": (_NUM, -1, True),
            "head_per_core_us": (_NUM, -1, True),
            "mix_head_us": (_NUM, 0, False),  # a MIX kernel's extra launch (model.common.mix_launch_us)
            "gm_latency_cycles": (_NUM, 0, True),
            "scalar_cycles_per_instr": (_NUM, 0, True),
            "scalar_cycles_per_loop": (_NUM, 0, True),
            "sync_cycles": (_NUM, -1, True),
        },
        "efficiency": {
            "mac_efficiency": (_NUM, 0, True),
            "hbm_efficiency": (_NUM, 0, True),
            "l2_efficiency": (_NUM, 0, True),
            "l2_usable_fraction": (_NUM, 0, True),
            # the operators' own constants (fa_, sm_, dw_ ...): each operator checks the ones it reads
            _OPEN: (_NUM, None, False),
        },
    },
    "cuda": {
        "compute": {**_COMMON["compute"]},
        "memory": {
            **_COMMON["memory"],
            "smem_bytes_per_sm": (int, 0, True),
            "smem_bytes_per_block": (int, 0, True),
            "regs_per_sm": (int, 0, True),
            "regs_per_thread_max": (int, 0, True),
            "max_threads_per_sm": (int, 0, True),
            "max_blocks_per_sm": (int, 0, True),
        },
        "bandwidth": {
            **_COMMON["bandwidth"],
            "vector_load_bytes": (int, 0, True),
            "cache_line_bytes": (int, 0, True),
        },
        "overhead": {
            "launch_us": (_NUM, -1, True),
            "gm_latency_cycles": (_NUM, 0, True),
        },
        # The operators' constants; `tiler calibrate` rewrites these. Any key holding a number is accepted here:
        # each operator declares the constants it reads and checks their ranges (Operator.constants), so an
        # operator's constants can grow without a schema change.
        "efficiency": {_OPEN: (_NUM, None, False)},
    },
}


# The largest value each number of a profile may hold (checked with its type and minimum; every number must also be
# finite): generous for any real chip (an H200 has 132 SMs, a 910B 24 cube cores), small enough that the models'
# per-core arrays and int64 byte counts stay bounded. A key not named here takes the bound of its unit suffix.
MAXIMUM: dict[str, float] = {
    "cores": 1024,  # cube cores / SMs: real chips have tens to a few hundred; the schedule's work grows as cores**2
    "vector_cores": 2048,
    "clock_mhz": 10_000,
    "l2_bytes": 2**34,  # 16 GiB
    "hbm_bytes": 2**46,  # 64 TiB
    "regs_per_sm": 2**24,
    "regs_per_thread_max": 2**16,
    "max_threads_per_sm": 2**16,
    "max_blocks_per_sm": 2**16,
    "gm_misaligned_efficiency": 1.0,
}
# unit suffix -> bound, first match wins; anything else (efficiencies, lanes, scales): NUMBER_MAX
MAXIMUM_BY_UNIT = (
    ("per_cycle", 2**20),  # macs_per_cycle_fp16, *_bytes_per_cycle
    ("_bytes", 2**30),  # on-chip buffers: 1 GiB
    ("_gbps", 1e6),  # 1 PB/s
    ("_us", 1e6),  # 1 s
    ("cycles", 1e9),
)
NUMBER_MAX = 1e12


def maximum(key: str) -> float:
    """The largest value a profile key may hold (MAXIMUM, else by its unit suffix, else NUMBER_MAX)."""
    if key in MAXIMUM:
        return MAXIMUM[key]
    return next((bound for unit, bound in MAXIMUM_BY_UNIT if unit in key), NUMBER_MAX)


@dataclass(frozen=True)
class Chip:
    """A validated, immutable chip profile. `model/` reads numbers from `chip[key]` and trusts them."""

    id: str
    family: str
    name: str
    values: MappingProxyType
    sources: MappingProxyType = field(repr=False)
    tags: MappingProxyType = field(repr=False)
    path: str = field(repr=False, default="")
    profile_hash: str = field(repr=False, default="")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def cores(self) -> int:
        """Cores (Ascend AI cube cores, GPU SMs) the multi-core schedule spreads blocks over."""
        return int(self.values["cores"])

    @property
    def clock_hz(self) -> float:
        return float(self.values["clock_mhz"]) * 1e6

    @property
    def has_tma(self) -> bool:
        """A GPU with the tensor memory accelerator (Hopper, compute capability 9.0 and later): its profile's
        mma_version is 3 (wgmma came with TMA); a profile without the key is taken as Hopper, as the cuda models
        take it. What every TMA kernel variant (the matmul templates, attention's LOADS 1) needs."""
        return self.family == "cuda" and float(self.values.get("mma_version", 3.0)) >= 3

    def macs_per_cycle(self, dtype: str) -> float:
        """Matrix-unit MACs per cycle per core for `dtype` (0: the unit does not support it)."""
        return float(self.values[f"macs_per_cycle_{dtype}"])

    def require_dtype(self, dtype: str) -> None:
        """Raise a one-line error when the matrix unit cannot run `dtype`, naming the ones it can."""
        if self.macs_per_cycle(dtype) <= 0:
            have = [
                k.removeprefix("macs_per_cycle_")
                for k, v in self.values.items()
                if k.startswith("macs_per_cycle_") and v > 0
            ]
            raise ProblemError(f"dtype: {self.id} has no {dtype} matrix unit; supported: {', '.join(have)}")

    def peak_tflops(self, dtype: str = "fp16") -> float:
        return 2 * self.macs_per_cycle(dtype) * self.cores * self.clock_hz / 1e12

    def with_values(self, updates: dict[str, float], tag: str = "fitted", source: str = "") -> Chip:
        """A copy with some values replaced (calibration), their tags and sources updated."""
        vals, srcs, tags = dict(self.values), dict(self.sources), dict(self.tags)
        for k, v in updates.items():
            vals[k], tags[k], srcs[k] = v, tag, source or srcs.get(k, "")
        return Chip(
            self.id,
            self.family,
            self.name,
            MappingProxyType(vals),
            MappingProxyType(srcs),
            MappingProxyType(tags),
            self.path,
            _hash(vals),
        )


def _hash(values: dict) -> str:
    text = repr(sorted(values.items())).encode()
    return hashlib.sha256(text).hexdigest()[:16]


@lru_cache(maxsize=1)
def _builtin_dir() -> Path:
    """The shipped profiles: the repository's `hardware/` in a checkout, package data when installed (where the
    package lies does not change while it runs: found once)."""
    repo = Path(__file__).resolve().parent.parent / "hardware"
    if repo.is_dir():
        return repo
    from importlib import resources

    return Path(str(resources.files("tiler.data") / "hardware"))


def hardware_dirs(extra: str | os.PathLike | None = None) -> list[Path]:
    dirs = []
    if extra:
        dirs.append(Path(extra))
    if os.environ.get("TILER_HARDWARE_DIR"):
        dirs.append(Path(os.environ["TILER_HARDWARE_DIR"]))
    dirs.append(_builtin_dir())
    return dirs


def known_chips(hardware_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """Chip id -> profile path; an earlier folder in the search order wins."""
    found: dict[str, Path] = {}
    for d in reversed(hardware_dirs(hardware_dir)):
        for p in _profiles(d):
            found[p.stem] = p
    return found


_LISTED: dict[Path, tuple[int, list[Path]]] = {}  # folder -> (its mtime, its *.toml files, sorted)
_SETTLED_NS = (
    2_000_000_000  # a folder's mtime this much older than its listing: no change can share that mtime
)


def _profiles(d: Path) -> list[Path]:
    """The *.toml files of folder `d`, sorted ([] when it is not a folder). Listed again when the folder's mtime
    changed (a file added, removed or renamed changes it); a listing taken while the mtime was recent is not
    kept, since a change within the clock's granularity could leave the mtime as it was (git's racy-clean rule)."""
    try:
        st = d.stat()
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    hit = _LISTED.get(d)
    if hit is not None and hit[0] == st.st_mtime_ns:
        return hit[1]
    files = sorted(d.glob("*.toml"))
    if time.time_ns() - st.st_mtime_ns > _SETTLED_NS:
        _LISTED[d] = (st.st_mtime_ns, files)
    return files


def load_chip(chip_id: str, hardware_dir: str | os.PathLike | None = None) -> Chip:
    """Load a profile by id (or by path to a .toml file) and validate it."""
    if chip_id.endswith(".toml") and Path(chip_id).is_file():
        return load_profile(Path(chip_id))
    chips = known_chips(hardware_dir)
    key = chip_id.strip().lower()
    if key not in chips:
        raise ConfigError(f"chip: unknown chip {chip_id!r}; {closest(key, chips)}")
    return _cached(str(chips[key]))


_CACHE: dict[str, tuple[float, Chip]] = {}


def _cached(path: str) -> Chip:
    try:
        mtime = os.path.getmtime(path)
    except OSError as exc:  # a dangling symbolic link, a file removed since the folder was listed
        why = "a dangling symbolic link" if os.path.islink(path) else exc.strerror or str(exc)
        raise ConfigError(f"{path}: cannot read profile: {why}") from None
    hit = _CACHE.get(path)
    if hit and hit[0] == mtime:
        return hit[1]
    chip = load_profile(Path(path))
    _CACHE[path] = (mtime, chip)
    return chip


def load_profile(path: Path) -> Chip:
    """Parse and validate one profile file; every failure names the file and the key."""
    from .space import read_toml

    return parse_profile(read_toml(path, "profile"), str(path))


def parse_profile(raw: dict, where: str) -> Chip:
    for top in ("id", "family", "name"):
        if not isinstance(raw.get(top), str) or not raw.get(top):
            raise ConfigError(f"{where}: key '{top}' is missing or not a string")
    family = raw["family"]
    if family not in SCHEMA:
        raise ConfigError(f"{where}: key 'family' must be one of {', '.join(FAMILIES)}, got {family!r}")
    schema = SCHEMA[family]
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    tags: dict[str, str] = {}
    for section in raw:
        if section in ("id", "family", "name", "description"):
            continue
        if section not in schema:
            raise ConfigError(f"{where}: unknown section [{section}]; {closest(section, schema)}")
    for section, keys in schema.items():
        table = raw.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        for key in table:
            if keys and _OPEN not in keys and key not in keys:
                raise ConfigError(f"{where}: [{section}] unknown key '{key}'; {closest(key, keys)}")
        for key, (_, _, required) in ((k, v) for k, v in keys.items() if k != _OPEN):
            if key not in table and required:
                raise ConfigError(f"{where}: [{section}] missing key '{key}'")
        for key, entry in table.items():
            typ, minimum, _ = keys.get(key, keys.get(_OPEN) or (_NUM, 0, False))
            full = f"{where}: [{section}] {key}"
            if not isinstance(entry, dict) or "value" not in entry:
                raise ConfigError(f'{full}: must be {{ value = ..., source = "...", tag = "..." }}')
            value = entry["value"]
            if typ is bool:
                if not isinstance(value, bool):
                    raise ConfigError(f"{full}: must be true or false, got {value!r}")
            else:
                if isinstance(value, bool) or not isinstance(value, typ):
                    want = "an integer" if typ is int else "a number"
                    raise ConfigError(f"{full}: must be {want} (unit in the key name), got {value!r}")
                if not math.isfinite(value):
                    raise ConfigError(f"{full}: must be a finite number, got {value!r}")
                if minimum is not None and not value > minimum:
                    bound = "positive" if minimum == 0 else f"> {minimum}"
                    raise ConfigError(f"{full}: must be {bound}, got {value!r}")
                if value > maximum(key):
                    raise ConfigError(f"{full}: must be at most {maximum(key):g}, got {value!r}")
            tag = entry.get("tag", "")
            if tag not in TAGS:
                raise ConfigError(f"{full}: tag must be one of {', '.join(TAGS)}, got {tag!r}")
            source = entry.get("source", "")
            if not isinstance(source, str) or not source.strip():
                raise ConfigError(f"{full}: every number needs a non-empty 'source'")
            values[key], sources[key], tags[key] = value, source, tag
    chip = Chip(
        raw["id"],
        family,
        raw["name"],
        MappingProxyType(values),
        MappingProxyType(sources),
        MappingProxyType(tags),
        where,
        _hash(values),
    )
    return chip


def dump_profile(chip: Chip) -> str:
    """Write a profile back as TOML (used by calibration); sections follow the schema."""
    lines = [f'id = "{chip.id}"', f'family = "{chip.family}"', f'name = "{chip.name}"', ""]
    schema = SCHEMA[chip.family]
    placed = set()
    for section, keys in schema.items():
        names = list(keys) if keys else []
        if section == "efficiency":
            names += [
                k
                for k in chip.values
                if k not in placed and k not in names and _section_of(chip, k) == section
            ]
        lines.append(f"[{section}]")
        for key in names:
            if key not in chip.values:
                continue
            placed.add(key)
            v = chip.values[key]
            vs = ("true" if v else "false") if isinstance(v, bool) else repr(v)
            src = chip.sources.get(key, "").replace('"', "'")
            lines.append(f'{key} = {{ value = {vs}, tag = "{chip.tags.get(key, "")}", source = "{src}" }}')
        lines.append("")
    return "\n".join(lines)


def _section_of(chip: Chip, key: str) -> str:
    for section, keys in SCHEMA[chip.family].items():
        if key in keys:
            return section
    return "efficiency"
