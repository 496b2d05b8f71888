"""The fleet table against published serving points (bench/fleet_vs_published.py), on one
real group (Llama 3.1 8B, 1,000 + 1,000 tokens, TensorRT-LLM, four GPU kinds): each
kind's published $ per million output tokens follows from its row's own figures and the
price table, the kind stands for its cheapest row, and the estimate's is the same
arithmetic over the estimate's throughput. No fleet is sized here (the script does that).
"""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest

from profiling.measure.hardware_prices import price
from profiling.options import KV_CACHE_FORMATS

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fleet_vs_published.py"
GROUP = ("llama-3.1-8b", 1000, 1000, "TensorRT-LLM")


@pytest.fixture(scope="module")
def bench() -> dict:
    return runpy.run_path(str(BENCH))


@pytest.fixture(scope="module")
def members(bench) -> list[dict]:
    """The group's rows, expressed (only rows of its lengths, to stay quick)."""
    rows = [r for r in bench["load_rows"]()
            if (r.get("input_tokens"), r.get("output_tokens")) == GROUP[1:3]]  # fmt: skip
    configs = bench["load_configs"]()
    groups, _ = bench["grouped"](rows, [bench["express"](r, configs) for r in rows])
    return groups[GROUP]


def _per_gpu(row: dict) -> float:
    scope = row["throughput_scope"]
    return row["output_tokens_per_s"] / (1 if scope == "per_gpu" else row["gpu_count"])


def test_published_cost_is_the_rows_own_throughput_at_the_tables_price(bench, members):
    kinds = bench["kinds_of"](members)
    assert len(kinds) >= 2
    for key, entry in kinds.items():
        row = next(m["row"] for m in members if m["row"]["id"] == entry["row"])
        hourly = price(key).usd_per_hour
        assert entry["usd_per_gpu_hour"] == hourly
        expected = hourly / (_per_gpu(row) * 3600) * 1e6
        assert entry["published_usd_per_mtok"] == pytest.approx(expected, rel=1e-12)
        predicted = next(m["result"] for m in members if m["row"]["id"] == entry["row"])
        throughput = predicted["metrics"]["throughput"]["predicted"]
        estimated = hourly / (throughput / row["gpu_count"] * 3600) * 1e6
        assert entry["estimated_usd_per_mtok"] == pytest.approx(estimated, rel=1e-12)


def test_a_kind_stands_for_its_cheapest_row(bench, members):
    kinds = bench["kinds_of"](members)
    for key, entry in kinds.items():
        own = [m["row"] for m in members if m["result"]["setup"]["gpu"] == key]
        assert entry["rows_of_kind"] == len(own)
        assert entry["row"] == max(own, key=_per_gpu)["id"]
    assert any(e["rows_of_kind"] > 1 for e in kinds.values())  # H100: two tables' rows


def test_a_pair_is_a_violation_only_past_the_band(bench, members):
    kinds = bench["kinds_of"](members)
    for band in (0.0, 10.0):
        for pair in bench["verdicts"](kinds, {}, band):
            a, b = kinds[pair["cheaper"]], kinds[pair["dearer"]]
            assert a["published_usd_per_mtok"] <= b["published_usd_per_mtok"]
            ratio = a["estimated_usd_per_mtok"] / b["estimated_usd_per_mtok"]
            assert pair["estimate_ratio"] == pytest.approx(ratio)
            assert pair["estimate_violation"] == (ratio > 1 + band)
            assert math.isnan(pair["fleet_ratio"]) and not pair["fleet_violation"]


def test_the_fleet_is_held_to_the_rows_published_format(bench, members):
    fp8 = next(m["result"]["setup"] for m in members if m["result"]["setup"]["dtype"] == "fp8")
    weights, kv = bench["formats"](fp8)[1:]
    assert weights == "fp8"
    assert kv == ("fp8" if fp8["kv_dtype"] == KV_CACHE_FORMATS["fp8"] else "auto")
