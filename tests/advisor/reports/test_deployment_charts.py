"""The deployments' Pareto chart, from the real search's `deployments` dict: one point per
configuration with figures, the front, the TPOT target line, the pick (or the nearest of the
user's GPUs) and the more-hardware line."""

from __future__ import annotations

import json

from advisor.reports.deployment_charts import X, Y, pareto_chart, pareto_front
from tests.advisor.deploymentsdata import meets, misses


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


def trace(figure: dict, prefix: str) -> dict:
    return next(t for t in figure["data"] if t["name"].startswith(prefix))


def test_each_configuration_with_figures_is_one_point_named_on_hover():
    for d in (meets(), misses()):
        figure = pareto_chart(d)
        assert figure is not None
        points = markers(figure)
        with_figures = [i for i, c in enumerate(d["configurations"]) if c[X] and c[Y]]
        assert sorted(points) == with_figures and len(points) >= 6
        for i, (x, y, text) in points.items():
            c = d["configurations"][i]
            assert (x, y) == (c["per_user_tokens_per_second"], c["per_gpu_tokens_per_second"])
            assert text.startswith(c["name"]) and f"{c['gpus']} GPU" in text
        layout = figure["layout"]
        titles = (layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"])
        assert titles == ("output tokens/s per user (1 / TPOT p50)", "output tokens/s per GPU")
        json.dumps(figure)  # plain JSON for json_script


def test_the_front_is_what_nothing_beats_on_both_axes():
    d = misses()
    figure = pareto_chart(d)
    front = trace(figure, "front")
    on_front = list(zip(front["x"], front["y"], strict=True))
    assert on_front == sorted(on_front) and len(on_front) >= 2
    points = [(x, y) for x, y, _ in markers(figure).values()]
    for x, y in points:
        beaten = any(ox >= x and oy >= y and (ox, oy) != (x, y) for ox, oy in points)
        assert beaten != ((x, y) in on_front), (x, y)
    # More GPUs buy speed per user at a cost per GPU: the 2-GPU line is on the front, right
    # of every single-GPU point, below the best of them per GPU.
    more = d["configurations"][d["more_hardware"]]
    assert (more[X], more[Y]) == on_front[-1]
    ones = [c for c in d["configurations"] if c["on_your_gpus"] and c[X]]
    assert all(c[X] < more[X] for c in ones) and max(c[Y] for c in ones) > more[Y]


def test_the_tpot_target_is_the_line_x_equals_1000_over_tpot_ms():
    (line,) = pareto_chart(misses())["layout"]["shapes"]
    assert line["x0"] == line["x1"] == 250.0  # 4 ms a token: 250 tokens/s per user
    assert line["label"]["text"] == "TPOT target 4 ms"
    untargeted = meets()
    untargeted["targets"] = {"ttft_ms": 500.0, "tpot_ms": None}
    assert "shapes" not in pareto_chart(untargeted)["layout"]


def test_a_request_rate_is_the_line_its_output_tokens_need_of_each_of_the_users_gpus():
    d = meets()
    assert d["request_rate"] is None and len(pareto_chart(d)["layout"]["shapes"]) == 1
    d.update(request_rate=20.0, gpu_count=2)  # 20 requests/s of 128 output tokens on 2 GPUs
    assert d["output_tokens"] == 128
    tpot, traffic = pareto_chart(d)["layout"]["shapes"]
    assert traffic["y0"] == traffic["y1"] == 1280.0 and traffic["xref"] == "paper"
    assert traffic["label"]["text"] == "your traffic: 20 requests/s, 1,280 tok/s per GPU"


def test_the_pick_is_starred_where_the_users_gpus_meet_the_targets():
    d = meets()
    figure = pareto_chart(d)
    pick = d["configurations"][d["pick"]]
    star = trace(figure, "first action")
    assert star["name"] == f"first action: {pick['name']}"
    assert (star["x"], star["y"], star["customdata"]) == ([pick[X]], [pick[Y]], [d["pick"]])
    assert not any(t["name"].startswith(("with more hardware", "nearest")) for t in figure["data"])


def test_without_a_pick_the_nearest_of_theirs_and_the_more_hardware_line_are_marked():
    d = misses()
    assert d["pick"] is None and d["more_hardware"] is not None
    figure = pareto_chart(d)
    nearest = trace(figure, "nearest on your GPUs")
    first = d["configurations"][0]  # ranked first of theirs
    assert first["on_your_gpus"] and nearest["customdata"] == [0]
    more = d["configurations"][d["more_hardware"]]
    assert trace(figure, "with more hardware")["x"] == [more[X]]
    assert not any(t["name"].startswith("first action") for t in figure["data"])


def test_the_series_say_which_meet_the_targets_on_whose_gpus():
    by_name = {t["name"]: t.get("customdata") for t in pareto_chart(misses())["data"]}
    d = misses()
    theirs = [i for i, c in enumerate(d["configurations"]) if c["on_your_gpus"] and c[X]]
    assert by_name["misses a target, on your GPUs"] == theirs
    assert by_name["with more GPUs"] == [d["more_hardware"]]
    assert "meets your targets, on your GPUs" not in by_name
    by_name = {t["name"]: t.get("customdata") for t in pareto_chart(meets())["data"]}
    d = meets()
    met = [i for i, c in enumerate(d["configurations"]) if c["meets"] is True]
    assert by_name["meets your targets, on your GPUs"] == met and d["pick"] in met


def test_no_figures_no_chart():
    d = meets()
    for c in d["configurations"]:
        c[X] = c[Y] = None  # as for configurations that do not fit
    d["pick"] = None
    assert pareto_chart(d) is None
    assert pareto_chart({"configurations": []}) is None


def test_the_front_keeps_ties_and_drops_what_is_beaten():
    points = [(1.0, 5.0), (2.0, 4.0), (2.0, 4.0), (1.5, 3.0), (3.0, 1.0), (3.0, 0.5)]
    assert pareto_front(points) == [0, 1, 2, 4]
