"""The verdict: which phase dominates one request of the user's workload.

Pure Python on measured points (no torch), so it is unit-tested on
synthetic numbers. The model of a request is the simplest one the
measurements support:
- prefill time: the batch-1 prefill time at the workload's prompt length,
  linear in prompt tokens between (or beyond) the nearest measured lengths;
- decode time: output tokens × the decode step time at the measured batch
  size nearest the concurrency, at context ≈ prompt + output / 2 (the
  average context over the generation), linear in context;
- TTFT = prefill time (the prefill produces the first token), TPOT = one
  decode step.
`basis` says in words which points were used and how; `interpolated` is
true whenever the workload lies outside the measured sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from profiling.config import Workload
from profiling.results import DecodePoint, FitCheck, PhaseVerdict, PrefillPoint


@dataclass
class Estimate:
    value: float
    outside: bool  # extrapolated beyond the measured range
    how: str


def interpolate(points: list[tuple[float, float]], x: float, single: str) -> Estimate:
    """y at `x` from (x, y) points: linear between the two nearest points,
    extrapolated from the two end points outside them. With one point,
    `single` says how to carry it: "proportional" (y ∝ x) or "constant"."""
    pts = _mean_by_x(points)
    lo, hi = pts[0][0], pts[-1][0]
    outside = x < lo or x > hi
    if len(pts) == 1:
        ((x0, y0),) = pts
        scale = x / x0 if single == "proportional" else 1.0
        return Estimate(y0 * scale, x != x0, f"{single} from the one point at {x0:g}")
    i = next((k for k in range(1, len(pts) - 1) if pts[k][0] >= x), len(pts) - 1)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    y = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    verb = "extrapolated linearly from" if outside else "linear between"
    how = f"{verb} the points at {x0:g} and {x1:g}"
    if y <= 0:  # noisy points with a falling slope: fall back to the nearest one
        nx, ny = min(pts, key=lambda p: abs(p[0] - x))
        y = ny * (x / nx if single == "proportional" else 1.0)
        how = f"{single} from the nearest point at {nx:g}"
    return Estimate(y, outside, how)


def _mean_by_x(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted points with repeated x values averaged (no zero-width segments)."""
    groups: dict[float, list[float]] = {}
    for x, y in points:
        groups.setdefault(x, []).append(y)
    return sorted((x, sum(ys) / len(ys)) for x, ys in groups.items())


def nearest_batch(batches: list[int], concurrency: int) -> int:
    """The measured batch size closest to `concurrency` on a log scale."""
    return min(batches, key=lambda b: (abs(math.log(b / concurrency)), -b))


def prefill_estimate(points: list[PrefillPoint], prompt_tokens: int) -> tuple[Estimate, int]:
    batch = 1 if any(p.batch_size == 1 for p in points) else min(p.batch_size for p in points)
    xy = [(float(p.prompt_tokens), p.seconds.median) for p in points if p.batch_size == batch]
    return interpolate(xy, prompt_tokens, "proportional"), batch


def decode_estimate(
    points: list[DecodePoint], concurrency: int, context: float
) -> tuple[Estimate, int]:
    batch = nearest_batch(sorted({p.batch_size for p in points}), concurrency)
    xy = [
        (float(p.context_tokens), p.seconds_per_token.median)
        for p in points
        if p.batch_size == batch
    ]
    return interpolate(xy, context, "constant"), batch


def format_ms(ms: float) -> str:
    """Milliseconds to three significant figures, whole above 100."""
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def verdict(
    prefill: list[PrefillPoint],
    decode: list[DecodePoint],
    workload: Workload,
    fit: FitCheck | None = None,
) -> PhaseVerdict | None:
    """The verdict for `workload`, or None without both kinds of points."""
    if not prefill or not decode:
        return None
    pre, pre_batch = prefill_estimate(prefill, workload.prompt_tokens)
    context = workload.prompt_tokens + workload.output_tokens / 2
    step, dec_batch = decode_estimate(decode, workload.concurrency, context)
    decode_seconds = workload.output_tokens * step.value
    total = pre.value + decode_seconds
    ttft_ms, tpot_ms = pre.value * 1000, step.value * 1000
    basis = (
        f"prefill: batch-{pre_batch} time at {workload.prompt_tokens} prompt tokens, {pre.how}; "
        f"decode: {workload.output_tokens} output tokens × the step time at batch {dec_batch} "
        f"(measured batch nearest concurrency {workload.concurrency}) and context "
        f"{context:g} (prompt + output / 2), {step.how}"
    )
    out = PhaseVerdict(
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        concurrency=workload.concurrency,
        prefill_seconds=pre.value,
        decode_seconds=decode_seconds,
        end_to_end_seconds=total,
        prefill_share=pre.value / total,
        decode_share=decode_seconds / total,
        dominant="prefill" if pre.value >= decode_seconds else "decode",
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        ttft_meets_target=meets(ttft_ms, workload.ttft_ms),
        tpot_meets_target=meets(tpot_ms, workload.tpot_ms),
        interpolated=pre.outside or step.outside or dec_batch != workload.concurrency,
        basis=basis,
        fits=fit.fits if fit else None,
    )
    out.summary = summary(out, fit)
    return out


def meets(value_ms: float, target_ms: float | None) -> bool | None:
    return None if target_ms is None else value_ms <= target_ms


def summary(v: PhaseVerdict, fit: FitCheck | None = None) -> str:
    """One line: "Decode dominates: 83 % of a 512+128-token request at ..."."""
    share = v.prefill_share if v.dominant == "prefill" else v.decode_share
    line = (
        f"{v.dominant.capitalize()} dominates: {share * 100:.0f} % of a "
        f"{v.prompt_tokens}+{v.output_tokens}-token request at concurrency {v.concurrency} "
        f"(TTFT {format_ms(v.ttft_ms)} ms, TPOT {format_ms(v.tpot_ms)} ms)"
    )
    if fit is not None and not fit.fits:
        line += f"; does not fit in {fit.gpu_count}× {fit.gpu_kind} memory"
    return line
