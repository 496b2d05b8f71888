"""What every report figure shares: its type, colours and axis layout."""

from __future__ import annotations

import math
from typing import Any

from profiling.units import GIB, MIB  # noqa: F401  (re-exported to the chart modules)

Figure = dict[str, Any]

# Colour-blind-safe (Okabe–Ito), in the order lines are drawn.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


def base_layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout = {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": {"title": {"text": x_title}, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "margin": {"l": 64, "r": 16, "t": 48, "b": 56},
        "legend": {"orientation": "h", "y": -0.25},
        "height": 360,
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
    }
    layout.update(extra)
    return layout


def sweep_axis(values: list[float]) -> dict[str, Any]:
    """Ticks at the measured sizes; a log axis when they span 8× or more (they double)."""
    ticks = sorted(set(values))
    axis: dict[str, Any] = {"tickvals": ticks, "ticktext": [f"{v:,}" for v in ticks]}
    if ticks and ticks[0] > 0 and ticks[-1] / ticks[0] >= 8:
        axis["type"] = "log"
    return axis


def y_range(medians: list[float]) -> dict[str, Any]:
    """Room for the medians; a wild p90 bar runs off the top rather than squash the lines."""
    top = max(medians, default=0.0)
    return {"range": [0, top * 1.5]} if top > 0 else {}


# Memory -------------------------------------------------------------------------


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
