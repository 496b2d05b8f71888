"""The serving engine a projection stands for: the limits that shape its saturation.

No torch import. Each engine's defaults, read from its own source:

- vLLM (0.32: `vllm/engine/arg_utils.py`, `_set_default_max_num_seqs_and_batched_tokens_args`,
  and `gpu_memory_utilization` in `vllm/config/cache.py`): the OpenAI server runs at
  most 1,024 sequences and 8,192 batched tokens a step on a GPU of 70 GiB or more
  that is not an A100 (16,384 tokens from 160 GiB), 256 sequences and 2,048 tokens
  on smaller GPUs and on A100s; its offline `LLM` class batches 16,384 tokens
  (8,192 on the smaller GPUs). Weights, activations and KV cache together take 92 %
  of each GPU's memory.
- SGLang (0.5.23, the wheel's `sglang/srt/arg_groups/memory_hook.py`,
  `handle_gpu_memory_settings`; `sglang/srt/mem_cache/kv_cache_configurator.py`,
  `resolve_max_num_reqs`; `sglang/srt/arg_groups/speculative_hook.py`): by the GPU's
  memory in MiB (as nvidia-smi reports it), a prefill step takes at most 2,048 tokens
  below 20 GiB, 4,096 below 60 GiB, 8,192 below 160 GiB and 16,384 above
  (`chunked_prefill_size`), and decode CUDA graphs are captured up to 8, 48 (160 from
  TP 4) below 35 GiB, 32 (160) below 60 GiB, 256 (512) below 160 GiB and 512 requests
  above (`cuda_graph_max_bs`). Weights and KV cache take `mem_fraction_static` of the
  memory free before the model loads: what is left of the GPU after a reserve of
  512 MiB + 1.5 MiB per chunk token (at least 2,048 tokens) + 1 GiB × TP × PP / 8 +
  2 MiB per decode-graph request + 8 MiB per captured prefill graph (prefill graphs are
  captured on CUDA, up to the chunk: 58 graphs at 8,192 tokens), at least 10 GiB on GPUs
  over 60 GiB (0.83 on an H100 at TP 1; the function itself, run with the model's config
  stubbed, gives the same shares). Left unset, `max_running_requests`
  is the KV pool's tokens over the model's context length × 512, held between 2,048
  and 4,096 (and to half the pool's tokens): its floor, 2,048, stands here; with
  speculative decoding it is 48. (MLA models reserve 1.5 GiB for their prefill
  graphs instead; its scheduler runs prefill batches apart from decode ones unless
  `--enable-mixed-chunk`, which the simulation, mixing them as vLLM does, leaves out.)
- TensorRT-LLM (`trtllm-serve`: `tensorrt_llm/commands/serve.py` at 00209af, its
  flags' defaults from `BuildConfig` in `tensorrt_llm/builder.py` at 008b2b8;
  `KvCacheConfig` in `tensorrt_llm/llmapi/llm_args.py`): at most 2,048 requests and
  8,192 tokens a step (`max_batch_size`, `max_num_tokens`); the KV cache takes 90 % of
  the memory the weights and the runtime leave free (`free_gpu_memory_fraction`). Its
  server does not chunk prompts unless `--enable_chunked_prefill`; the simulation
  chunks them at the same 8,192-token budget.

A projection names the engine whose limits it used (`EngineLimits.note`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.options import SERVING_ENGINES
from profiling.units import GIB, MIB

# CUDA context, allocator and runtime buffers, held on every GPU by any engine.
RUNTIME_BYTES = GIB

# What an engine's memory share is a share of (`EngineLimits.usable_bytes`).
EACH_GPU = "each GPU"  # vLLM: weights, activations and KV cache within it
FREE = "free"  # TensorRT-LLM: the KV cache's, of what the weights leave free
STATIC = "static"  # SGLang: weights and KV cache, of what the CUDA context leaves

NAMES = SERVING_ENGINES  # key -> the name a projection says ("SGLang")


@dataclass(frozen=True)
class EngineLimits:
    """What one engine admits per step and how much memory it gives the KV cache."""

    engine: str  # a key of ENGINES: "vllm", "sglang", "trtllm"
    max_seqs: int  # requests decoded at once
    max_batched_tokens: int  # tokens per step: prompt chunks and decode rows
    memory_share: float  # of EACH_GPU, of what is FREE after the weights, or STATIC
    memory: str  # EACH_GPU, FREE or STATIC
    source: str
    speculative_max_seqs: int | None = None  # requests run at once with a draft (SGLang)

    @property
    def name(self) -> str:
        return NAMES[self.engine]

    def usable_bytes(self, device_bytes: int, activations: int, weights: float) -> int:
        """What the weights (`weights` per device) and the KV cache may use on one device,
        the runtime and the `activations` peak held back (SGLang's reserve holds its
        activations itself)."""
        if self.memory == STATIC:
            return max(0, int(self.memory_share * (int(device_bytes) - RUNTIME_BYTES)))
        free = int(device_bytes) - RUNTIME_BYTES - activations
        if self.memory == FREE:
            return max(0, int(weights + self.memory_share * max(0.0, free - weights)))
        return max(0, free - int(self.reserve_share * device_bytes))

    @property
    def reserve_share(self) -> float:
        """The share of each GPU the engine leaves unused (1 − its memory share)."""
        return round(1 - self.memory_share, 4)

    def seqs(self, speculating: bool = False) -> int:
        """Requests run at once, with speculative decoding or without."""
        return (self.speculative_max_seqs or self.max_seqs) if speculating else self.max_seqs

    def note(self) -> str:
        held = {
            EACH_GPU: "the KV cache in {:.0%} of each GPU",
            FREE: "the KV cache in {:.0%} of the memory the weights leave free",
            STATIC: "weights and KV cache in {:.0%} of the memory free before loading",
        }[self.memory].format(self.memory_share)
        drafting = (f" ({self.speculative_max_seqs:,} with speculative decoding)"
                    if self.speculative_max_seqs else "")  # fmt: skip
        return (
            f"{self.name}'s defaults: at most {self.max_seqs:,} sequences{drafting} and "
            f"{self.max_batched_tokens:,} tokens a step, {held} ({self.source})"
        )


def vllm(gpu: GPU | None, offline: bool = False, tp: int = 1, pp: int = 1) -> EngineLimits:
    """vLLM's defaults on `gpu`, for its OpenAI server (or its offline `LLM` class); the
    same at every layout."""
    memory = gpu.memory_bytes if gpu is not None else 0
    large = memory >= 70 * GIB and not (gpu is not None and "a100" in gpu.key.lower())
    if memory >= 160 * GIB:
        seqs, tokens = 1024, 16384
    elif large:
        seqs, tokens = 1024, 16384 if offline else 8192
    else:
        seqs, tokens = 256, 8192 if offline else 2048
    return EngineLimits("vllm", seqs, tokens, 0.92, EACH_GPU, "vLLM 0.32 defaults")


# SGLang 0.5.23's capacity tiers by the GPU's MiB: (below, chunked_prefill_size, decode
# cuda_graph_max_bs below TP 4, from TP 4); the last tier has no bound.
SGLANG_TIERS = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 4096, 48, 160),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (None, 16384, 512, 512),
)
SGLANG_MAX_RUNNING = 2048  # resolve_max_num_reqs's floor when none is given
SGLANG_SPECULATIVE_RUNNING = 48  # its EAGLE, standalone-draft and n-gram default


def sglang(gpu: GPU | None, offline: bool = False, tp: int = 1, pp: int = 1) -> EngineLimits:
    """SGLang's defaults on `gpu` at `tp` × `pp` GPUs a copy (`handle_gpu_memory_settings`)."""
    mib = gpu.memory_bytes / MIB if gpu is not None else None
    if mib is None:
        chunk, graph_bs, share = 4096, 160, 0.95  # its fallback where the memory is unknown
    else:
        _, chunk, small, large = next(t for t in SGLANG_TIERS if t[0] is None or mib < t[0])
        graph_bs = small if tp < 4 else large
        # Prefill graphs are captured up to the chunk (8,192 tokens at most with PP).
        graph_tokens = min(chunk, 8192) if pp > 1 else chunk
        reserved = (512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + graph_bs * 2
                    + len(_prefill_graph_sizes(graph_tokens)) * 8)  # fmt: skip
        if mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        share = round((mib - reserved) / mib, 3)
    return EngineLimits("sglang", SGLANG_MAX_RUNNING, chunk, share, STATIC,
                        "SGLang 0.5.23 defaults", SGLANG_SPECULATIVE_RUNNING)  # fmt: skip


def _prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures prefill CUDA graphs at, up to `max_tokens`
    (`generate_prefill_cuda_graph_batch_sizes`)."""
    sizes = [
        *range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
        *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512),
    ]  # fmt: skip
    return [s for s in sizes if s <= max_tokens]


def tensorrt_llm(gpu: GPU | None, offline: bool = False, tp: int = 1, pp: int = 1) -> EngineLimits:
    """TensorRT-LLM's trtllm-serve defaults (the same on every GPU and layout)."""
    return EngineLimits("trtllm", 2048, 8192, 0.9, FREE, "TensorRT-LLM trtllm-serve defaults")


ENGINES: dict[str, Callable[..., EngineLimits]] = {
    "vllm": vllm,
    "sglang": sglang,
    "trtllm": tensorrt_llm,
}
DEFAULT_ENGINE = "vllm"


def limits(
    gpu: GPU | None,
    engine: str = DEFAULT_ENGINE,
    offline: bool = False,
    *,
    tp: int = 1,
    pp: int = 1,
) -> EngineLimits:
    """`engine`'s limits on `gpu`, for a copy of `tp` × `pp` GPUs."""
    return ENGINES[engine](gpu, offline, tp, pp)
