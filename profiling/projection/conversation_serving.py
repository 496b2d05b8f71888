"""Conversations served: the prefix-cache hits the KV capacity allows, and what they buy.

No torch import. The turns are replayed through the block cache
(`profiling.projection.block_cache`) at the KV capacity the fit leaves on the
deployment's GPUs (weights, the engine's reserve and the activations held back; fp8
KV doubles it, tensor parallelism pools it), the users sending turns at the
concurrency with their think time between; the served projection then prefills only
what the cache missed. So the KV cache's format, the layout and the cache interact
through the capacity: the same conversations hit more where more KV fits.

The serving simulation serves requests of one shape, so the conversation is served
as its mean turn: the mean prompt, the mean reply and the mean cached prefix, each
request holding its own history's KV (a conversation's prefix is not shared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection import block_cache as bc
from profiling.projection.calibration import Calibration
from profiling.projection.conversation_workloads import Conversation, ConversationSummary, summarize
from profiling.projection.engines import EngineLimits, limits
from profiling.projection.estimate import Deployment, Projection, Traffic, project
from profiling.projection.fit import activation_bytes
from profiling.projection.precision import kv_format, weights_format
from profiling.projection.step_time import DeviceMemory, kv_capacity_tokens

CURVE_POINTS = 10


def device_kv_tokens(
    shapes: Shapes,
    dtype: str,
    kv_dtype: str,
    gpu: GPU | None,
    gpu_count: int = 1,
    engine: EngineLimits | None = None,
) -> int | None:
    """Tokens of KV cache one engine copy on `gpu_count` GPUs holds (None: no GPU named),
    as the estimate's fit computes it."""
    if gpu is None:
        return None
    engine = engine or limits(gpu)
    weights = shapes.weights_bytes(weights_format(dtype))
    activations = activation_bytes(shapes, dtype, gpu_count)
    usable = engine.usable_bytes(gpu.memory_bytes, activations, weights / gpu_count)
    return kv_capacity_tokens(shapes, dtype, kv_dtype, gpu, DeviceMemory(gpu_count, usable))


@dataclass
class ConversationProjection:
    """The conversations on the deployment: their hits at its KV capacity, and the
    served figures without a prefix cache (`cold`) and with the hits (`warm`)."""

    summary: ConversationSummary
    concurrency: int
    block_size: int
    kv_bytes_per_token: int
    capacity_tokens: int | None  # the GPUs' KV cache, in tokens (None: not limited)
    hit_rate: float  # cached prompt tokens over prompt tokens, at the capacity
    reusable_rate: float  # the same with room for everything (the most reuse can give)
    request_hit_rate: float  # turns reusing at least one block
    cached_tokens_per_request: float
    prefill_tokens_saved: int  # over the whole workload
    curve: list[bc.CurvePoint]
    cold: Projection
    warm: Projection
    timing_basis: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


@dataclass
class Prepared:
    """What every projection of these conversations shares: the requests as the users
    send them, their block ids, and the cold projection the timing came from."""

    workload: bc.Workload
    summary: ConversationSummary
    cold: Projection
    capacity_tokens: int | None
    kv_bytes_per_token: int


@dataclass(frozen=True)
class Setup:
    """How the conversations are served: `concurrency` users of one engine copy on
    `deployment` (its GPU, how many in tensor parallel, the KV cache's format, the
    engine's limits), with optional TTFT/TPOT targets; the prefix cache keeps blocks of
    `block_size` tokens."""

    concurrency: int
    deployment: Deployment = field(default_factory=Deployment)
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    block_size: int = bc.BLOCK_SIZE


def prepare(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    conversations: list[Conversation],
    setup: Setup,
) -> Prepared:
    summary = summarize(conversations)
    prompt, output = round(summary.mean_prompt_tokens), max(1, round(summary.mean_output_tokens))
    traffic = Traffic(prompt, output, setup.concurrency, setup.ttft_ms, setup.tpot_ms)
    cold = project(shapes, calibration, dtype, traffic, setup.deployment)
    # Turns are sent at the pace the cold engine serves them: its TTFT over the mean
    # prompt, its TPOT per reply token.
    timing = bc.TurnTiming(cold.ttft_seconds / prompt, cold.tpot_seconds, cold.basis)
    requests = bc.schedule(conversations, setup.concurrency, timing)
    d = setup.deployment
    capacity = device_kv_tokens(shapes, dtype, d.kv_dtype, d.gpu, d.gpu_count, d.engine)
    kv_token = shapes.kv_bytes_per_token(kv_format(dtype, d.kv_dtype))
    return Prepared(bc.Workload(conversations, requests, setup.block_size), summary, cold,
                    capacity, kv_token)  # fmt: skip


def project_conversations(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    conversations: list[Conversation],
    setup: Setup,
    prepared: Prepared | None = None,
) -> ConversationProjection:
    """The conversations served by one engine copy as `setup` says: the prefix cache's
    hits at the KV capacity, and TTFT and throughput with them."""
    p = prepared or prepare(shapes, calibration, dtype, conversations, setup)
    workload = p.workload
    everything = bc.replay(workload, bc.unlimited_tokens(workload))
    at = bc.replay(workload, p.capacity_tokens) if p.capacity_tokens is not None else everything
    marks = [p.capacity_tokens] if p.capacity_tokens else []
    curve = bc.curve(workload, bc.capacity_grid(workload, marks, CURVE_POINTS))
    warm = served_with(p, at, shapes, calibration, dtype, setup)
    return ConversationProjection(
        summary=p.summary,
        concurrency=setup.concurrency,
        block_size=workload.block_size,
        kv_bytes_per_token=p.kv_bytes_per_token,
        capacity_tokens=p.capacity_tokens,
        hit_rate=at.hit_rate,
        reusable_rate=everything.hit_rate,
        request_hit_rate=at.request_hit_rate,
        cached_tokens_per_request=at.mean_cached_tokens,
        prefill_tokens_saved=at.cached_tokens,
        curve=curve,
        cold=p.cold,
        warm=warm,
        timing_basis=p.cold.basis,
        notes=_notes(p, setup.concurrency),
    )


def _notes(p: Prepared, concurrency: int) -> list[str]:
    notes = [
        f"turns sent at the pace the engine serves them without a prefix cache ({p.cold.basis}: "
        f"TTFT {p.cold.ttft_seconds * 1e3:.3g} ms, TPOT {p.cold.tpot_seconds * 1e3:.3g} ms), "
        f"{concurrency} users, each conversation's think time between its turns",
        "served as the mean turn (mean prompt, reply and cached prefix)",
    ]
    if p.capacity_tokens is None:
        notes.append("no GPU named: the cache is not limited, every reusable prefix hits")
    return notes


def served_with(
    p: Prepared,
    replay: bc.Replay,
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    setup: Setup,
) -> Projection:
    """The mean turn served with `replay`'s mean cached prefix, each request's own."""
    prompt = round(p.summary.mean_prompt_tokens)
    output = max(1, round(p.summary.mean_output_tokens))
    cached = round(replay.mean_cached_tokens)
    traffic = Traffic(prompt, output, setup.concurrency, setup.ttft_ms, setup.tpot_ms,
                      cached_tokens=cached, cached_shared=False)  # fmt: skip
    return project(shapes, calibration, dtype, traffic, setup.deployment)
