"""The GPU power table: a datasheet power figure per catalog GPU, in watts, with the page it
was read from (`profiling/data/gpu_power.json`). The figure is the maximum thermal design power
or board power the vendor prints (the top of a configurable range), a ceiling for provisioning,
not a measured draw. A GPU without an entry has no figure; the file's `unpowered` map says, for
each such catalog GPU, why (a test holds the two to the catalog)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Power:
    watts: float  # per GPU
    source: str  # "…url… (what the page says)"


@cache
def _raw() -> dict:
    return json.loads(resources.files("profiling").joinpath("data/gpu_power.json").read_text())


@cache
def _table() -> dict[str, Power]:
    return {
        key: Power(float(entry["watts"]), entry["source"]) for key, entry in _raw()["power"].items()
    }


def power(gpu_key: str) -> Power | None:
    """The datasheet power of one `gpu_key` GPU, or None where the table has no figure."""
    return _table().get(gpu_key)


def unpowered() -> dict[str, str]:
    """The catalog GPUs with no power figure, each with what was looked for and why none."""
    return dict(_raw()["unpowered"])
