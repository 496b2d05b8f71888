"""The deployments' Pareto chart, from a hand-built `deployments` dict: the points, the
front, the TPOT target line, the pick and the more-hardware line."""

from __future__ import annotations

import json

from advisor.reports.deployment_charts import pareto_chart, pareto_front
from tests.advisor.deploymentsdata import deployments


def markers(figure: dict) -> dict[int, tuple[float, float, str]]:
    """Configuration index → (x, y, hover text), over the per-configuration series."""
    found: dict[int, tuple[float, float, str]] = {}
    for trace in figure["data"]:
        if trace["mode"] != "markers" or trace["marker"]["size"] != 10:
            continue
        for i, x, y, text in zip(trace["customdata"], trace["x"], trace["y"], trace["text"],
                                 strict=True):  # fmt: skip
            assert i not in found, f"configuration {i} drawn twice"
            found[i] = (x, y, text)
    return found


def test_each_configuration_with_figures_is_one_point_named_on_hover():
    d = deployments()
    figure = pareto_chart(d)
    assert figure is not None
    points = markers(figure)
    assert sorted(points) == [0, 1, 2, 3]  # the one that does not fit has no figures
    for i, (x, y, text) in points.items():
        c = d["configurations"][i]
        assert (x, y) == (c["per_user_tokens_per_second"], c["per_gpu_tokens_per_second"])
        assert text.startswith(c["name"])
    layout = figure["layout"]
    titles = (layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"])
    assert titles == ("output tokens/s per user (1 / TPOT p50)", "output tokens/s per GPU")
    json.dumps(figure)  # plain JSON for json_script


def test_the_front_joins_the_configurations_nothing_beats_on_both_axes():
    figure = pareto_chart(deployments())
    front = next(t for t in figure["data"] if t["name"].startswith("front"))
    # int4 (280 per user, 2,000 per GPU) is beaten by fp8 + ngram (320, 2,400) on both.
    assert list(zip(front["x"], front["y"], strict=True)) == [
        (150.0, 3000.0), (320.0, 2400.0), (500.0, 900.0)
    ]  # fmt: skip


def test_the_tpot_target_is_the_line_x_equals_1000_over_tpot_ms():
    figure = pareto_chart(deployments())
    (line,) = figure["layout"]["shapes"]
    assert line["x0"] == line["x1"] == 250.0
    assert line["label"]["text"] == "TPOT target 4 ms"
    untargeted = deployments()
    untargeted["targets"] = {"ttft_ms": None, "tpot_ms": None}
    assert "shapes" not in pareto_chart(untargeted)["layout"]


def test_the_pick_and_the_more_hardware_line_are_marked():
    figure = pareto_chart(deployments())
    pick = next(t for t in figure["data"] if t["name"].startswith("first action"))
    assert pick["name"] == "first action: TP=1, fp8 weights, draft ngram k=3"
    assert (pick["x"], pick["y"], pick["customdata"]) == ([320.0], [2400.0], [0])
    more = next(t for t in figure["data"] if t["name"].startswith("with more hardware"))
    assert (more["x"], more["y"]) == ([500.0], [900.0])
    nothing = deployments()
    nothing["pick"] = nothing["more_hardware"] = None
    names = [t["name"] for t in pareto_chart(nothing)["data"]]
    assert not any(n.startswith(("first action", "with more hardware")) for n in names)


def test_the_series_say_which_meet_the_targets_on_whose_gpus():
    figure = pareto_chart(deployments())
    by_name = {t["name"]: t["customdata"] for t in figure["data"] if "customdata" in t}
    assert by_name["meets your targets, on your GPUs"] == [0, 1]
    assert by_name["misses a target, on your GPUs"] == [2]
    assert by_name["with more GPUs"] == [3]


def test_no_figures_no_chart():
    d = deployments()
    d["configurations"] = d["configurations"][-1:]  # only the one that does not fit
    d["pick"] = d["more_hardware"] = None
    assert pareto_chart(d) is None
    assert pareto_chart({"configurations": []}) is None


def test_the_front_keeps_ties_and_drops_what_is_beaten():
    points = [(1.0, 5.0), (2.0, 4.0), (2.0, 4.0), (1.5, 3.0), (3.0, 1.0), (3.0, 0.5)]
    assert pareto_front(points) == [0, 1, 2, 4]
