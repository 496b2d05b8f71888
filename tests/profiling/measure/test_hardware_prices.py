"""The GPU price table: every catalog GPU has either a price that names its page and the day
it was read, or a stated reason it has none."""

from __future__ import annotations

import json
import re
from importlib import resources

from profiling.measure import hardware
from profiling.measure.hardware_prices import price


def _raw() -> dict:
    return json.loads(resources.files("profiling").joinpath("data/gpu_prices.json").read_text())


def test_every_catalog_gpu_has_a_price_or_a_reason_it_has_none() -> None:
    raw = _raw()
    priced, unpriced = set(raw["prices"]), set(raw["unpriced"])
    assert not priced & unpriced
    assert priced | unpriced == set(hardware.catalog())
    for key in unpriced:
        assert price(key) is None
        assert raw["unpriced"][key].strip()


def test_every_price_names_its_page_and_the_day_it_was_read() -> None:
    for key in _raw()["prices"]:
        p = price(key)
        assert p is not None and p.usd_per_hour > 0
        assert p.source.startswith("https://"), key
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.read), key
        assert p.text == f"{p.source} (read {p.read})"
