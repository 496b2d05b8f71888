"""The rates an estimate rests on: a roofline of one forward pass, calibrated by measurement.

No torch import: the site calibrates "what if" from a stored report with this
module alone. The workload projected with one calibration is `profiling.projection.estimate`.

The model of one forward pass (prefill of T tokens or one decode step):

    seconds = overhead + FLOPs / flops_per_second + bytes / bytes_per_second

with FLOPs and bytes from the model's shapes (the same formulas the baseline
uses for "% of peak": `profiling.baseline.sweeps`) and the rates either
the catalog GPU's peaks times assumed efficiencies (an *estimate*) or fitted
to measured points (*calibrated*). The arithmetic and the memory traffic are
added, not overlapped (not the roofline's max): a pass near the ridge, such as
the prefill of a few hundred tokens or a decode step mixed with prompt chunks,
pays for both. The measured fit has always had this form; the datasheet
estimate took the max until the published serving measurements
(`bench/estimate_vs_published.py`) showed the max under-predicting TTFT and ITL
by ~20 % at the loads where both costs are of one size. A calibration fits,
per phase, `seconds = overhead + work / rate` through the measured points (the
terms the points support: FLOPs for prefill, bytes read for decode) by least squares. Each measured
point is then predicted from a fit that did not see it (leave-one-out), so
the error shown next to a measurement is an honest out-of-sample error.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Protocol

from profiling import serde
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection.precision import PRECISIONS
from profiling.projection.rate_fit import Point, best_fit
from profiling.results import DecodePoint, Environment, PrefillPoint

# Shares of the datasheet peak a well-tuned server reaches (an assumption,
# replaced by the measured share as soon as a profile of this GPU exists).
ASSUMED_COMPUTE_EFFICIENCY = 0.5
ASSUMED_BANDWIDTH_EFFICIENCY = 0.75
# No pass is free: a serving engine's step pays scheduling and sampling, and each
# layer's kernels a launch, however small the work (an assumption for a GPU no
# worker measured; a calibration floors at the fastest pass measured instead).
ASSUMED_PASS_SECONDS = 0.3e-3
ASSUMED_LAYER_SECONDS = 10e-6
# The assumed compute share is what NVIDIA's parts reach. Published measurements put
# AMD's CDNA3 parts far lower on the same work: ~45 % of the datasheet peak across
# FP8, BF16 and FP16 against up to 93 % on H100/B200 (https://aiweekly.co/alerts/
# amd-mi300x-hits-only-45-of-peak-flops-in-practice, summarising a Yahoo Finance
# analysis; read 2026-12-06). A GPU listed here gets the assumed compute share scaled
# by its sustained share over the reference's; bandwidth is not scaled (the same
# source has MI300X reaching ~81 % of its HBM peak).
SUSTAINED_COMPUTE_SHARE = {"MI300X": 0.45, "MI325X": 0.45}  # MI325X: the same CDNA3 die
REFERENCE_COMPUTE_SHARE = 0.93


class Measured(Protocol):
    """What a calibration reads of a profile (`profiling.profile.Profile` is one)."""

    environment: Environment
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]


ESTIMATED, CALIBRATED = "estimated", "calibrated"


@dataclass
class PhaseRate:
    """One phase's cost: seconds = overhead + FLOPs / flops_per_second + bytes / bytes_per_second.

    A term whose rate is None is not part of the model. An assumed GPU rate has
    both terms in both phases (a pass's arithmetic and memory traffic, added); a
    calibration keeps the terms the measurements support.
    """

    flops_per_second: float | None = None
    bytes_per_second: float | None = None
    overhead_seconds: float = 0.0
    points: int = 0  # measured points the fit used (0: assumed)
    # No pass is projected faster than this: the fastest pass measured (calibrated),
    # or the assumed per-pass cost (datasheet).
    floor_seconds: float = 0.0

    def seconds(self, flops: float, bytes_: float) -> float:
        total = self.overhead_seconds
        if self.flops_per_second:
            total += flops / self.flops_per_second
        if self.bytes_per_second:
            total += bytes_ / self.bytes_per_second
        return max(total, self.floor_seconds)


@dataclass
class Calibration:
    """The rates a prediction rests on, and where they came from."""

    basis: str  # ESTIMATED (catalog peak x assumed efficiency) or CALIBRATED
    device: str  # the GPU key or measured device the rates describe
    prefill: PhaseRate
    decode: PhaseRate
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return serde.from_dict(cls, data)


def assumed(
    gpu: GPU,
    dtype: str,
    layers: int = 0,
    compute_efficiency: float = ASSUMED_COMPUTE_EFFICIENCY,
    bandwidth_efficiency: float = ASSUMED_BANDWIDTH_EFFICIENCY,
) -> Calibration:
    """Datasheet peaks times the assumed efficiencies, plus an assumed per-pass cost for
    a model of `layers` layers: an estimate, no measurement. `dtype` is a torch dtype
    or a serving precision (`profiling.projection.precision`): its matmuls run at that format's
    peak, and a weight-only format pays its unpacking on the bytes it reads."""
    form = PRECISIONS.get(dtype)
    peak = form.peak(gpu) if form is not None else gpu.peak_flops(dtype)
    if not peak and form is not None and form.compute in ("float8", "int8"):
        raise ValueError(f"{gpu.label} has no {form.label} peak: it does not run {form.key}")
    peak = peak or gpu.bf16_flops_per_second
    if not peak:
        raise ValueError(f"the catalog has no compute peak for {gpu.key}")
    dequant = form.dequant if form is not None else 0.0
    per_pass = ASSUMED_PASS_SECONDS + layers * ASSUMED_LAYER_SECONDS
    sustained = SUSTAINED_COMPUTE_SHARE.get(gpu.key)
    if sustained is not None:
        compute_efficiency *= sustained / REFERENCE_COMPUTE_SHARE
    pass_rate = PhaseRate(
        flops_per_second=peak * compute_efficiency,
        bytes_per_second=gpu.memory_bandwidth_bytes_per_second * bandwidth_efficiency,
        overhead_seconds=per_pass,
    )
    return Calibration(
        basis=ESTIMATED,
        device=gpu.key,
        prefill=pass_rate,
        decode=pass_rate,
        note=(
            f"{gpu.label} datasheet peaks × {compute_efficiency:.0%} compute and "
            f"{bandwidth_efficiency:.0%} bandwidth efficiency, a pass's arithmetic and "
            f"memory traffic added (not overlapped), plus "
            f"{per_pass * 1e3:.2f} ms per pass for scheduling, sampling and kernel launches "
            "(assumed, not measured)"
            + (f"; {form.label} at its {peak / 1e12:,.0f} TFLOP/s peak" if form else "")
            + (f", {dequant:.0%} more time per weight byte in its kernels" if dequant else "")
            + (
                f"; compute share scaled to {gpu.label}'s published sustained "
                f"{sustained:.0%} of peak (against {REFERENCE_COMPUTE_SHARE:.0%} on H100)"
                if sustained is not None
                else ""
            )
        ),
    )


def fit_rates(points: list[Point]) -> PhaseRate:
    """Seconds on (1, FLOPs, bytes) over measured points, by the non-negative subset
    least squares of `profiling.projection.rate_fit`: a compute-bound phase keeps its FLOPs
    term, a memory-bound one its bytes term, and per-pass overhead (Python and
    kernel launches on a small model) only when the points show it. No pass is
    projected faster than the fastest point measured."""
    if not points:
        raise ValueError("no measured points to calibrate from")
    coefficients = best_fit(points)
    floor = min(p[2] for p in points)
    if coefficients is None:  # nothing non-negative: the throughput of all the points together
        rate = sum(p[1] for p in points) / sum(p[2] for p in points)
        return PhaseRate(bytes_per_second=rate, floor_seconds=floor)
    return _phase_rate(coefficients, len(points), floor)


def _phase_rate(coefficients: dict[str, float], points: int, floor: float) -> PhaseRate:
    def rate(term: str) -> float | None:
        value = coefficients.get(term, 0.0)
        return 1 / value if value > 0 else None

    return PhaseRate(
        flops_per_second=rate("flops"),
        bytes_per_second=rate("bytes"),
        overhead_seconds=coefficients.get("overhead", 0.0),
        points=points,
        floor_seconds=floor,
    )


@dataclass
class Prediction:
    """A predicted figure at a measured point, beside the measurement."""

    metric: str  # "prefill_seconds", "decode_seconds_per_step", "weights_bytes", ...
    at: dict[str, int]  # the point: prompt_tokens/batch_size or batch_size/context_tokens
    predicted: float
    measured: float | None
    error: float | None  # (predicted - measured) / measured
    basis: str  # ESTIMATED or CALIBRATED (leave-one-out)


def relative_error(predicted: float, measured: float | None) -> float | None:
    return None if not measured else (predicted - measured) / measured


def prefill_point(shapes: Shapes, dtype: str, point: PrefillPoint) -> Point:
    """(FLOPs, bytes, seconds) of a measured prefill: weights read once, KV written."""
    tokens, batch = point.prompt_tokens, point.batch_size
    moved = shapes.weights_bytes(dtype) + shapes.kv_bytes_per_token(dtype) * tokens * batch
    return shapes.prefill_flops(tokens, batch), float(moved), point.seconds.median


def decode_point(shapes: Shapes, dtype: str, point: DecodePoint) -> Point:
    """(FLOPs, bytes, seconds) of a measured decode step."""
    batch, context = point.batch_size, point.context_tokens
    return (
        shapes.decode_flops(batch, context),
        shapes.decode_bytes(dtype, batch, context),
        point.seconds_per_token.median,
    )


def _phases(shapes: Shapes, profile: Measured) -> list[tuple[str, list[Any], list[Point]]]:
    dtype = profile.environment.dtype or "float32"
    return [
        ("prefill_seconds", profile.prefill,
         [prefill_point(shapes, dtype, p) for p in profile.prefill]),
        ("decode_seconds_per_step", profile.decode,
         [decode_point(shapes, dtype, p) for p in profile.decode]),
    ]  # fmt: skip


def calibrate(shapes: Shapes, profile: Measured, device: str = "") -> Calibration:
    """Rates fitted to every measured prefill and decode point of a profile."""
    (_, _, prefill), (_, _, decode) = _phases(shapes, profile)
    where = device or profile.environment.device_name or "the worker"
    prefill_rate, decode_rate = fit_rates(prefill), fit_rates(decode)
    return Calibration(
        basis=CALIBRATED,
        device=where,
        prefill=prefill_rate,
        decode=decode_rate,
        note=(
            f"fitted to {len(prefill)} prefill and {len(decode)} decode points on {where}; "
            f"no pass projected faster than the fastest measured there (prefill "
            f"{prefill_rate.floor_seconds * 1e3:.3g} ms, decode step "
            f"{decode_rate.floor_seconds * 1e3:.3g} ms)"
        ),
    )


_AT = {
    "prefill_seconds": ("prompt_tokens", "batch_size"),
    "decode_seconds_per_step": ("batch_size", "context_tokens"),
}


def leave_one_out(shapes: Shapes, profile: Measured) -> list[Prediction]:
    """Each measured point predicted from a calibration on the other points of its phase."""
    out = []
    for metric, raw, points in _phases(shapes, profile):
        for i, (flops, moved, measured) in enumerate(points):
            others = points[:i] + points[i + 1 :]
            if not others:
                continue
            predicted = fit_rates(others).seconds(flops, moved)
            out.append(
                Prediction(
                    metric=metric,
                    at={name: getattr(raw[i], name) for name in _AT[metric]},
                    predicted=predicted,
                    measured=measured,
                    error=relative_error(predicted, measured),
                    basis=CALIBRATED,
                )
            )
    return out


def median_abs_error(predictions: list[Prediction]) -> float | None:
    errors = [abs(p.error) for p in predictions if p.error is not None]
    return statistics.median(errors) if errors else None
