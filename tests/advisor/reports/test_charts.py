"""Report charts and unit filters, built from stored real profiles of the demo model.

The profiles are real CLI runs stored by ./scripts/make-fixtures, shared with
the view tests through `real_demo_profile` and `real_spec_profile`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from advisor.reports import charts, experiment_charts
from profiling import units
from profiling.profile import Profile
from profiling.quantization.results import DOES_NOT_FIT, QuantVariant
from profiling.units import GIB, MIB
from tests.advisor.cachedata import (
    caching_result,
    disaggregation_result,
    parallel_result,
    sample_reuse,
    with_caching,
    with_parallel,
)
from tests.advisor.quantdata import quantization_result, with_quantization

FIXTURES = Path(__file__).parents[1] / "fixtures"


def stored_result(name: str) -> dict[str, Any]:
    """A stored `Profile.to_dict()` of a real CLI run on the demo model (a fresh copy).

    Made by ./scripts/make-fixtures; the site's tests read results, they do not
    measure them.
    """
    return json.loads((FIXTURES / name).read_text())


def real_demo_profile() -> dict[str, Any]:
    """A quick run of `demo` at the form's default workload, H100 target, "generation" stated."""
    return stored_result("cli_demo_generation.json")


def real_spec_profile() -> dict[str, Any]:
    """A quick speculative run of `demo` with its draft at K 1 and 2."""
    return stored_result("cli_speculative.json")


@pytest.fixture
def profile(demo_result: dict[str, Any]) -> Profile:
    return Profile.from_dict(demo_result)


def traces(figure: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {trace["name"]: trace for trace in figure["data"]}


# Memory -------------------------------------------------------------------------


def test_the_memory_chart_stacks_weights_and_kv_against_the_target(profile):
    fit = profile.memory.fit
    assert fit is not None and fit.gpu_kind == "H100-SXM"
    figure = charts.memory_chart(profile)
    bars = traces(figure)
    assert bars["Weights"]["x"] == [fit.weights_bytes / GIB]
    kv = bars[f"KV cache ({fit.concurrency} × {fit.context_tokens} tokens)"]
    assert kv["x"] == [fit.kv_cache_bytes / GIB]
    assert fit.kv_cache_bytes == profile.memory.kv_cache_bytes_per_token * 8 * (512 + 128)
    assert bars["Free"]["x"] == [(fit.available_bytes - fit.required_bytes) / GIB]
    assert figure["layout"]["barmode"] == "stack"
    (usable,) = figure["layout"]["shapes"]
    assert usable["x0"] == fit.available_bytes / GIB
    assert "fits" in figure["layout"]["title"]["text"]


def test_without_a_target_the_memory_chart_shows_what_is_needed(demo_result):
    demo_result["memory"]["fit"] = None
    profile = Profile.from_dict(demo_result)
    bars = traces(charts.memory_chart(profile))
    kv = bars["KV cache (8 × 640 tokens)"]["x"][0]
    assert kv == pytest.approx(profile.memory.kv_cache_bytes_per_token * 8 * 640 / GIB)
    assert "Free" not in bars


# Prefill and decode ---------------------------------------------------------------


def test_prefill_has_one_line_per_batch_size_with_p10_p90_bars(profile):
    figure = charts.prefill_chart(profile.prefill)
    batches = sorted({p.batch_size for p in profile.prefill})
    assert [t["name"] for t in figure["data"]] == [f"batch {b}" for b in batches]
    for trace in figure["data"]:
        batch = int(trace["name"].split()[1])
        points = sorted(
            (p for p in profile.prefill if p.batch_size == batch), key=lambda p: p.prompt_tokens
        )
        assert trace["x"] == [p.prompt_tokens for p in points]
        assert trace["y"] == pytest.approx([p.seconds.median * 1e3 for p in points])
        up, down = trace["error_y"]["array"], trace["error_y"]["arrayminus"]
        for point, y, plus, minus in zip(points, trace["y"], up, down, strict=True):
            assert y + plus == pytest.approx(point.seconds.p90 * 1e3)
            assert y - minus == pytest.approx(point.seconds.p10 * 1e3)
            assert plus >= 0 and minus >= 0


def test_decode_has_one_line_per_context_length_in_tokens_per_second(profile):
    figure = charts.decode_chart(profile.decode)
    contexts = sorted({p.context_tokens for p in profile.decode})
    assert [t["name"] for t in figure["data"]] == [f"context {c}" for c in contexts]
    for trace in figure["data"]:
        context = int(trace["name"].split()[1])
        points = sorted(
            (p for p in profile.decode if p.context_tokens == context), key=lambda p: p.batch_size
        )
        assert trace["x"] == [p.batch_size for p in points]
        assert trace["y"] == pytest.approx([p.tokens_per_second for p in points])
        assert all(v >= 0 for v in trace["error_y"]["array"] + trace["error_y"]["arrayminus"])
    assert figure["layout"]["yaxis"]["title"]["text"] == "tok/s"


def test_the_measured_points_are_real_and_positive(profile):
    assert profile.prefill and profile.decode
    assert all(p.seconds.median > 0 and p.tokens_per_second > 0 for p in profile.prefill)
    assert all(p.tokens_per_second > 0 for p in profile.decode)
    assert len(profile.prefill[0].seconds.samples) > 1


def test_every_figure_is_plain_json(profile):
    figures = charts.all_charts(profile)
    assert set(figures) == {"memory", "prefill", "decode", "predictions", "roofline", "latency"}
    assert json.loads(json.dumps(figures)) == figures


def test_the_speculative_chart_has_acceptance_and_speedup_per_draft_and_batch(spec_result):
    speculative = spec_result["speculative"]
    figure = charts.all_charts(Profile.from_dict(spec_result))["speculative"]
    assert json.loads(json.dumps(figure)) == figure
    lines = traces(figure)
    for sweep in speculative["sweeps"]:
        name = f"{sweep['draft']}, batch {sweep['batch_size']}"
        acceptance, speedup = lines[f"{name}: acceptance"], lines[f"{name}: speedup"]
        assert acceptance["yaxis"] == "y" and speedup["yaxis"] == "y2"
        at = acceptance["x"].index(sweep["k"])
        assert acceptance["y"][at] == sweep["acceptance_rate"]
        assert speedup["y"][at] == sweep["speedup"]
        assert acceptance["x"] == sorted(acceptance["x"]) == [1, 2]
    assert figure["layout"]["yaxis2"]["overlaying"] == "y"


def test_the_quantization_chart_puts_each_measured_variant_at_its_memory_and_tok_s():
    result = quantization_result()
    figure = experiment_charts.quantization_chart(result)
    assert json.loads(json.dumps(figure)) == figure
    batch_1, batch_8 = figure["data"]
    measured = [v for v in result.variants if v.status == "measured"]  # not int4
    assert len(measured) == 2
    assert batch_1["x"] == batch_8["x"] == [v.weights_bytes / MIB for v in measured]
    assert batch_1["y"] == [v.tokens_per_second for v in measured]
    assert batch_8["y"] == [v.concurrency_tokens_per_second for v in measured]
    assert batch_8["name"] == "batch 8" and batch_8["marker"]["symbol"] == "diamond"
    assert figure["layout"]["xaxis"]["title"]["text"] == "weights (MiB)"
    assert batch_1["text"] == ["fp32 (reference)", "int8 (96.0 % agree)"]
    assert "perplexity 12.9 · top-1 agreement 96.0 % · KL 0.0123 nats" in batch_1["hovertext"][1]


def test_a_big_model_is_charted_in_gib_and_a_variant_that_did_not_fit_is_left_out():
    result = quantization_result()
    for variant in result.variants:
        if variant.weights_bytes is not None:
            variant.weights_bytes *= 1000
    result.variants.append(QuantVariant("fp16", "fp16", DOES_NOT_FIT, reason="out of memory"))
    figure = experiment_charts.quantization_chart(result)
    assert figure["layout"]["xaxis"]["title"]["text"] == "weights (GiB)"
    measured = [v for v in result.variants if v.status == "measured"]
    assert figure["data"][0]["x"] == [v.weights_bytes / GIB for v in measured]


def test_all_charts_has_the_quantization_figure_when_the_result_has_it(demo_result):
    profile = Profile.from_dict(with_quantization(demo_result, quantization_result()))
    figures = charts.all_charts(profile)
    assert set(figures) == {
        "memory",
        "prefill",
        "decode",
        "predictions",
        "roofline",
        "latency",
        "quantization",
        "quality",
    }
    assert figures["quantization"] == experiment_charts.quantization_chart(
        profile.experiments.quantization
    )


@pytest.mark.parametrize(
    ("value", "reference", "text"),
    [
        (2_000_000, 8_000_000, "4.0× smaller"),
        (14.0, 10.0, "1.4× larger"),
        (10.03, 10.0, "same"),
        (10.3, 10.0, "1.03× larger"),
        (1, 250, "250× smaller"),
        (None, 10.0, ""),
        (5.0, 0, ""),
    ],
)
def test_a_ratio_says_how_much_and_which_way(value, reference, text):
    assert units.ratio(value, reference, "smaller", "larger") == text


# Unit filters ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("ms", 0.0123, "12.3 ms"),
        ("ms", 1.5, "1,500 ms"),
        ("ms", 0.0000425, "0.0425 ms"),
        ("size", 80 * 2**30, "80.0 GiB"),
        ("size", 85_520_809_984, "79.6 GiB"),  # an H100 as its driver reports it
        ("size", 2_206_336, "2.10 MiB"),  # never "0.00205 GiB" beside "2.10 MiB"
        ("tok_s", 1234.5, "1,234 tok/s"),
        ("tok_s", 62.54, "62.5 tok/s"),
        ("pct", 0.1234, "12.3 %"),
        ("pct", 0.987, "98.7 %"),
        ("gb_s", 3.35e12, "3,350 GB/s"),
        ("tflop_s", 989e12, "989 TFLOP/s"),
        ("count", 551552, "551,552"),
        ("size", 66, "66 B"),
        ("size", 1_572_864, "1.50 MiB"),
        ("size", 786_432, "768 KiB"),
        ("size", 16_000_000_000, "14.9 GiB"),
    ],
)
def test_units_format_with_their_unit(name, value, text):
    assert getattr(units, name)(value) == text


def test_ms_takes_milliseconds_when_told():
    assert units.ms(455.2, "ms") == "455 ms"


@pytest.mark.parametrize("value", [None, "", "abc", float("nan"), float("inf"), True])
@pytest.mark.parametrize("name", ["ms", "size", "gb_s", "tflop_s", "tok_s", "pct", "count"])
def test_unknown_values_print_a_dash(name, value):
    assert getattr(units, name)(value) == "—"


# Prefix caching and disaggregation ---------------------------------------------------


def test_the_caching_chart_has_cold_and_warm_ttft_over_prefix_share_with_bands():
    result = caching_result()
    figure = experiment_charts.caching_chart(result)
    assert json.loads(json.dumps(figure)) == figure
    cold, warm, shared, sample = figure["data"]
    shares = [100 * p.prefix_share for p in result.prefix_sweep]
    assert cold["x"] == warm["x"] == shares == [0.0, 25.0, 50.0, 75.0, 461 / 512 * 100]
    assert cold["y"] == pytest.approx(
        [p.cold_ttft_seconds.median * 1e3 for p in result.prefix_sweep]
    )
    assert warm["y"] == pytest.approx([200.0, 160.0, 110.0, 70.0, 40.0])
    third = result.prefix_sweep[2].warm_ttft_seconds
    assert warm["error_y"]["array"][2] == pytest.approx((third.p90 - third.median) * 1e3)
    assert warm["error_y"]["arrayminus"][2] == pytest.approx((third.median - third.p10) * 1e3)
    assert shared["name"] == "shared prefix (64 tokens), warm" and shared["y"] == [
        pytest.approx(180.0)
    ]
    assert sample["name"] == "your prompts (314 tokens), warm"
    assert sample["x"] == [pytest.approx(314 / 512 * 100)]
    assert figure["layout"]["xaxis"]["ticksuffix"] == " %"
    assert "512-token prompts" in figure["layout"]["title"]["text"]


def test_the_caching_chart_sorts_by_share_and_skips_missing_extras():
    result = caching_result(shared_prefix=None, prompt_sample=None)
    result.prefix_sweep.reverse()
    figure = experiment_charts.caching_chart(result)
    assert [trace["name"] for trace in figure["data"]] == [
        "cold (whole prompt)", "warm (prefix cached)",
    ]  # fmt: skip
    assert figure["data"][1]["x"] == sorted(figure["data"][1]["x"])


def test_the_prefix_histogram_has_a_bar_per_bucket_in_tokens_or_bytes():
    sample = sample_reuse()
    figure = experiment_charts.prefix_histogram_chart(sample)
    (bars,) = figure["data"]
    assert bars["x"] == ["0", "1–15", "16–63", "4,096+"] and bars["y"] == [1, 0, 11, 0]
    assert figure["layout"]["xaxis"]["title"]["text"] == "reused prefix (tokens)"
    sample.tokenization = "bytes"
    assert (
        "(bytes)"
        in experiment_charts.prefix_histogram_chart(sample)["layout"]["xaxis"]["title"]["text"]
    )


def test_the_interference_chart_compares_decode_alone_and_mixed_with_the_target():
    split = disaggregation_result()
    figure = experiment_charts.interference_chart(split)
    (bars,) = figure["data"]
    assert bars["x"] == ["decode alone", "with a prefill joining"]
    assert bars["y"] == pytest.approx([20.0, 80.0])
    (target,) = figure["layout"]["shapes"]
    assert target["y0"] == target["y1"] == pytest.approx(50.0)
    assert target["label"]["text"] == "TPOT target 50.0 ms"
    no_target = experiment_charts.interference_chart(
        disaggregation_result(tpot_target_seconds=None)
    )
    assert "shapes" not in no_target["layout"]


def test_all_charts_has_the_caching_and_interference_figures_when_run(demo_result):
    plain = charts.all_charts(Profile.from_dict(copy.deepcopy(demo_result)))
    assert not {"caching", "caching_sample", "interference"} & set(plain)
    result = with_parallel(with_caching(demo_result, caching_result()), parallel_result())
    profile = Profile.from_dict(result)
    figures = charts.all_charts(profile)
    assert {"caching", "caching_sample", "interference"} <= set(figures)
    assert figures["interference"] == experiment_charts.interference_chart(
        profile.experiments.disaggregation
    )
    assert json.loads(json.dumps(figures)) == figures


def test_a_real_cli_result_gives_every_new_figure():
    data = json.loads(
        (Path(__file__).parents[1] / "fixtures" / "cli_caching_parallel.json").read_text()
    )
    profile = Profile.from_dict(data)
    assert {"caching", "parallel", "disaggregation"} <= set(profile.experiments.names())
    figures = charts.all_charts(profile)
    cold = figures["caching"]["data"][0]
    assert len(cold["x"]) == len(data["caching"]["prefix_sweep"]) and None not in cold["y"]
    assert (
        sum(figures["caching_sample"]["data"][0]["y"])
        == data["caching"]["prompt_sample"]["prompts"]
    )
    assert None not in figures["interference"]["data"][0]["y"]


def test_caching_and_parallel_results_round_trip_through_the_profile(demo_result):
    result = with_parallel(with_caching(demo_result, caching_result()), parallel_result())
    profile = Profile.from_dict(result)
    assert profile.experiments.caching == caching_result()
    assert profile.experiments.parallel == parallel_result()
