"""The charts peers show, drawn from a report's own measurements: the roofline, latency
against throughput, the accepted-length histogram and quality against memory."""

from __future__ import annotations

import pytest

from profiling.profile import Profile
from tests.advisor.quantdata import quantization_result


@pytest.fixture
def profile(demo_result) -> Profile:
    return Profile.from_dict(demo_result)


def test_the_roofline_puts_decode_left_of_prefill_under_the_measured_ceilings(profile):
    from advisor.reports.insight_charts import roofline_chart, roofline_points

    points = roofline_points(profile)
    assert len(points["prefill"]) == len(profile.prefill)
    assert len(points["decode"]) == len(profile.decode)
    assert max(x for x, _, _ in points["decode"]) < min(x for x, _, _ in points["prefill"])
    figure = roofline_chart(profile)
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["prefill (measured)", "decode (measured)", "ceilings measured here"]
    roof = figure["data"][2]
    best = max(y for rows in points.values() for _, y, _ in rows)
    assert max(roof["y"]) == pytest.approx(best)  # no point above the measured ceiling
    assert figure["layout"]["xaxis"]["type"] == figure["layout"]["yaxis"]["type"] == "log"


def test_on_a_catalog_gpu_the_roofline_adds_the_datasheet_roof(demo_result):
    demo_result["environment"].update(gpu_kind="H100-SXM", dtype="bfloat16")
    from advisor.reports.insight_charts import roofline_chart

    figure = roofline_chart(Profile.from_dict(demo_result))
    datasheet = figure["data"][-1]
    assert datasheet["name"] == "NVIDIA H100 80GB SXM datasheet"
    assert max(datasheet["y"]) == pytest.approx(989e12)
    assert "ridge of the datasheet at 295 FLOP/byte" in figure["layout"]["meta"]["note"]


def test_latency_against_throughput_shows_the_tpot_target(demo_result):
    from advisor.reports.insight_charts import latency_throughput_chart

    demo_result["config"]["workload"]["tpot_ms"] = 5.0
    figure = latency_throughput_chart(Profile.from_dict(demo_result))
    (trace,) = figure["data"]
    assert trace["x"] == sorted(trace["x"])  # throughput grows with the batch here
    assert figure["layout"]["shapes"][0]["y0"] == 5.0
    assert "TPOT target 5 ms" in figure["layout"]["annotations"][0]["text"]


def test_the_accepted_length_histogram_is_a_distribution(spec_result):
    from advisor.reports.insight_charts import accepted_length_chart

    figure = accepted_length_chart(Profile.from_dict(spec_result).experiments.speculative)
    for bars in figure["data"]:
        assert sum(bars["y"]) == pytest.approx(1.0)
        assert bars["x"] == list(range(len(bars["y"])))


def test_quality_against_memory_has_a_point_per_measured_variant():
    from advisor.reports.insight_charts import quality_memory_chart

    result = quantization_result()
    figure = quality_memory_chart(result)
    measured = [v for v in result.variants if v.status == "measured" and v.top1_agreement]
    assert figure["data"][0]["text"] == [v.name for v in measured]
    assert figure["data"][0]["y"] == [v.top1_agreement for v in measured]
