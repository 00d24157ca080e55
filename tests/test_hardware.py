"""Shipped chip profiles load, carry a source and tag for every number, match the research peaks, and bad
profiles fail with a `ConfigError` that names the file and the key."""

from __future__ import annotations

import copy
import os
import tomllib

import pytest

from tiler import hardware
from tiler.errors import ConfigError
from tiler.hardware import SCHEMA, TAGS, known_chips, load_chip, parse_profile

# fp16 dense matrix-unit peak in TFLOPS, from shared/research/ascend_hardware.md §1 and the NVIDIA datasheets.
FP16_PEAK_TFLOPS = {
    "ascend910b1": 363.7,
    "ascend910b2": 353.9,
    "ascend910b3": 294.9,
    "ascend910b4": 245.8,
    "ascend910_9392": 363.7,
    "ascend910a": 262.0,
    "ascend310p3": 69.5,
    "ascend310b1": 10.0,
    "h100": 989.4,
    "h200": 989.4,
    "a100": 312.0,
    "h20": 148.0,
}

# Cube cores (Ascend AIC / AI cores) or SMs.
CORES = {
    "ascend910b1": 24,
    "ascend910b2": 24,
    "ascend910b3": 20,
    "ascend910b4": 20,
    "ascend910_9392": 24,
    "ascend910a": 32,
    "ascend310p3": 8,
    "ascend310b1": 1,
    "h100": 132,
    "h200": 132,
    "a100": 108,
    "h20": 78,
}

SHIPPED = sorted(FP16_PEAK_TFLOPS)


@pytest.fixture(autouse=True)
def _shipped_only(monkeypatch):
    """Read the repository's `hardware/` only, whatever the caller's environment says."""
    monkeypatch.delenv("TILER_HARDWARE_DIR", raising=False)


def _raw(chip_id: str) -> dict:
    return tomllib.loads(known_chips()[chip_id].read_text())


def test_every_expected_profile_is_shipped():
    assert set(SHIPPED) <= set(known_chips())


@pytest.mark.parametrize("chip_id", SHIPPED)
def test_profile_loads_with_every_schema_key(chip_id):
    chip = load_chip(chip_id)
    assert chip.id == chip_id
    assert chip.family in hardware.FAMILIES
    for section, keys in SCHEMA[chip.family].items():
        for key, rule in keys.items():
            # required keys only: optional ones and the open marker may be absent
            if rule is not None and rule[2]:
                assert key in chip.values, f"{chip_id}: [{section}] {key} missing"


@pytest.mark.parametrize("chip_id", SHIPPED)
def test_every_value_has_a_source_and_a_valid_tag(chip_id):
    chip = load_chip(chip_id)
    assert chip.values, chip_id
    for key in chip.values:
        assert chip.tags[key] in TAGS, f"{chip_id}: {key} tag {chip.tags[key]!r}"
        assert chip.sources[key].strip(), f"{chip_id}: {key} has no source"
    # The raw file agrees: every entry of every section is an inline table with value, tag and source.
    for section, table in _raw(chip_id).items():
        if not isinstance(table, dict):
            continue
        for key, entry in table.items():
            assert set(entry) == {"value", "tag", "source"}, f"{chip_id}: [{section}] {key}"


@pytest.mark.parametrize("chip_id", SHIPPED)
def test_fp16_peak_matches_research(chip_id):
    expected = FP16_PEAK_TFLOPS[chip_id]
    assert load_chip(chip_id).peak_tflops("fp16") == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("chip_id", SHIPPED)
def test_core_count(chip_id):
    assert load_chip(chip_id).cores == CORES[chip_id]


@pytest.mark.parametrize("chip_id", ["ascend910a", "ascend310p3"])
def test_unsupported_cube_dtypes_are_zero(chip_id):
    chip = load_chip(chip_id)
    for dtype in ("bf16", "fp32"):
        assert chip.macs_per_cycle(dtype) == 0
        assert "not supported" in chip.sources[f"macs_per_cycle_{dtype}"]


@pytest.mark.parametrize(
    ("chip_id", "coupled"),
    [
        ("ascend910b3", False),
        ("ascend910_9392", False),
        ("ascend910a", True),
        ("ascend310p3", True),
        ("ascend310b1", True),
    ],
)
def test_coupled_chips_count_one_vector_unit_per_core(chip_id, coupled):
    chip = load_chip(chip_id)
    assert chip["coupled"] is coupled
    assert chip["vector_cores"] == (chip.cores if coupled else 2 * chip.cores)


# --- bad profiles: each mutation must fail with a ConfigError naming the file and the key -------------------------


def _drop(section, key):
    def mutate(raw):
        del raw[section][key]

    return mutate


def _set_value(section, key, value):
    def mutate(raw):
        raw[section][key]["value"] = value

    return mutate


def _drop_source(section, key):
    def mutate(raw):
        del raw[section][key]["source"]

    return mutate


def _blank_source(section, key):
    def mutate(raw):
        raw[section][key]["source"] = "  "

    return mutate


def _add_key(section, key):
    def mutate(raw):
        raw[section][key] = {"value": 1, "tag": "estimated", "source": "typo"}

    return mutate


BAD = [
    ("missing key", "ascend910b3", _drop("compute", "clock_mhz"), "clock_mhz"),
    ("missing key", "h200", _drop("memory", "smem_bytes_per_block"), "smem_bytes_per_block"),
    ("string for a number", "ascend910b3", _set_value("memory", "l2_bytes", "192 MB"), "l2_bytes"),
    ("string for a number", "h100", _set_value("bandwidth", "hbm_gbps", "3350"), "hbm_gbps"),
    ("float for an int", "h20", _set_value("compute", "cores", 78.0), "cores"),
    ("zero", "ascend910b4", _set_value("bandwidth", "hbm_gbps", 0), "hbm_gbps"),
    ("negative", "a100", _set_value("compute", "clock_mhz", -1410), "clock_mhz"),
    ("negative macs", "ascend910a", _set_value("compute", "macs_per_cycle_bf16", -1), "macs_per_cycle_bf16"),
    ("missing source", "ascend310p3", _drop_source("compute", "cores"), "cores"),
    ("blank source", "h200", _blank_source("overhead", "launch_us"), "launch_us"),
    ("unknown key", "ascend910b1", _add_key("compute", "cube_freq_mhz"), "cube_freq_mhz"),
    ("unknown key", "h100", _add_key("memory", "smem_per_sm_bytes"), "smem_per_sm_bytes"),
]


@pytest.mark.parametrize(
    ("what", "chip_id", "mutate", "key"), BAD, ids=[f"{b[1]}-{b[0]}-{b[3]}" for b in BAD]
)
def test_bad_profile_names_file_and_key(what, chip_id, mutate, key):
    raw = copy.deepcopy(_raw(chip_id))
    parse_profile(copy.deepcopy(raw), "good.toml")  # the unmutated file is valid
    mutate(raw)
    with pytest.raises(ConfigError) as info:
        parse_profile(raw, "bad.toml")
    message = str(info.value)
    assert "bad.toml" in message, message
    assert key in message, message


def test_bad_tag_names_file_and_key():
    raw = _raw("ascend910b3")
    raw["bandwidth"]["l2_gbps"]["tag"] = "guessed"
    with pytest.raises(ConfigError, match=r"bad\.toml.*l2_gbps"):
        parse_profile(raw, "bad.toml")


def test_unknown_section_names_file_and_section():
    raw = _raw("h200")
    raw["bandwith"] = {}
    with pytest.raises(ConfigError, match=r"bad\.toml.*bandwith"):
        parse_profile(raw, "bad.toml")


def test_a_folder_of_profiles_is_listed_again_when_it_changes(tmp_path):
    """known_chips keeps a folder's listing only while the folder is unchanged: a profile added or removed is
    seen at once, also when the folder's mtime is too recent to tell a change from none (git's racy-clean rule)."""
    (tmp_path / "chip_a.toml").write_text("")
    old = 1_000_000_000  # long settled: the listing is kept
    os.utime(tmp_path, ns=(old, old))
    assert set(known_chips(tmp_path)) >= {"chip_a"} and "chip_b" not in known_chips(tmp_path)
    (tmp_path / "chip_b.toml").write_text("")  # the folder's mtime moves: listed again
    assert {"chip_a", "chip_b"} <= set(known_chips(tmp_path))
    (tmp_path / "chip_a.toml").unlink()
    assert "chip_a" not in known_chips(tmp_path)
    # a change that leaves a recent mtime as it was (two changes within one clock tick): still seen
    now = os.stat(tmp_path).st_mtime_ns
    assert "chip_c" not in known_chips(tmp_path)
    (tmp_path / "chip_c.toml").write_text("")
    os.utime(tmp_path, ns=(now, now))
    assert "chip_c" in known_chips(tmp_path)
