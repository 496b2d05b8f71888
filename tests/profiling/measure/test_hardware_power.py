"""The GPU power table: every catalog GPU has either a datasheet power figure that names its
page and the text read there, or a stated reason it has none."""

from __future__ import annotations

import json
from importlib import resources

from profiling.measure import hardware
from profiling.measure.hardware_power import Power, power, unpowered


def _raw() -> dict:
    return json.loads(resources.files("profiling").joinpath("data/gpu_power.json").read_text())


def test_every_catalog_gpu_has_a_figure_or_a_reason_it_has_none() -> None:
    raw = _raw()
    powered, without = set(raw["power"]), set(raw["unpowered"])
    assert not powered & without
    assert powered | without == set(hardware.catalog())
    assert unpowered() == raw["unpowered"]
    for key in without:
        assert power(key) is None
        assert raw["unpowered"][key].strip()


def test_every_figure_is_a_plausible_wattage_that_names_its_page_and_quote() -> None:
    for key, entry in _raw()["power"].items():
        p = power(key)
        assert p is not None
        assert 0 < p.watts < 2000, key
        assert p.source.startswith("https://"), key
        assert entry["quote"].strip(), key


def test_power_returns_the_tables_figure_and_source() -> None:
    table = _raw()["power"]
    for key in ("H100-SXM", "A100-80GB", "L4", "MI300X"):
        assert key in table, key
        assert power(key) == Power(float(table[key]["watts"]), table[key]["source"])
    for key, entry in table.items():
        assert power(key) == Power(float(entry["watts"]), entry["source"]), key


def test_an_unknown_gpu_has_no_figure() -> None:
    assert power("NO-SUCH-GPU") is None
