"""The fleet's chart: every GPU kind that carries the load on one Pareto chart, what one
replica gives every GPU against what it gives every user, from the result's `fleet` dict
(`profiling.projection.fleet.Fleet.to_dict()`).

Up and right is better on both axes, as on the deployments' chart: output tokens/s per GPU
against tokens/s per user (1 / TPOT p50). Each kind's line is its front: of the simulations
its sizing made (the capacity search near the capacity, then a quarter of those users, a
sixteenth, … down to one), those no other beats on both. Its star is the load's operating
point on that kind: the fleet of the table's row at the load split over its replicas, the
same simulation the table's figures come from. The TPOT target is the line x = 1000 /
tpot_ms (the TTFT target has no place on either axis: the table says who meets it).
"""

from __future__ import annotations

from typing import Any

from advisor.reports.charts_base import PALETTE, Figure, base_layout, finite
from advisor.reports.deployment_charts import target_line

SYMBOLS = ("circle", "square", "diamond", "triangle-up")  # past the palette's colours


def fleet_chart(fleet: dict[str, Any]) -> Figure | None:
    """One line per kind that carries the load (its front) and a star at its operating
    point; None where no kind has a front to draw."""
    rows = [r for r in fleet.get("rows", []) if r.get("carries") and r.get("front")]
    if not rows:
        return None
    data: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        colour, symbol = PALETTE[i % len(PALETTE)], SYMBOLS[i // len(PALETTE) % len(SYMBOLS)]
        data.append(_front(row, colour, symbol))
        data += _operating_point(row, colour)
    layout = base_layout(
        "Each GPU kind: throughput per GPU against speed per user",
        "output tokens/s per user (1 / TPOT p50)", "output tokens/s per GPU", height=460,
    )  # fmt: skip
    tpot_ms = fleet.get("tpot_ms")
    if finite(tpot_ms) and tpot_ms > 0:
        layout["shapes"] = [target_line(1000.0 / tpot_ms, tpot_ms)]
    layout["xaxis"]["rangemode"] = "tozero"
    return {"data": data, "layout": layout}


def _front(row: dict[str, Any], colour: str, symbol: str) -> dict[str, Any]:
    points = row["front"]
    return {
        "type": "scatter", "mode": "lines+markers", "name": row["gpu"],
        "legendgroup": row["gpu"],
        "x": [p["per_user_tokens_per_second"] for p in points],
        "y": [p["per_gpu_tokens_per_second"] for p in points],
        "text": [_hover(row["gpu"], p) for p in points],
        "line": {"color": colour, "width": 1.5},
        "marker": {"size": 7, "symbol": symbol, "color": colour},
        "hovertemplate": "%{text}<br>%{x:,.4g} tok/s per user, %{y:,.4g} tok/s per GPU"
                         "<extra></extra>",
    }  # fmt: skip


def _hover(gpu: str, p: dict[str, Any]) -> str:
    meets = "meets the targets" if p["meets"] else "misses a target"
    users = f"{p['users']:,} user{'s' * (p['users'] != 1)}"
    return f"{gpu}: one replica of {p['replica']}, {users} ({meets})"


def _operating_point(row: dict[str, Any], colour: str) -> list[dict[str, Any]]:
    """The row's fleet at the load: tokens/s per GPU of the whole fleet, per user 1 / TPOT
    p50 of the replica serving its share (none without both)."""
    point, per_gpu = row.get("at_load") or {}, row.get("per_gpu_at_load")
    tpot = point.get("tpot_p50_seconds")
    if not (finite(tpot) and tpot > 0 and finite(per_gpu)):
        return []
    return [{
        "type": "scatter", "mode": "markers", "name": f"{row['gpu']} at your load",
        "legendgroup": row["gpu"], "showlegend": False,
        "x": [1 / tpot], "y": [per_gpu],
        "text": [f"{row['gpu']} at your load: {row['layout']}, "
                 f"{point['users_per_replica']:,} users per replica"],
        "marker": {"size": 16, "symbol": "star", "color": colour,
                   "line": {"color": "#000", "width": 1}},
        "hovertemplate": "%{text}<br>%{x:,.4g} tok/s per user, %{y:,.4g} tok/s per GPU"
                         "<extra></extra>",
    }]  # fmt: skip
