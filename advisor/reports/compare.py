"""Two reports side by side: the key figures of each, B against A, and one chart.

Built from each job's stored `Profile.to_dict()`; a job that has no readable
result (queued, running, failed, cancelled, or written by another version)
keeps its column with the reason, and its figures show as "—".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.jobs.models import Job
from advisor.reports.charts_base import PALETTE, Figure, base_layout, sweep_axis
from profiling.measure.stats import INCONCLUSIVE, Interval, ratio_interval
from profiling.profile import Profile
from profiling.technique_kit.advice_results import Advice
from profiling.techniques import techniques
from profiling.units import UNKNOWN, ms, size, tok_s

# Each experiment's result carries a one-line `finding`; parallel also writes disaggregation.
DASHES = ["solid", "dash", "dot", "dashdot"]


@dataclass(frozen=True)
class Side:
    """One column: the job, its readable profile (or None), and why not when None."""

    name: str  # "A" or "B"
    job: Job
    profile: Profile | None
    advice: Advice | None
    reason: str  # "" when the report is readable


@dataclass(frozen=True)
class Row:
    label: str
    a: str
    b: str
    change: str = ""  # B ÷ A and B − A, for figures
    better: str = ""  # "a", "b" or "": which side the figure favours


@dataclass
class Group:
    title: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""


def load_side(name: str, job: Job) -> Side:
    if job.state != Job.State.SUCCEEDED:
        return Side(name, job, None, None, unfinished_reason(job))
    try:
        profile = Profile.from_dict(job.result)
    except (KeyError, TypeError, ValueError, AttributeError):
        reason = "This job's result could not be read by this version of the site."
        return Side(name, job, None, None, reason)
    return Side(name, job, profile, profile.advice, "")


def unfinished_reason(job: Job) -> str:
    if job.state == Job.State.QUEUED:
        return "Not finished: queued, waiting for a worker."
    if job.state == Job.State.RUNNING:
        phase = f", {job.phase}" if job.phase else ""
        return f"Not finished: running ({job.progress:.0%}{phase})."
    if job.state == Job.State.FAILED:
        return f"This job failed: {job.error or job.message or 'no reason was recorded'}"
    return "This job was cancelled before it finished."


def compare_context(job_a: Job, job_b: Job) -> dict[str, Any]:
    a, b = load_side("A", job_a), load_side("B", job_b)
    groups = [
        _profiled(a, b),
        _memory(a, b),
        _latency(a, b),
        _throughput(a, b),
        _advice(a, b),
        _experiments(a, b),
    ]
    return {
        "a": a,
        "b": b,
        "sides": [a, b],
        "groups": [g for g in groups if g.rows or g.note],
        "decode_chart": decode_chart(a, b),
    }


# Figures -------------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def figure_row(
    label: str,
    a: Any,
    b: Any,
    fmt: Callable[[Any], str],
    higher_is_better: bool | None = None,
    noise: Interval | None = None,
) -> Row:
    """A numeric row: both values in their unit, then B ÷ A and B − A where both are known.

    `noise` is B ÷ A's interval from both sides' repeats: a difference inside it
    is said to be within noise and neither side is marked better.
    """
    x, y = _finite(a), _finite(b)
    if x is None or y is None:
        return Row(label, fmt(x), fmt(y))
    if x == y:
        return Row(label, fmt(x), fmt(y), "same")
    diff = fmt(y - x)
    diff = diff if diff.startswith("-") else f"+{diff}"
    change = f"{y / x:.2f}× ({diff})" if x else diff
    better = ""
    if higher_is_better is not None:
        better = "b" if (y > x) == higher_is_better else "a"
    if noise is not None:
        if noise.verdict == INCONCLUSIVE:
            return Row(label, fmt(x), fmt(y), f"{change} · within noise: {noise.text()}")
        change = f"{change} · {noise.text()}"
    return Row(label, fmt(x), fmt(y), change, better)


def text_row(label: str, a: str | None, b: str | None) -> Row:
    return Row(label, a or UNKNOWN, b or UNKNOWN)


def _both(a: Side, b: Side, read: Callable[[Profile], Any]) -> tuple[Any, Any]:
    return (
        read(a.profile) if a.profile else None,
        read(b.profile) if b.profile else None,
    )


def _target(job: Job) -> str:
    return f"{job.gpu_kind} × {job.gpu_count}" if job.gpu_kind else "any worker"


def _device(profile: Profile) -> str:
    env = profile.environment
    return f"{env.device_name} ({env.device})" if env.device_name else env.device


def _workload(profile: Profile) -> str:
    work = profile.config.workload
    return f"{work.prompt_tokens} → {work.output_tokens} tokens × {work.concurrency}"


def _profiled(a: Side, b: Side) -> Group:
    return Group(
        "What was profiled",
        [
            text_row("Model", a.job.model_name, b.job.model_name),
            text_row("Target GPU", _target(a.job), _target(b.job)),
            text_row("Measured on", *_both(a, b, _device)),
            text_row("dtype", *_both(a, b, lambda p: p.environment.dtype)),
            text_row("Workload", *_both(a, b, _workload)),
        ],
    )


def _memory(a: Side, b: Side) -> Group:
    weights = _both(a, b, lambda p: p.memory.weights_bytes)
    kv = _both(a, b, lambda p: p.memory.kv_cache_bytes_per_token)
    return Group(
        "Memory",
        [
            figure_row("Weights", *weights, size, higher_is_better=False),
            figure_row("KV cache per token", *kv, size, higher_is_better=False),
        ],
    )


def _verdict_ms(profile: Profile, key: str) -> float | None:
    return getattr(profile.verdict, key) if profile.verdict else None


def _latency(a: Side, b: Side) -> Group:
    ttft = _both(a, b, lambda p: _verdict_ms(p, "ttft_ms"))
    tpot = _both(a, b, lambda p: _verdict_ms(p, "tpot_ms"))
    workloads = _both(a, b, _workload)
    note = ""
    if None not in workloads and workloads[0] != workloads[1]:
        note = (
            f"The two workloads differ (A: {workloads[0]}; B: {workloads[1]}), "
            "so these rows compare different requests."
        )
    return Group(
        "Latency at the workload (from the verdict)",
        [
            figure_row("Time to first token", *ttft, lambda v: ms(v, "ms"), False),
            figure_row("Time per output token", *tpot, lambda v: ms(v, "ms"), False),
        ],
        note,
    )


def _throughput(a: Side, b: Side) -> Group:
    group = Group("Throughput at the points both measured")
    if not (a.profile and b.profile):
        return group
    prefill_a = {(p.batch_size, p.prompt_tokens): p for p in a.profile.prefill}
    prefill_b = {(p.batch_size, p.prompt_tokens): p for p in b.profile.prefill}
    for batch, tokens in sorted(prefill_a.keys() & prefill_b.keys()):
        label = f"Prefill, batch {batch}, {tokens:,} prompt tokens"
        x, y = prefill_a[batch, tokens], prefill_b[batch, tokens]
        noise = ratio_interval(x.seconds.samples, y.seconds.samples)  # B's tok/s ÷ A's
        group.rows.append(
            figure_row(label, x.tokens_per_second, y.tokens_per_second, tok_s, True, noise)
        )
    decode_a = {(p.batch_size, p.context_tokens): p for p in a.profile.decode}
    decode_b = {(p.batch_size, p.context_tokens): p for p in b.profile.decode}
    for batch, context in sorted(decode_a.keys() & decode_b.keys()):
        label = f"Decode, batch {batch}, context {context:,}"
        x, y = decode_a[batch, context], decode_b[batch, context]
        noise = ratio_interval(x.seconds_per_token.samples, y.seconds_per_token.samples)
        group.rows.append(
            figure_row(label, x.tokens_per_second, y.tokens_per_second, tok_s, True, noise)
        )
    if not group.rows:
        group.note = "The two sweeps measured no point in common (different sizes)."
    return group


def _first_recommendation(advice: Advice | None) -> str | None:
    first = advice.first if advice else None
    if first is None:
        return None
    effect = first.expected_effect.text
    line = f"{first.technique}: {first.setting}"
    return f"{line} — {effect}" if effect else line


def _advice(a: Side, b: Side) -> Group:
    if a.advice is None and b.advice is None:
        return Group("Advice")
    return Group(
        "Advice",
        [
            text_row(
                "Bottleneck",
                a.advice.bottleneck_label if a.advice else None,
                b.advice.bottleneck_label if b.advice else None,
            ),
            text_row(
                "First recommendation",
                _first_recommendation(a.advice),
                _first_recommendation(b.advice),
            ),
        ],
    )


def _finding(profile: Profile | None, name: str) -> str | None:
    result = getattr(profile.experiments, name) if profile else None
    if result is None:
        return None
    return str(getattr(result, "finding", "") or "") or "ran (no finding recorded)"


def _not_run(side: Side) -> str:
    return "not run" if side.profile else UNKNOWN


def _experiments(a: Side, b: Side) -> Group:
    group = Group("Experiments")
    for name, label in ((t.name, t.label) for t in techniques()):
        x, y = _finding(a.profile, name), _finding(b.profile, name)
        if x or y:
            group.rows.append(Row(label, x or _not_run(a), y or _not_run(b)))
    return group


# Chart ---------------------------------------------------------------------------


def decode_chart(a: Side, b: Side) -> Figure | None:
    """Decode tok/s vs batch size for both jobs: A and B by colour, context by dash."""
    data, batches = [], []
    for i, side in enumerate((a, b)):
        if side.profile is None:
            continue
        contexts = sorted({p.context_tokens for p in side.profile.decode})
        for j, context in enumerate(contexts):
            series = sorted(
                (p for p in side.profile.decode if p.context_tokens == context),
                key=lambda p: p.batch_size,
            )
            batches += [p.batch_size for p in series]
            name = f"{side.name}: context {context:,}"
            data.append({
                "type": "scatter", "mode": "lines+markers", "name": name,
                "x": [p.batch_size for p in series], "y": [p.tokens_per_second for p in series],
                "line": {"color": PALETTE[i], "dash": DASHES[j % len(DASHES)]},
                "hovertemplate": f"{name}, batch %{{x}}: %{{y:.3g}} tok/s<extra></extra>",
            })  # fmt: skip
    if not data:
        return None
    layout = base_layout("Decode throughput vs batch size, A and B", "batch size", "tok/s")
    layout["xaxis"].update(sweep_axis(batches))
    return {"data": data, "layout": layout}
