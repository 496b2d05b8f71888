"""The fit check: do the weights and the KV cache for a workload fit on the GPUs?

Each GPU's memory less what a serving engine holds back (its headroom, the CUDA
context and runtime, the activations of its largest prefill chunk) is what the
weights and the KV cache may use. The bytes themselves come from the model
(`profiling.model.memory` measures them, `profiling.model.shapes` computes them).
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.config import Workload
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection.engines import (
    DEFAULT_ENGINE,
    EACH_GPU,
    RUNTIME_BYTES,
    STATIC,
    EngineLimits,
    limits,
    vllm,
)
from profiling.projection.precision import kv_format
from profiling.projection.serving import MAX_BATCHED_TOKENS, MAX_SEQS
from profiling.results import FitCheck
from profiling.units import size

# Held back on each GPU: the share a serving engine leaves unused (vLLM's
# gpu_memory_utilization, 0.92 by default since 0.32: `profiling.projection.engines`)
# and a fixed amount for the CUDA context and the runtime's own buffers. The
# activations of the largest prefill chunk come on top (`activation_bytes`).
RESERVE_SHARE = vllm(None).reserve_share
RESERVE_FIXED_BYTES = RUNTIME_BYTES


def activation_bytes(shapes: Shapes | None, dtype: str, devices: int = 1) -> int:
    """Per device, the activation peak of the largest prefill chunk a serving engine
    runs: vLLM's default of 8,192 batched tokens over up to 256 sequences, the pass
    its start-up profiling sizes the KV cache after. 0 without the model's shapes."""
    if shapes is None:
        return 0
    fmt = kv_format(dtype)  # activations: 16 bits, or the weights' wider float
    return shapes.prefill_activation_bytes(fmt, MAX_BATCHED_TOKENS, MAX_SEQS, devices)


def usable_bytes(
    device_memory_bytes: int,
    activations: int,
    engine: EngineLimits | None = None,
    weights: float = 0.0,
) -> int:
    """One device's memory less the engine's reserve, the CUDA context and runtime,
    and the `activations` peak (`activation_bytes`): what weights and KV cache may
    use on it, by `engine`'s rule (vLLM's by default; TensorRT-LLM's share is of what
    the `weights` on the device leave)."""
    return (engine or vllm(None)).usable_bytes(device_memory_bytes, activations, weights)


def reserve_note(activations: int, engine: EngineLimits | None = None) -> str:
    """What `usable_bytes` holds back per GPU, in words."""
    chunk = f"{MAX_BATCHED_TOKENS:,}-token prefill chunk"
    peak = (f", and {size(activations)} for the activations of a {chunk}" if activations
            else f"; the activations of a {chunk} are not counted (the model's shapes are "
            "unknown)")  # fmt: skip
    if engine is None or engine.memory == EACH_GPU:
        return (
            f"reserves {RESERVE_SHARE:.0%} of each GPU's memory (the serving engine's headroom) "
            f"plus {size(RESERVE_FIXED_BYTES)} for the CUDA context and runtime{peak}"
        )
    if engine.memory == STATIC:
        return (
            f"keeps weights and KV cache within {engine.memory_share:.1%} of each GPU's memory "
            f"less {size(RESERVE_FIXED_BYTES)} for the CUDA context ({engine.name}'s "
            f"mem_fraction_static: the rest holds the activations of its "
            f"{engine.max_batched_tokens:,}-token prefill chunk and its CUDA graphs)"
        )
    return (
        f"gives the KV cache {engine.memory_share:.0%} of what the weights, "
        f"{size(RESERVE_FIXED_BYTES)} for the CUDA context and runtime{peak} leave free on "
        f"each GPU ({engine.name}'s free_gpu_memory_fraction)"
    )


@dataclass(frozen=True)
class Footprint:
    """What the model holds on the GPUs: its weights (bytes, all of them), its KV cache
    per token of context, and the activations peak per GPU (`activation_bytes` at the
    GPUs' shards)."""

    weights_bytes: int
    kv_bytes_per_token: int
    activations: int


def fit_check(
    footprint: Footprint,
    workload: Workload,
    gpu: GPU,
    gpu_count: int,
    engine: str = DEFAULT_ENGINE,
) -> FitCheck:
    """Do the weights plus the KV cache for the workload fit on the GPUs?

    Needs weights + kv_bytes_per_token × concurrency × (prompt + output)
    within the GPUs' memory minus a reserve per GPU for the runtime and the
    activations peak per GPU, by `engine`'s memory rule
    (`profiling.projection.engines`).
    Weights are assumed split evenly over the GPUs (tensor parallel).
    """
    weights_bytes, activations = footprint.weights_bytes, footprint.activations
    rule = limits(gpu, engine, tp=gpu_count)
    available = usable_bytes(gpu.memory_bytes, activations, rule, weights_bytes / gpu_count)
    available *= gpu_count
    context = workload.context_tokens
    per_request = footprint.kv_bytes_per_token * context
    kv = per_request * workload.concurrency
    required = weights_bytes + kv
    room_for_kv = max(0, available - weights_bytes)
    return FitCheck(
        gpu_kind=gpu.key,
        gpu_count=gpu_count,
        device_memory_bytes=int(gpu.memory_bytes) * gpu_count,
        concurrency=workload.concurrency,
        context_tokens=context,
        weights_bytes=weights_bytes,
        kv_cache_bytes=kv,
        required_bytes=required,
        available_bytes=available,
        fits=required <= available,
        headroom_bytes=available - required,
        max_concurrency=room_for_kv // per_request if per_request else 0,
        activation_bytes=activations * gpu_count,
        note=f"{reserve_note(activations, rule)}, per GPU; weights are assumed split evenly "
        "across the GPUs",
    )
