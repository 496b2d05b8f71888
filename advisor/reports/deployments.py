"""The deployments section: the first action on the user's GPUs with its headroom, cost and
launch command, the "with more hardware" line, every configuration searched, and the
Pareto chart, from the search's `deployments` dict (`Deployments.to_dict()`).

Figures keep the report's units (ms, tok/s through the `units` filters; dollars at about
three significant figures); each carries its basis (estimated or measured).
"""

from __future__ import annotations

import math
from typing import Any

from advisor.reports.deployment_charts import pareto_chart
from profiling.projection.engines import DEFAULT_ENGINE, NAMES
from profiling.units import UNKNOWN, count, ms, significant


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def usd(value: Any) -> str:
    """Dollars → "$0.672"; "—" when unknown."""
    number = _number(value)
    return UNKNOWN if number is None else f"${significant(number)}"


def section_context(deployments: dict[str, Any] | None) -> dict[str, Any] | None:
    """What `_deployments.html` draws; None (no section) when no search ran."""
    if not deployments or not deployments.get("configurations"):
        return None
    rows = [row(deployments, i, c) for i, c in enumerate(deployments["configurations"])]
    pick, more = deployments.get("pick"), deployments.get("more_hardware")
    # Where nothing on the user's GPUs meets the targets the search names no pick: the
    # nearest of theirs (the first ranked that fits) is still what they can run today.
    nearest = next((r for r in rows if r["c"]["on_your_gpus"] and r["c"]["fits"]), None)
    return {
        "raw": deployments,
        "engine": NAMES.get(deployments.get("engine") or DEFAULT_ENGINE, UNKNOWN),
        "finding": finding(deployments, rows[pick] if pick is not None else None, nearest),
        "rows": rows,
        "pick": rows[pick] if pick is not None else None,
        "nearest": nearest if pick is None else None,
        "more": rows[more] if more is not None else None,
        "targets": targets_text(deployments.get("targets") or {}),
        "price": price_text(deployments),
        "chart": pareto_chart(deployments),
    }


def finding(
    deployments: dict[str, Any], pick: dict[str, Any] | None, nearest: dict[str, Any] | None
) -> str:
    """The fold's one line: the first action and what it gives."""
    gpus = f"{deployments.get('gpu_count')} × {deployments.get('gpu')}"
    if pick is None:
        more = deployments.get("more_hardware")
        if more is not None:
            name = deployments["configurations"][more]["name"]
            return f"nothing on your {gpus} meets your targets; with more hardware: {name}"
        if nearest is None:
            return f"nothing searched fits your {gpus}"
        return f"{nearest['c']['name']}: the nearest on your {gpus}"
    said = {True: "meets your targets", False: "misses your targets", None: "no targets"}
    return f"{pick['c']['name']}: {pick['headroom'] or said[pick['c'].get('meets')]}"


def row(deployments: dict[str, Any], index: int, c: dict[str, Any]) -> dict[str, Any]:
    """One configuration with the figures the template cannot make."""
    cost = c.get("cost") or {}
    return {
        "c": c,
        "index": index,
        "is_pick": index == deployments.get("pick"),
        "is_more": index == deployments.get("more_hardware"),
        "meets": {True: "meets", False: "misses", None: "no target"}[c.get("meets")],
        # The search's own sentence ("meets your targets up to 37 users; you asked for 16").
        "headroom": c.get("headroom") or "",
        "capacity": capacity_text(c.get("capacity") or {}),
        "usd_per_million": usd(cost.get("usd_per_million_output_tokens")),
        "usd_per_million_at_capacity": usd(cost.get("usd_per_million_at_capacity")),
        "gpu_hours_per_day": cost.get("gpu_hours_per_day"),
        "gpu_hours_at_capacity": cost.get("gpu_hours_per_day_at_capacity"),
        "command": c.get("command") or {},
        "command_id": f"deployment-command-{index}",
    }


def capacity_text(capacity: dict[str, Any]) -> str:
    """ "37"; "256 or more" where the search stopped while still meeting; "—" without one."""
    users = _number(capacity.get("users"))
    if users is None:
        return UNKNOWN
    return f"{count(users)} or more" if capacity.get("at_least") else count(users)


def targets_text(targets: dict[str, Any]) -> str:
    """The targets as the verdict writes them: "TTFT p90 ≤ 500 ms, TPOT p90 ≤ 8.00 ms"."""
    parts = []
    if _number(targets.get("ttft_ms")) is not None:
        parts.append(f"TTFT p90 ≤ {ms(targets['ttft_ms'], 'ms')}")
    if _number(targets.get("tpot_ms")) is not None:
        parts.append(f"TPOT p90 ≤ {ms(targets['tpot_ms'], 'ms')}")
    return ", ".join(parts)


def price_text(deployments: dict[str, Any]) -> str:
    hourly = _number(deployments.get("gpu_hourly_usd"))
    if hourly is None:
        return "No GPU price is known for this GPU, so no cost is given."
    source = deployments.get("price_source") or "no source given"
    return f"{usd(hourly)} per {deployments.get('gpu', 'GPU')}-hour, from {source}."
