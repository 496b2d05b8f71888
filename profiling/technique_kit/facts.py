"""The figures the advice rests on, read from a profile or from an analytic projection.

`profiling.advice.build.facts_of` reads them from a typed profile (a stored one
too, so the site can advise it again without torch); `Facts.from_projection`
builds the same figures from shapes and datasheet rates for
`python -m profiling estimate`. Each technique's rule reads these and its own
experiment's typed result, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.config import Workload
from profiling.measure import hardware
from profiling.measure.hardware import GPU
from profiling.model.shapes import DTYPE_BYTES, Shapes
from profiling.projection.calibration import Calibration
from profiling.projection.engines import DEFAULT_ENGINE, EngineLimits, limits
from profiling.projection.estimate import Projection
from profiling.projection.fit import Footprint, activation_bytes, fit_check
from profiling.projection.serving import Served
from profiling.projection.verdict import nearest_batch
from profiling.results import DecodePoint, FitCheck, PrefillPoint
from profiling.technique_kit.advice_results import ESTIMATED, MEASURED


@dataclass
class Facts:
    """One request of the user's workload on their hardware, and what the experiments found."""

    basis: str  # MEASURED (a profile) or ESTIMATED (shapes and datasheet)
    workload: Workload
    stated_bottleneck: str
    dtype: str  # of the weights the figures are for
    device: str  # where the times come from: "cpu", "cuda:0", "H100-SXM (datasheet)"
    gpu: GPU | None  # the deployment GPU (or this one), for capacity and peaks
    gpu_count: int
    ttft_seconds: float
    tpot_seconds: float
    prefill_share: float  # of one request's end-to-end time
    decode_share: float
    end_to_end_seconds: float
    ttft_meets_target: bool | None
    tpot_meets_target: bool | None
    weights_bytes: int
    kv_bytes_per_token: int
    fit: FitCheck | None
    timing_key: str  # where the times are in the JSON: "verdict" or "predictions"
    decode_fraction_of_peak: float | None = None
    prefill_fraction_of_peak: float | None = None
    shapes: Shapes | None = None
    calibration: Calibration | None = None
    queue_share: float = 0.0  # of one request's end-to-end time, waiting to be scheduled
    served: Served | None = None  # the simulated engine at the user's concurrency (estimates)
    spec_acceptance: float | None = None  # per drafted token, as the user gave it (estimates)
    # Whether some configuration of the user's GPUs meets the targets (the deployment
    # search's answer; None: not searched, or no target).
    meets_on_your_gpus: bool | None = None
    kv_dtype: str = ""  # the KV cache's format the figures are for ("": the weights' rule)
    measured_gpu: str | None = None  # the catalog key of the GPU a profile measured on
    engine: str = DEFAULT_ENGINE  # the engine the projections stand for (engines.ENGINES)

    @property
    def measured(self) -> bool:
        return self.basis == MEASURED

    @property
    def decode_context(self) -> int:
        """The mean context over a generation: prompt + output / 2."""
        return self.workload.prompt_tokens + self.workload.output_tokens // 2

    def decode_intensity(self) -> float | None:
        """FLOPs per byte read in one decode step at the user's concurrency."""
        if self.shapes is None or self.dtype not in DTYPE_BYTES:
            return None
        batch, context = self.workload.concurrency, self.decode_context
        flops = self.shapes.decode_flops(batch, context)
        return flops / self.shapes.decode_bytes(self.dtype, batch, context)

    def ridge_point(self) -> float | None:
        """FLOPs per byte where the deployment GPU turns from memory- to compute-bound."""
        if self.gpu is None:
            return None
        peak = self.gpu.peak_flops(self.dtype) or self.gpu.bf16_flops_per_second
        return peak / self.gpu.memory_bandwidth_bytes_per_second if peak else None

    def engine_limits(self, tp: int | None = None) -> EngineLimits:
        """The engine's limits on the deployment GPU, for a copy of `tp` GPUs (all of them
        by default)."""
        return limits(self.gpu, self.engine, tp=tp or self.gpu_count)

    def fit_with_weights(self, weights_bytes: int) -> FitCheck | None:
        """The fit check again with other weights (a quantized variant's)."""
        if self.gpu is None:
            return None
        peak = activation_bytes(self.shapes, self.dtype, self.gpu_count)
        footprint = Footprint(weights_bytes, self.kv_bytes_per_token, peak)
        return fit_check(footprint, self.workload, self.gpu, self.gpu_count, self.engine)

    @classmethod
    def from_projection(
        cls,
        projection: Projection,
        shapes: Shapes,
        calibration: Calibration,
        workload: Workload,
        gpu: GPU,
        stated_bottleneck: str = "unsure",
        spec_acceptance: float | None = None,
    ) -> Facts:
        """Facts of an analytic estimate: no experiment ran, every figure is derived."""
        weights, kv_token = projection.weights_bytes, projection.kv_cache_bytes_per_token
        count = projection.gpu_count
        peak = activation_bytes(shapes, projection.dtype, count)
        fit = fit_check(Footprint(weights, kv_token, peak), workload, gpu, count, projection.engine)
        decode_seconds = projection.tpot_seconds * max(workload.output_tokens - 1, 0)
        total = projection.ttft_seconds + decode_seconds
        # A request's time splits three ways: waiting to be scheduled (zero without a
        # simulation), its prompt, its tokens.
        prefill, queue = projection.prefill_share, projection.queue_share
        return cls(
            basis=ESTIMATED,
            workload=workload,
            stated_bottleneck=stated_bottleneck,
            dtype=projection.dtype,
            device=f"{gpu.key} (datasheet)",
            gpu=gpu,
            gpu_count=projection.gpu_count,
            ttft_seconds=projection.ttft_seconds,
            tpot_seconds=projection.tpot_seconds,
            prefill_share=prefill,
            decode_share=max(0.0, 1 - prefill - queue),
            end_to_end_seconds=total,
            ttft_meets_target=_meets(projection.ttft_seconds, workload.ttft_ms),
            tpot_meets_target=_meets(projection.tpot_seconds, workload.tpot_ms),
            weights_bytes=weights,
            kv_bytes_per_token=kv_token,
            fit=fit,
            timing_key="predictions",
            shapes=shapes,
            calibration=calibration,
            queue_share=projection.queue_share,
            served=projection.served,
            spec_acceptance=spec_acceptance,
            kv_dtype=projection.kv_dtype,
            engine=projection.engine,
        )


def gpu_of(kind: str | None) -> GPU | None:
    if not kind:
        return None
    try:
        return hardware.lookup(kind)
    except hardware.UnknownGPU:
        return None


def _meets(seconds: float, target_ms: float | None) -> bool | None:
    return None if target_ms is None else seconds * 1e3 <= target_ms


def decode_peak(points: list[DecodePoint], concurrency: int) -> float | None:
    known = [p for p in points if p.fraction_of_peak is not None]
    if not known:
        return None
    batch = nearest_batch(sorted({p.batch_size for p in known}), concurrency)
    return max(p.fraction_of_peak or 0.0 for p in known if p.batch_size == batch)


def prefill_peak(points: list[PrefillPoint], prompt_tokens: int) -> float | None:
    known = [p for p in points if p.fraction_of_peak is not None]
    if not known:
        return None
    return min(known, key=lambda p: abs(p.prompt_tokens - prompt_tokens)).fraction_of_peak
