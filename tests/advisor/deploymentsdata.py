"""A hand-built `deployments` dict, as the search writes it (`Deployments.to_dict()`): an 8B
model on one H100 at 16 users, TTFT 500 ms and TPOT 4 ms targets, its launch commands
made by the real command builder."""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

from profiling.engine.commands import launch_command
from profiling.projection.configurations import Configuration

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SPECULATIVE = Configuration("H100", weights="fp8", draft="ngram", draft_tokens=3)
INT4 = Configuration("H100", weights="int4")
PLAIN = Configuration("H100")
FOUR = Configuration("H100", tp=4)
EIGHT = Configuration("H100", tp=8, kv_cache="fp8")


def configuration(
    c: Configuration, on_yours: bool, meets: bool | None, per_gpu: float | None,
    per_user: float | None, ttft_s: float | None, tpot_s: float | None, **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    throughput = per_gpu * c.gpus if per_gpu is not None else None
    return {
        "configuration": asdict(c), "name": c.name, "gpus": c.gpus, "on_your_gpus": on_yours,
        "fits": per_gpu is not None, "meets": meets, "basis": "estimated", "changes": 1,
        "quality_risk": "", "throughput_tokens_per_second": throughput,
        "per_gpu_tokens_per_second": per_gpu, "per_user_tokens_per_second": per_user,
        "ttft_p90_seconds": ttft_s, "tpot_p90_seconds": tpot_s,
        "capacity": {"users": None, "request_rate": None, "goodput_tokens_per_second": None},
        "cost": {"usd_per_million_output_tokens": None, "usd_per_million_at_capacity": None,
                 "gpu_hours_per_day": 24.0 * c.gpus},
        "command": launch_command(MODEL, c).to_dict(),
        **extra,
    }  # fmt: skip


def deployments() -> dict[str, Any]:
    pick = configuration(SPECULATIVE, True, True, 2400.0, 320.0, 0.12, 0.0034)
    pick["capacity"] = {"users": 37, "request_rate": 4.2, "goodput_tokens_per_second": 5000.0}
    pick["cost"] = {"usd_per_million_output_tokens": 0.672, "usd_per_million_at_capacity": 0.3,
                    "gpu_hours_per_day": 24.0}  # fmt: skip
    pick["quality_risk"] = "fp8 weights: within 1 % of bf16 perplexity on most models"
    int4 = configuration(INT4, True, True, 2000.0, 280.0, 0.15, 0.0039)
    int4["quality_risk"] = "int4 weights: a measurable quality loss"
    more = configuration(FOUR, False, True, 900.0, 500.0, 0.08, 0.0021)
    more["capacity"] = {"users": 90, "request_rate": 9.0, "goodput_tokens_per_second": 9000.0}
    return copy.deepcopy({
        "gpu": "H100", "gpu_count": 1, "concurrency": 16, "request_rate": None,
        "targets": {"ttft_ms": 500.0, "tpot_ms": 4.0},
        "gpu_hourly_usd": 2.99, "price_source": "a cloud's list price (read 2026-12-06)",
        "pick": 0, "more_hardware": 3,
        "notes": ["speculation from the demo draft's measured acceptance"],
        "configurations": [
            pick, int4,
            configuration(PLAIN, True, False, 3000.0, 150.0, 0.1, 0.0066),
            more,
            configuration(EIGHT, False, None, None, None, None, None),  # does not fit
        ],
    })  # fmt: skip
