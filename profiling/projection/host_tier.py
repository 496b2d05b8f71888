"""A host-memory KV tier under the GPUs' prefix cache: the hits it adds and what they cost.

No torch import. vLLM's native CPU offloading (`--kv-offloading-backend native
--kv-offloading-size GiB`, 0.32: `vllm/config/cache.py`, `kv_offloading_size` and
`kv_offloading_backend`) stores every computed block in host memory too, keeps it
there least recently used first, and loads a block the GPU's cache has lost back
over the host link when a prompt asks for it. The tier is inclusive: it holds the
most recent `host` tokens of blocks as the GPU holds the most recent `gpu`, so the two
together hit as one LRU cache of the larger size; a tier no larger than the GPU's
cache adds nothing.

A hit from the tier costs its KV bytes over the host→device link (each GPU of a
tensor-parallel group loads its own shard over its own link), where the GPU would
otherwise recompute those tokens: the prefill time they add to the turn's own prompt
chunk (the step model's, so a short prompt whose step reads the weights anyway costs
little more to recompute). The link is the measured pinned host→device copy where the
worker measured one on this GPU (`profiling.measure.bandwidth.host_to_device`), else
the datasheet's, marked estimated.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any

from profiling import serde
from profiling.measure.hardware import GPU
from profiling.projection import block_cache as bc
from profiling.projection.conversation_serving import Prepared, Setup, served_with
from profiling.projection.estimate import Projection
from profiling.projection.step_time import StepModel
from profiling.units import GIB

GB = 1e9
# The host link of each catalog GPU, one way, as the sources say (looked up 2026-12-06):
# - PCIe Gen5 x16 is the host interconnect of H100/H200 SXM and B200 boards in MLPerf's
#   system descriptions (https://raw.githubusercontent.com/mlcommons/inference_results_v4.1/
#   main/closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json, https://raw.githubusercontent.
#   com/mlcommons/inference_results_v6.0/main/closed/Nebius/systems/nebius_b200_n1.json) and
#   of MI300X (https://raw.githubusercontent.com/mlcommons/inference_results_v4.1/main/closed/
#   AMD/systems/8xMI300X_2xEPYC-9374F.json); 128 GB/s both ways, 64 GB/s each
#   (https://github.com/scaleway/docs-content/pull/5834: "a theoretical maximum of 128 GB/s
#   via PCIe Gen 5"; the catalog's PCIe 5.0 x16 figure, from nvidia.com/en-us/data-center/h100).
# - PCIe cards link to the host over the PCIe link the catalog already names for them.
# - GH200's Grace CPU reaches the GPU over NVLink-C2C, 900 GB/s both ways, 450 GB/s each
#   (https://github.com/AshokBhat/notes/wiki/Grace quoting NVIDIA's "900 GB/s coherent
#   interface"; https://www.emergentmind.com/topics/gh200-technology: "450 GB/s in each
#   direction between CPU and GPU").
PCIE5 = ("PCIe 5.0 x16", 64 * GB)
C2C = ("NVLink-C2C", 450 * GB)
HOST_LINKS = {
    "H200": PCIE5, "H100-SXM": PCIE5, "B200": PCIE5, "MI300X": PCIE5, "MI325X": PCIE5,
    "A100-80GB": ("PCIe 4.0 x16", 32 * GB), "A100-40GB": ("PCIe 4.0 x16", 32 * GB),
    "GH200": C2C, "GH200-144GB": C2C,
}  # fmt: skip
ASSUMED_LINK = ("PCIe 4.0 x16 (assumed)", 32 * GB)
# Why the engine's offload cannot be measured on a CPU worker.
OFFLOAD_CPU_REASON = (
    "not applicable on CPU: vLLM's KV offloading moves blocks between a GPU and host "
    "memory, and a CPU worker has no GPU to offload from"
)
TIER_GRID = 8  # host sizes tried for the one that captures most of the gain
MOST_OF_THE_GAIN = 0.9


@dataclass(frozen=True)
class HostLink:
    name: str
    bytes_per_second: float  # host → device, one way, per GPU
    basis: str  # "measured" or "estimated"


def host_link(gpu: GPU | None, measured_bytes_per_second: float | None = None) -> HostLink:
    """The measured link where there is one, else the datasheet's for `gpu`."""
    if measured_bytes_per_second:
        return HostLink("measured pinned host→device copy", measured_bytes_per_second, "measured")
    if gpu is not None and gpu.key in HOST_LINKS:
        name, rate = HOST_LINKS[gpu.key]
    elif gpu is not None and gpu.interconnect.startswith("PCIe"):
        name, rate = gpu.interconnect, gpu.interconnect_bytes_per_second
    else:
        name, rate = ASSUMED_LINK
    return HostLink(name, rate, "estimated")


def worker_memory_bytes() -> int:
    """This machine's physical memory (the default size the tier may take)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def host_bytes_of(host_memory_gib: float | None) -> int:
    """The host memory a tier may take: the GiB the user named, else this worker's."""
    return int(host_memory_gib * GIB) if host_memory_gib else worker_memory_bytes()


@dataclass
class HostTier:
    """The tier's projection at `host_bytes`; the advice decides from it."""

    host_bytes: int
    host_tokens: int
    gpu_tokens: int | None
    link: HostLink
    reusable_rate: float  # the most reuse can give (room for everything)
    gpu_hit_rate: float  # the GPUs' cache alone
    tier_hit_rate: float  # with the tier
    loaded_tokens_per_request: float  # from the tier, over every turn
    load_seconds: float  # summed over the turns that load
    recompute_seconds: float  # what the same turns would spend recomputing instead
    without: Projection
    with_tier: Projection | None  # None where it adds no hits
    load_ms_per_request: float  # the mean load added to a turn's TTFT
    sizes: list[tuple[int, float]]  # (host bytes, hit rate) of tier sizes tried
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


def project_host_tier(
    p: Prepared,
    step: StepModel,
    setup: Setup,
    host_bytes: int | None = None,
    measured_link: float | None = None,
) -> HostTier:
    """The tier of `host_bytes` (default: this machine's memory) under the GPUs' cache of
    `p.capacity_tokens`, the conversations served as `setup` says."""
    host_bytes = host_bytes_of(None) if host_bytes is None else host_bytes
    workload, kv_token = p.workload, p.kv_bytes_per_token
    host_tokens = host_bytes // max(1, kv_token)
    everything = bc.replay(workload, bc.unlimited_tokens(workload))
    gpu_tokens = p.capacity_tokens
    gpu_only = bc.replay(workload, gpu_tokens) if gpu_tokens is not None else everything
    tiered = bc.replay(workload, max(host_tokens, gpu_tokens or 0)) if gpu_tokens is not None \
        else everything  # fmt: skip
    link = host_link(setup.deployment.gpu, measured_link)
    moved = _Loads.of(p, step, setup.deployment.gpu_count, link, (gpu_only, tiered))
    model, calibration, dtype = step.shapes, step.rates, step.dtype
    without = served_with(p, gpu_only, model, calibration, dtype, setup)
    requests = max(1, len(workload.requests))
    load_ms = moved.load / requests * 1e3
    with_tier = None
    if moved.loaded:
        # A turn's TTFT gains its load: it meets the target when the rest meets the target
        # less the mean load.
        ttft_ms = setup.ttft_ms
        target = max(1e-3, ttft_ms - load_ms) if ttft_ms else None
        with_tier = served_with(p, tiered, model, calibration, dtype,
                                replace(setup, ttft_ms=target))  # fmt: skip
    return HostTier(
        host_bytes=host_bytes,
        host_tokens=host_tokens,
        gpu_tokens=gpu_tokens,
        link=link,
        reusable_rate=everything.hit_rate,
        gpu_hit_rate=gpu_only.hit_rate,
        tier_hit_rate=tiered.hit_rate,
        loaded_tokens_per_request=moved.loaded / requests,
        load_seconds=moved.load,
        recompute_seconds=moved.recompute,
        without=without,
        with_tier=with_tier,
        load_ms_per_request=load_ms,
        sizes=tier_sizes(workload, gpu_tokens, host_tokens, kv_token),
    )


@dataclass(frozen=True)
class _Loads:
    """What the tier's hits move over the host link, summed over the turns that load."""

    loaded: int  # tokens
    load: float  # seconds over the link
    recompute: float  # seconds the same turns would spend recomputing instead

    @classmethod
    def of(
        cls,
        p: Prepared,
        step: StepModel,
        gpu_count: int,
        link: HostLink,
        replays: tuple[bc.Replay, bc.Replay],
    ) -> _Loads:
        """`replays`: the GPUs' cache alone, then with the tier."""
        gpu_only, tiered = replays
        kv_token = p.kv_bytes_per_token
        load = recompute = 0.0
        loaded = 0
        for request, near, far in zip(p.workload.requests, gpu_only.per_request,
                                      tiered.per_request, strict=True):  # fmt: skip
            if far <= near:
                continue
            loaded += far - near
            load += (far - near) * kv_token / gpu_count / link.bytes_per_second
            fresh = request.prompt_tokens - far
            recompute += step.seconds(0, 0, ((fresh + far - near, near),))
            recompute -= step.seconds(0, 0, ((fresh, far),))
        return cls(loaded, load, recompute)


def tier_sizes(
    workload: bc.Workload, gpu_tokens: int | None, host_tokens: int, kv_token: int
) -> list[tuple[int, float]]:
    """Hit rates of tiers from the GPUs' size up to `host_tokens` (or everything the
    workload touches, where less), evenly spaced."""
    if gpu_tokens is None or host_tokens <= gpu_tokens:
        return []
    top = min(host_tokens, bc.unlimited_tokens(workload))
    if top <= gpu_tokens:
        return []
    out = []
    for i in range(1, TIER_GRID + 1):
        tokens = gpu_tokens + (top - gpu_tokens) * i // TIER_GRID
        out.append((tokens * kv_token, bc.replay(workload, tokens).hit_rate))
    return out


def size_for_most_of_the_gain(tier: HostTier) -> int | None:
    """The smallest tier size tried that reaches `MOST_OF_THE_GAIN` of the hits the whole
    tier adds (bytes), None where it adds none."""
    added = tier.tier_hit_rate - tier.gpu_hit_rate
    if added <= 0 or not tier.sizes:
        return None
    for size, rate in tier.sizes:
        if rate - tier.gpu_hit_rate >= MOST_OF_THE_GAIN * added - 1e-12:
            return size
    return tier.sizes[-1][0]


def offload_flags(size_bytes: int) -> list[str]:
    """vLLM 0.32's flags for a native CPU tier of `size_bytes` (its size is in GiB,
    summed over the tensor-parallel ranks: `vllm/config/cache.py`)."""
    gib = str(offload_gib(size_bytes))
    return ["--kv-offloading-backend", "native", "--kv-offloading-size", gib]


def offload_setting(engine: str, size_bytes: int, tp: int = 1) -> str:
    """How `engine` is told to keep a host tier of `size_bytes` over `tp` ranks: vLLM's
    flags (`offload_flags`); SGLang 0.5.23's hierarchical cache, whose --hicache-size is
    in GB (10^9 bytes) per rank (`sglang/srt/mem_cache/pool_host/base.py`); TensorRT-LLM's
    in words (its `kv_cache_config.host_cache_size`, bytes, in the --config file)."""
    if engine == "sglang":
        gb = max(1, math.ceil(size_bytes / tp / 1e9))
        return (f"python -m sglang.launch_server … --enable-hierarchical-cache "
                f"--hicache-size {gb}")  # fmt: skip
    if engine == "trtllm":
        return "TensorRT-LLM's kv_cache_config.host_cache_size (bytes) in its --config file"
    return "vllm serve … " + " ".join(offload_flags(size_bytes))


def offload_gib(size_bytes: int) -> int:
    """The whole GiB the flags name for `size_bytes` (at least one)."""
    return max(1, math.ceil(size_bytes / GIB))
