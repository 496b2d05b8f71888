"""The serving engine a projection stands for: the limits that shape its saturation.

No torch import. Each engine's defaults, read from its own source:

- vLLM (0.32: `vllm/engine/arg_utils.py`, `_set_default_max_num_seqs_and_batched_tokens_args`,
  and `gpu_memory_utilization` in `vllm/config/cache.py`): the OpenAI server runs at
  most 1,024 sequences and 8,192 batched tokens a step on a GPU of 70 GiB or more
  that is not an A100 (16,384 tokens from 160 GiB), 256 sequences and 2,048 tokens
  on smaller GPUs and on A100s; its offline `LLM` class batches 16,384 tokens
  (8,192 on the smaller GPUs). Weights, activations and KV cache together take 92 %
  of each GPU's memory.
- TensorRT-LLM (`tensorrt_llm/llmapi/llm_args.py`): at most 2,048 requests and 8,192
  tokens a step (`max_batch_size`, `max_num_tokens`); the KV cache takes 90 % of the
  memory the weights and the runtime leave free (`free_gpu_memory_fraction`).

A projection names the engine whose limits it used (`EngineLimits.note`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.units import GIB

# CUDA context, allocator and runtime buffers, held on every GPU by any engine.
RUNTIME_BYTES = GIB


@dataclass(frozen=True)
class EngineLimits:
    """What one engine admits per step and how much memory it gives the KV cache."""

    engine: str  # "vllm", "tensorrt-llm"
    max_seqs: int  # requests decoded at once
    max_batched_tokens: int  # tokens per step: prompt chunks and decode rows
    memory_share: float  # of each GPU (vLLM), or of what the weights leave free (TRT-LLM)
    share_of_free: bool
    source: str

    def usable_bytes(self, device_bytes: int, activations: int, weights: float) -> int:
        """What the weights (`weights` per device) and the KV cache may use on one device,
        the runtime and the `activations` peak held back."""
        free = int(device_bytes) - RUNTIME_BYTES - activations
        if self.share_of_free:
            return max(0, int(weights + self.memory_share * max(0.0, free - weights)))
        return max(0, free - int(self.reserve_share * device_bytes))

    @property
    def reserve_share(self) -> float:
        """The share of each GPU the engine leaves unused (1 − its memory share)."""
        return round(1 - self.memory_share, 4)

    def note(self) -> str:
        of = "of the memory the weights leave free" if self.share_of_free else "of each GPU"
        return (
            f"{self.engine}'s defaults: at most {self.max_seqs:,} sequences and "
            f"{self.max_batched_tokens:,} tokens a step, the KV cache in {self.memory_share:.0%} "
            f"{of} ({self.source})"
        )


def vllm(gpu: GPU | None, offline: bool = False) -> EngineLimits:
    """vLLM's defaults on `gpu`, for its OpenAI server (or its offline `LLM` class)."""
    memory = gpu.memory_bytes if gpu is not None else 0
    large = memory >= 70 * GIB and not (gpu is not None and "a100" in gpu.key.lower())
    if memory >= 160 * GIB:
        seqs, tokens = 1024, 16384
    elif large:
        seqs, tokens = 1024, 16384 if offline else 8192
    else:
        seqs, tokens = 256, 8192 if offline else 2048
    return EngineLimits("vllm", seqs, tokens, 0.92, False, "vLLM 0.32 defaults")


def tensorrt_llm(gpu: GPU | None, offline: bool = False) -> EngineLimits:
    """TensorRT-LLM's LLM-API defaults (the same on every GPU)."""
    return EngineLimits("tensorrt-llm", 2048, 8192, 0.9, True, "TensorRT-LLM LLM-API defaults")


ENGINES: dict[str, Callable[[GPU | None, bool], EngineLimits]] = {
    "vllm": vllm,
    "tensorrt-llm": tensorrt_llm,
}
DEFAULT_ENGINE = "vllm"


def limits(gpu: GPU | None, engine: str = DEFAULT_ENGINE, offline: bool = False) -> EngineLimits:
    return ENGINES[engine](gpu, offline)
