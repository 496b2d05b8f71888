"""The GPU price table: an on-demand hourly price per catalog GPU, with where it was read
and when (`profiling/data/gpu_prices.json`). A GPU without an entry has no price; the file's
`unpriced` map says, for each such catalog GPU, why (a test holds the two to the catalog)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Price:
    usd_per_hour: float  # per GPU
    source: str  # "…url… (what the page lists)", or "given for this job"
    read: str = ""  # the date the price was read, YYYY-MM-DD

    @property
    def text(self) -> str:
        return f"{self.source} (read {self.read})" if self.read else self.source


@cache
def _table() -> dict[str, Price]:
    raw = json.loads(resources.files("profiling").joinpath("data/gpu_prices.json").read_text())
    return {key: Price(**entry) for key, entry in raw["prices"].items()}


def price(gpu_key: str, given_usd_per_hour: float | None = None) -> Price | None:
    """The hourly price of one `gpu_key` GPU: the one given for the job, else the table's."""
    if given_usd_per_hour is not None:
        return Price(given_usd_per_hour, "given for this job")
    return _table().get(gpu_key)


def usd_per_million_tokens(usd_per_hour: float, tokens_per_second: float) -> float:
    """What a million output tokens cost from GPUs at `usd_per_hour` (all of them together)
    serving `tokens_per_second` (above zero)."""
    return usd_per_hour / 3600 / tokens_per_second * 1e6
