"""The fleet section: the fewest GPUs of each kind carrying the job's target load, ranked
by cost, from the result's `fleet` dict (`profiling.projection.fleet.Fleet.to_dict()`,
each row with its launch command: `profiling.advice.fleet`).

Figures are the result's own, written as the command line writes them ($/hour to the
cent, $/Mtok at about three significant figures, the headroom as the library says it).
"""

from __future__ import annotations

from typing import Any

from advisor.reports.deployments import targets_text, usd
from advisor.reports.fleet_chart import fleet_chart
from profiling.projection.fleet import Fleet, FleetRow
from profiling.units import UNKNOWN, significant


def hourly(value: float | None) -> str:
    """ "$7.98"; "no price" without one."""
    return "no price" if value is None else f"${value:,.2f}"


def section_context(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """What `_fleet.html` draws; None (no section) where the job sized no fleet."""
    if not data or not data.get("rows"):
        return None
    fleet = Fleet.from_dict(data)
    rows = [row(r, d, i) for i, (r, d) in enumerate(zip(fleet.rows, data["rows"], strict=True))]
    return {
        "raw": data,
        "load": fleet.load.text,
        "targets": targets_text({"ttft_ms": fleet.ttft_ms, "tpot_ms": fleet.tpot_ms}),
        "finding": finding(fleet),
        "carried": [r for r in rows if r["carries"]],
        "refused": [r for r in rows if not r["carries"]],
        "chart": fleet_chart(data),
    }


def finding(fleet: Fleet) -> str:
    """The fold's one line: the cheapest kind, its count and $/hour (or why none)."""
    first = fleet.first
    if first is None:
        return f"no kind carries {fleet.load.text} within the targets"
    said = f"{first.gpus} × {first.gpu} ({first.layout})"
    if first.usd_per_hour is None:
        return f"fewest GPUs: {said}; no kind that carries it has a price"
    return f"cheapest: {said} at {hourly(first.usd_per_hour)}/hour"


def row(r: FleetRow, data: dict[str, Any], index: int) -> dict[str, Any]:
    """One kind with the figures the template cannot make."""
    return {
        "index": index,
        "rank": index + 1,
        "gpu": r.gpu,
        "gpu_label": r.gpu_label,
        "carries": r.carries,
        "gpus": r.gpus,
        "replicas": r.replicas,
        "gpus_per_replica": r.gpus_per_replica,
        "replica": r.replica.name if r.replica else "",
        "usd_per_hour": hourly(r.usd_per_hour),
        "price_source": r.price_source,
        "usd_per_million": usd(r.usd_per_million_output_tokens),
        "headroom": data.get("headroom_text") or UNKNOWN,
        "basis": r.basis,
        "kilowatts": f"{r.watts / 1e3:,.3g} kW" if r.watts is not None else UNKNOWN,
        "per_joule": (
            f"{significant(r.output_tokens_per_joule)} tok/J"
            if r.output_tokens_per_joule is not None
            else ""
        ),  # fmt: skip
        "power_source": r.power_source,
        "quality_risk": r.quality_risk,
        "notes": r.notes,
        "reason": r.reason,
        "command": r.command or {},
        "command_id": f"fleet-command-{index}",
    }
