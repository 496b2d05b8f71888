"""The deployments' Pareto chart: what each configuration gives every GPU against what it
gives every user, from the `deployments` dict the search writes (its `to_dict()`).

Up and right is better on both axes: output tokens/s per GPU (what the hardware earns)
against tokens/s per user (1 / TPOT p50, what a reader sees). The non-dominated
configurations are joined as the front; the TPOT target is the line x = 1000 / tpot_ms,
right of which a configuration's median token comes fast enough; a request rate is the
line y = rate × output tokens / the user's GPUs, above which their GPUs serve that traffic.
(The TTFT target has no place on either axis: the table and the section say who meets it.)
"""

from __future__ import annotations

from typing import Any

from advisor.reports.charts_base import PALETTE, Figure, base_layout, finite
from profiling.projection.search import pareto_front

X, Y = "per_user_tokens_per_second", "per_gpu_tokens_per_second"
# (name, test on a configuration, marker symbol, colour)
SERIES = (
    ("meets your targets, on your GPUs", lambda c: c["on_your_gpus"] and c["meets"] is True,
     "circle", PALETTE[2]),
    ("misses a target, on your GPUs", lambda c: c["on_your_gpus"] and c["meets"] is False,
     "x-open", PALETTE[5]),
    ("on your GPUs (no targets)", lambda c: c["on_your_gpus"] and c["meets"] is None,
     "circle-open", PALETTE[0]),
    ("with more GPUs", lambda c: not c["on_your_gpus"], "diamond-open", PALETTE[1]),
)  # fmt: skip


def plotted(deployments: dict[str, Any]) -> list[int]:
    """The indices of the configurations with both figures (one that does not fit has none)."""
    return [
        i for i, c in enumerate(deployments.get("configurations", []))
        if finite(c.get(X)) and finite(c.get(Y)) and c[X] > 0 and c[Y] > 0
    ]  # fmt: skip


def pareto_chart(deployments: dict[str, Any]) -> Figure | None:
    """One marker per configuration (hover: its name), the front, the TPOT target, the pick
    (or, where none of the user's GPUs meets the targets, the nearest of theirs)."""
    configurations = deployments.get("configurations", [])
    shown = plotted(deployments)
    if not shown:
        return None
    data = [trace for series in SERIES if (trace := _series(configurations, shown, *series))]
    points = [(configurations[i][X], configurations[i][Y]) for i in shown]
    front = [shown[j] for j in pareto_front(points)]
    data.append({
        "type": "scatter", "mode": "lines", "name": "front (no other does better on both)",
        "x": [configurations[i][X] for i in front], "y": [configurations[i][Y] for i in front],
        "line": {"color": "#555", "width": 1, "dash": "dot", "shape": "vh"},
        "hoverinfo": "skip",
    })  # fmt: skip
    pick = deployments.get("pick")
    if pick is not None:
        data += _marked(configurations, shown, pick, "first action", "star")
    else:  # nothing of theirs meets the targets: the nearest that fits, as the section says
        nearest = next((i for i in shown if configurations[i]["on_your_gpus"]), None)
        data += _marked(configurations, shown, nearest, "nearest on your GPUs", "star")
    more = deployments.get("more_hardware")
    data += _marked(configurations, shown, more, "with more hardware", "star-diamond")
    layout = base_layout(
        "Throughput per GPU against speed per user", "output tokens/s per user (1 / TPOT p50)",
        "output tokens/s per GPU", height=420,
    )  # fmt: skip
    tpot_ms = (deployments.get("targets") or {}).get("tpot_ms")
    lines = [target_line(1000.0 / tpot_ms, tpot_ms)] if finite(tpot_ms) and tpot_ms > 0 else []
    lines += _traffic_line(deployments)
    if lines:
        layout["shapes"] = lines
    layout["xaxis"]["rangemode"] = "tozero"
    return {"data": data, "layout": layout}


def _series(
    configurations: list[dict[str, Any]], shown: list[int], name: str, test: Any, symbol: str,
    colour: str,
) -> dict[str, Any] | None:  # fmt: skip
    members = [i for i in shown if test(configurations[i])]
    if not members:
        return None
    return {
        "type": "scatter", "mode": "markers", "name": name,
        "x": [configurations[i][X] for i in members], "y": [configurations[i][Y] for i in members],
        "text": [_hover(configurations[i]) for i in members], "customdata": members,
        "marker": {"size": 10, "symbol": symbol, "color": colour, "line": {"width": 1.5}},
        "hovertemplate": "%{text}<br>%{x:,.4g} tok/s per user, %{y:,.4g} tok/s per GPU"
                         "<extra></extra>",
    }  # fmt: skip


def _hover(c: dict[str, Any]) -> str:
    gpus = f"{c['gpus']} GPU{'s' * (c['gpus'] != 1)}"
    return f"{c['name']} ({gpus}, {c.get('basis', 'estimated')})"


def _marked(
    configurations: list[dict[str, Any]], shown: list[int], index: int | None, name: str,
    symbol: str,
) -> list[dict[str, Any]]:  # fmt: skip
    """A large ringed marker over one configuration (the pick, the more-hardware line)."""
    if index is None or index not in shown:
        return []
    c = configurations[index]
    return [{
        "type": "scatter", "mode": "markers", "name": f"{name}: {c['name']}",
        "x": [c[X]], "y": [c[Y]], "text": [_hover(c)], "customdata": [index],
        "marker": {"size": 18, "symbol": symbol, "color": "rgba(0,0,0,0)",
                   "line": {"color": "#000", "width": 2}},
        "hovertemplate": f"{name}: %{{text}}<extra></extra>",
    }]  # fmt: skip


def target_line(x: float, tpot_ms: float) -> dict[str, Any]:
    return {
        "type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1,
        "line": {"color": "#D55E00", "width": 2, "dash": "dash"},
        "label": {"text": f"TPOT target {tpot_ms:g} ms", "textposition": "end"},
    }  # fmt: skip


def _traffic_line(deployments: dict[str, Any]) -> list[dict[str, Any]]:
    """The output tokens/s per GPU the user's request rate needs of their GPUs (none without
    a rate)."""
    rate, tokens = deployments.get("request_rate"), deployments.get("output_tokens")
    gpus = deployments.get("gpu_count")
    if not (finite(rate) and finite(tokens) and finite(gpus)) or min(rate, tokens, gpus) <= 0:
        return []
    y = rate * tokens / gpus
    return [{
        "type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
        "line": {"color": "#0072B2", "width": 2, "dash": "dash"},
        "label": {"text": f"your traffic: {rate:g} requests/s, {y:,.4g} tok/s per GPU",
                  "textposition": "end"},
    }]  # fmt: skip
