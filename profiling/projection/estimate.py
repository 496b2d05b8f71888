"""The user's workload projected from a calibration: TTFT, TPOT, throughput and fit.

No torch import: the site projects "what if" from a stored report with this
module alone, and `python -m profiling estimate` works from a config file (the
shipped ones: `shipped_configs`). The rates a projection rests on, estimated or
calibrated by measurement, are `profiling.projection.calibration`'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from profiling import serde
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection.calibration import Calibration
from profiling.projection.engines import DEFAULT_ENGINE, EngineLimits, limits
from profiling.projection.fit import activation_bytes
from profiling.projection.precision import kv_format, weights_format
from profiling.projection.serving import Served, simulate
from profiling.projection.step_time import (
    ALLREDUCE_LATENCY_S,
    Staged,
    StepModel,
    allreduce_seconds,
    kv_capacity_tokens,
)


@dataclass
class Projection:
    """The user's workload projected with one calibration (every figure derived, none measured).

    TTFT, TPOT, end to end and throughput are the simulated engine's (continuous
    batching with chunked prefill at the user's concurrency: `profiling.projection.serving`),
    medians over its requests, with `served` holding the percentiles; the two
    static figures beside them are one request's prefill alone and one decode
    step at batch = concurrency, the shapes a profile measures.
    """

    basis: str
    calibration_note: str
    dtype: str
    gpu: str | None
    gpu_count: int
    weights_bytes: int
    kv_cache_bytes_per_token: int
    kv_cache_bytes: int  # concurrency x context
    fits: bool | None
    ttft_seconds: float
    tpot_seconds: float
    end_to_end_seconds: float
    decode_tokens_per_second: float  # output tokens per second, summed over the requests
    prefill_share: float
    prefill_alone_seconds: float = 0.0  # one request's prompt, nothing else running
    step_seconds: float = 0.0  # one decode step at batch = concurrency, mid-generation context
    queue_share: float = 0.0
    kv_dtype: str = ""
    served: Served | None = None
    notes: list[str] = field(default_factory=list)
    engine: str = DEFAULT_ENGINE  # the engine whose limits it stands for (engines.ENGINES)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


def project(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int,
    gpu: GPU | None = None,
    gpu_count: int = 1,
    *,
    kv_dtype: str = "",
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    cached_tokens: int = 0,
    cached_shared: bool = True,
    engine: EngineLimits | None = None,
    rate: float = 0.0,
    requests: int | None = None,
    replicas: int = 1,
    stages: int = 1,
    lined_up: bool = False,
) -> Projection:
    """TTFT, TPOT, throughput and fit for a workload served by `replicas` copies of an
    engine on `gpu_count` devices in tensor parallel (weights and KV split over them),
    the load split evenly over the copies: `concurrency` closed-loop users, or requests
    arriving at `rate` per second (open loop, Poisson; `requests` of them, or as many
    as the simulation needs). `cached_tokens`: a prompt prefix found in the prefix
    cache, shared by every request (`cached_shared`) or each request's own (a
    conversation's history). `lined_up`: a benchmark's start, every user at t = 0
    (`profiling.projection.serving.simulate`). `stages`: pipeline stages of `gpu_count`
    devices each, a group of requests in flight per stage. `engine`: the limits of the engine the
    projection stands for (default: vLLM's on `gpu`)."""
    engine = engine or limits(gpu)
    per_copy = math.ceil(concurrency / replicas)
    devices = gpu_count * stages
    groups = 1 if rate else max(1, min(stages, per_copy))  # requests in flight, one per stage
    weights = shapes.weights_bytes(weights_format(dtype))
    context = prompt_tokens + output_tokens
    kv_token = shapes.kv_bytes_per_token(kv_format(dtype, kv_dtype), context, devices)
    kv = kv_token * per_copy * context
    step = Staged(StepModel(shapes, calibration, dtype, kv_dtype, gpu_count, gpu), stages)
    cached = max(0, min(cached_tokens, prompt_tokens - 1))  # a prefix already in the cache
    alone = step.seconds(0, 0, ((prompt_tokens - cached, cached),))
    static_step = step.seconds(per_copy, per_copy * (prompt_tokens + output_tokens // 2))
    fits, capacity = None, None
    if gpu is not None:
        activations = activation_bytes(shapes, dtype, gpu_count)
        usable = engine.usable_bytes(gpu.memory_bytes, activations, weights / devices)
        fits = weights + kv <= usable * devices  # the fit check's
        capacity = kv_capacity_tokens(shapes, dtype, kv_dtype, gpu, devices, usable,
                                      context=context)  # fmt: skip
    notes, served = [], None
    if capacity is None or capacity >= prompt_tokens + output_tokens:
        try:
            served = simulate(
                step, prompt_tokens, output_tokens,  # type: ignore[arg-type]
                concurrency=0 if rate else math.ceil(per_copy / groups), rate=rate / replicas,
                requests=math.ceil(requests / replicas) if requests else None,
                kv_tokens=capacity // groups if capacity is not None else None,
                max_batched_tokens=engine.max_batched_tokens, max_seqs=engine.max_seqs,
                ttft_slo=ttft_ms / 1e3 if ttft_ms else None,
                tpot_slo=tpot_ms / 1e3 if tpot_ms else None, cached_tokens=cached,
                cached_shared=cached_shared, lined_up=lined_up,
            )  # fmt: skip
        except ValueError as exc:
            notes.append(f"not served by the simulated engine ({exc})")
    else:
        notes.append("one request's KV cache does not fit beside the weights: figures are "
                     "for the work alone, as if it fitted")  # fmt: skip
    notes.append(f"stands for {engine.note()}")
    if served is not None:
        notes += served.notes
        ttft, tpot, e2e = served.ttft.p50, served.tpot.p50, served.e2e.p50
        throughput = served.output_tokens_per_second * groups * replicas
        prefill_share, queue_share = served.prefill_share, served.queue_share
    else:
        ttft, tpot = alone, static_step
        e2e = ttft + tpot * max(output_tokens - 1, 0)
        throughput, prefill_share, queue_share = per_copy * replicas / tpot, ttft / e2e, 0.0
    if replicas > 1:
        notes.append(f"{replicas} copies of the engine, the load split evenly over them")
    if stages > 1:
        filled = f"{groups} group{'s' if groups > 1 else ''} of requests fill them"
        notes.append(f"{stages} pipeline stages: each token crosses them in turn; {filled}")
    if gpu_count > 1:
        link = gpu.interconnect if gpu is not None else "an assumed link"
        comm_prefill = allreduce_seconds(shapes, prompt_tokens, gpu_count, gpu)
        comm_decode = allreduce_seconds(shapes, concurrency, gpu_count, gpu)
        notes.append(
            f"{gpu_count} devices in tensor parallel: work split evenly, plus "
            f"{2 * shapes.num_layers} ring all-reduces per pass over {link} "
            f"({comm_prefill * 1e3:.3g} ms per prefill, {comm_decode * 1e3:.3g} ms per decode "
            f"step; {ALLREDUCE_LATENCY_S * 1e6:.0f} µs per call assumed)"
        )
    return Projection(
        basis=calibration.basis,
        calibration_note=calibration.note,
        dtype=dtype,
        gpu=gpu.key if gpu else None,
        gpu_count=devices,  # per copy of the engine: the devices that share its weights
        weights_bytes=weights,
        kv_cache_bytes_per_token=kv_token,
        kv_cache_bytes=kv,
        fits=fits,
        ttft_seconds=ttft,
        tpot_seconds=tpot,
        end_to_end_seconds=e2e,
        decode_tokens_per_second=throughput,
        prefill_share=prefill_share,
        prefill_alone_seconds=alone,
        step_seconds=static_step,
        queue_share=queue_share,
        kv_dtype=kv_format(dtype, kv_dtype),
        served=served,
        notes=notes,
        engine=engine.engine,
    )


def shipped_configs() -> dict[str, dict[str, Any]]:
    """Configs of common models shipped with the project (offline estimates), by name."""
    folder = resources.files("profiling").joinpath("data/configs")
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            out[entry.name.removesuffix(".json")] = json.loads(entry.read_text())
    return out
