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
from profiling.projection.serving import Requests, Served, simulate
from profiling.projection.step_time import (
    ALLREDUCE_LATENCY_S,
    DeviceMemory,
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


@dataclass(frozen=True)
class Traffic:
    """The workload a projection serves: `concurrency` closed-loop users, or requests
    arriving at `rate` per second (open loop, Poisson; `requests` of them, or as many as
    the simulation needs), each of `prompt_tokens` + `output_tokens`, with optional
    TTFT/TPOT targets. `cached_tokens`: a prompt prefix found in the prefix cache,
    shared by every request (`cached_shared`) or each request's own (a conversation's
    history). `lined_up`: a benchmark's start, every user at t = 0
    (`profiling.projection.serving.Requests`)."""

    prompt_tokens: int
    output_tokens: int
    concurrency: int
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    rate: float = 0.0
    requests: int | None = None
    cached_tokens: int = 0
    cached_shared: bool = True
    lined_up: bool = False


@dataclass(frozen=True)
class Deployment:
    """What serves it: `replicas` copies of an engine on `gpu_count` devices of `gpu` in
    tensor parallel (weights and KV split over them), the load split evenly over the
    copies; `stages`: pipeline stages of `gpu_count` devices each, a group of requests in
    flight per stage. `kv_dtype`: the KV cache's format ("" = as the weights). `engine`:
    the limits of the engine the projection stands for (default: vLLM's on `gpu`)."""

    gpu: GPU | None = None
    gpu_count: int = 1
    kv_dtype: str = ""
    engine: EngineLimits | None = None
    replicas: int = 1
    stages: int = 1


def project(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    traffic: Traffic,
    deployment: Deployment | None = None,
) -> Projection:
    """TTFT, TPOT, throughput and fit for `traffic` served by `deployment` (one engine on
    one device of no named GPU by default), the weights in `dtype`."""
    return _Projecting(shapes, calibration, dtype, traffic, deployment or Deployment()).run()


class _Projecting:
    """One projection: its inputs, and what its parts (the fit, the simulated engine, the
    figures, the notes) share."""

    def __init__(
        self, shapes: Shapes, calibration: Calibration, dtype: str, t: Traffic, d: Deployment
    ) -> None:
        self.shapes, self.calibration, self.dtype, self.t, self.d = shapes, calibration, dtype, t, d
        self.engine = d.engine or limits(d.gpu)
        self.per_copy = math.ceil(t.concurrency / d.replicas)
        self.devices = d.gpu_count * d.stages
        # Requests in flight, one group per stage.
        self.groups = 1 if t.rate else max(1, min(d.stages, self.per_copy))
        self.weights = shapes.weights_bytes(weights_format(dtype))
        context = t.prompt_tokens + t.output_tokens
        fmt = kv_format(dtype, d.kv_dtype)
        self.kv_token = shapes.kv_bytes_per_token(fmt, context, self.devices)
        self.kv = self.kv_token * self.per_copy * context
        step = StepModel(shapes, calibration, dtype, d.kv_dtype, d.gpu_count, d.gpu)
        self.step = Staged(step, d.stages)
        # A prefix already in the cache.
        self.cached = max(0, min(t.cached_tokens, t.prompt_tokens - 1))
        self.alone = self.step.seconds(0, 0, ((t.prompt_tokens - self.cached, self.cached),))
        self.static_step = self.step.seconds(
            self.per_copy, self.per_copy * (t.prompt_tokens + t.output_tokens // 2)
        )

    def run(self) -> Projection:
        t, d = self.t, self.d
        fits, capacity = self._fit()
        served, notes = self._serve(capacity)
        if served is not None:
            notes += served.notes
            ttft, tpot, e2e = served.ttft.p50, served.tpot.p50, served.e2e.p50
            throughput = served.output_tokens_per_second * self.groups * d.replicas
            prefill_share, queue_share = served.prefill_share, served.queue_share
        else:
            ttft, tpot = self.alone, self.static_step
            e2e = ttft + tpot * max(t.output_tokens - 1, 0)
            throughput, prefill_share = self.per_copy * d.replicas / tpot, ttft / e2e
            queue_share = 0.0
        notes += self._layout_notes()
        return Projection(
            basis=self.calibration.basis,
            calibration_note=self.calibration.note,
            dtype=self.dtype,
            gpu=d.gpu.key if d.gpu else None,
            gpu_count=self.devices,  # per copy of the engine: the devices that share its weights
            weights_bytes=self.weights,
            kv_cache_bytes_per_token=self.kv_token,
            kv_cache_bytes=self.kv,
            fits=fits,
            ttft_seconds=ttft,
            tpot_seconds=tpot,
            end_to_end_seconds=e2e,
            decode_tokens_per_second=throughput,
            prefill_share=prefill_share,
            prefill_alone_seconds=self.alone,
            step_seconds=self.static_step,
            queue_share=queue_share,
            kv_dtype=kv_format(self.dtype, d.kv_dtype),
            served=served,
            notes=notes,
            engine=self.engine.engine,
        )

    def _fit(self) -> tuple[bool | None, int | None]:
        """(whether the weights and the KV cache fit, the KV cache's room in tokens), both
        None without a GPU."""
        gpu, shapes, dtype = self.d.gpu, self.shapes, self.dtype
        if gpu is None:
            return None, None
        devices = self.devices
        activations = activation_bytes(shapes, dtype, self.d.gpu_count)
        usable = self.engine.usable_bytes(gpu.memory_bytes, activations, self.weights / devices)
        fits = self.weights + self.kv <= usable * devices  # the fit check's
        context = self.t.prompt_tokens + self.t.output_tokens
        room = DeviceMemory(devices, usable)
        return fits, kv_capacity_tokens(shapes, dtype, self.d.kv_dtype, gpu, room, context)

    def _serve(self, capacity: int | None) -> tuple[Served | None, list[str]]:
        """The simulated engine's run of one copy's share of the load (None where it
        cannot serve it), and the notes so far."""
        t, engine, groups, replicas = self.t, self.engine, self.groups, self.d.replicas
        notes, served = [], None
        if capacity is None or capacity >= t.prompt_tokens + t.output_tokens:
            try:
                served = simulate(self.step, Requests(  # type: ignore[arg-type]
                    t.prompt_tokens, t.output_tokens,
                    concurrency=0 if t.rate else math.ceil(self.per_copy / groups),
                    rate=t.rate / replicas,
                    requests=math.ceil(t.requests / replicas) if t.requests else None,
                    kv_tokens=capacity // groups if capacity is not None else None,
                    max_batched_tokens=engine.max_batched_tokens, max_seqs=engine.max_seqs,
                    ttft_slo=t.ttft_ms / 1e3 if t.ttft_ms else None,
                    tpot_slo=t.tpot_ms / 1e3 if t.tpot_ms else None, cached_tokens=self.cached,
                    cached_shared=t.cached_shared, lined_up=t.lined_up,
                ))  # fmt: skip
            except ValueError as exc:
                notes.append(f"not served by the simulated engine ({exc})")
        else:
            notes.append("one request's KV cache does not fit beside the weights: figures are "
                         "for the work alone, as if it fitted")  # fmt: skip
        notes.append(f"stands for {engine.note()}")
        return served, notes

    def _layout_notes(self) -> list[str]:
        """The copies, the stages and the tensor-parallel split, in words."""
        d, shapes, notes = self.d, self.shapes, []
        if d.replicas > 1:
            notes.append(f"{d.replicas} copies of the engine, the load split evenly over them")
        if d.stages > 1:
            filled = f"{self.groups} group{'s' if self.groups > 1 else ''} of requests fill them"
            notes.append(f"{d.stages} pipeline stages: each token crosses them in turn; {filled}")
        if d.gpu_count > 1:
            gpu, count = d.gpu, d.gpu_count
            link = gpu.interconnect if gpu is not None else "an assumed link"
            comm_prefill = allreduce_seconds(shapes, self.t.prompt_tokens, count, gpu)
            comm_decode = allreduce_seconds(shapes, self.t.concurrency, count, gpu)
            notes.append(
                f"{count} devices in tensor parallel: work split evenly, plus "
                f"{2 * shapes.num_layers} ring all-reduces per pass over {link} "
                f"({comm_prefill * 1e3:.3g} ms per prefill, {comm_decode * 1e3:.3g} ms per "
                f"decode step; {ALLREDUCE_LATENCY_S * 1e6:.0f} µs per call assumed)"
            )
        return notes


def shipped_configs() -> dict[str, dict[str, Any]]:
    """Configs of common models shipped with the project (offline estimates), by name."""
    folder = resources.files("profiling").joinpath("data/configs")
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            out[entry.name.removesuffix(".json")] = json.loads(entry.read_text())
    return out
