"""The measured parts of a profile: dataclasses built from primitives and `Samples`.

The whole result (these parts, each technique's typed result, the advice) is
`profiling.profile.Profile`; what was loaded is `profiling.model.info.ModelInfo`.

No torch import here: the site reads results with this module alone.
Every timed quantity is a `Samples`: the raw samples are kept and the
median and percentiles are derived from them, never stored on their own.
Units are in the field names (`_bytes`, `_seconds`, `_per_second`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# A measurement whose p10..p90 spread exceeds this share of its median is
# flagged as noisy: its median is still the best estimate, but it is shaky.
NOISY_SPREAD = 0.10


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    frac = pos - low
    return sorted_values[low] * (1 - frac) + sorted_values[high] * frac


@dataclass
class Samples:
    """Repeated measurements of one quantity (seconds unless named otherwise)."""

    samples: list[float]
    median: float = field(init=False)
    p10: float = field(init=False)
    p90: float = field(init=False)

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("Samples needs at least one sample")
        ordered = sorted(self.samples)
        self.median = percentile(ordered, 50)
        self.p10 = percentile(ordered, 10)
        self.p90 = percentile(ordered, 90)

    @property
    def spread(self) -> float:
        """p10..p90 width relative to the median (0.05 means ±~2.5 %)."""
        return (self.p90 - self.p10) / self.median if self.median else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD

    def json_extra(self) -> dict[str, Any]:
        """Derived values written beside the fields, for readers of the JSON."""
        return {"spread": self.spread, "noisy": self.noisy}


@dataclass
class Environment:
    """Where and with what the profile ran: enough to reproduce it."""

    device: str  # "cpu", "cuda:0", "mps"
    device_name: str
    device_memory_bytes: int | None = None
    gpu_kind: str | None = None  # catalog key the device matched, if any
    driver: str | None = None
    cuda: str | None = None
    torch: str = ""
    transformers: str = ""
    python: str = ""
    platform: str = ""
    hostname: str = ""
    cpu_count: int | None = None
    torch_threads: int | None = None
    dtype: str = ""
    started_at: str = ""
    finished_at: str = ""
    # The physical GPUs this run was given (CUDA_VISIBLE_DEVICES: "2,3"), "" when unset;
    # `device` "cuda:0" is the first of them.
    visible_devices: str = ""
    # Measured at the start of the run (profiling.measure.bandwidth): a device-to-device copy
    # (bytes read + written per second) and a read-only pass.
    copy_bandwidth_bytes_per_second: float | None = None
    read_bandwidth_bytes_per_second: float | None = None


@dataclass
class FitCheck:
    """Do weights + KV for concurrency x context fit the target GPUs?"""

    gpu_kind: str
    gpu_count: int
    device_memory_bytes: int
    concurrency: int
    context_tokens: int
    weights_bytes: int
    kv_cache_bytes: int
    required_bytes: int
    available_bytes: int  # after the reserve for activations and runtime
    fits: bool
    headroom_bytes: int
    max_concurrency: int  # most requests of this context that fit
    note: str = ""
    activation_bytes: int = 0  # over all GPUs: the largest prefill chunk's peak (estimated)


@dataclass
class MemoryResult:
    weights_bytes: int  # summed from the loaded tensors' storage
    weights_bytes_by_dtype: dict[str, int]
    kv_cache_bytes_per_token: int  # measured from a real cache object
    kv_cache_bytes_per_token_computed: int  # 2 x layers x kv_heads x head_dim x bytes
    peak_prefill_bytes: int | None  # during the largest measured prefill
    peak_prefill_method: str  # "cuda_max_allocated", "rss_delta"
    peak_prefill_prompt_tokens: int = 0
    peak_prefill_batch_size: int = 0
    nvml_used_bytes: int | None = None  # whole device incl. CUDA context
    fit: FitCheck | None = None


@dataclass
class PrefillPoint:
    prompt_tokens: int
    batch_size: int
    seconds: Samples
    tokens_per_second: float
    flops: float  # model FLOPs of this prefill (2 x params x tokens + attention)
    achieved_flops_per_second: float
    peak_flops_per_second: float | None = None  # catalog's dense peak, if known
    fraction_of_peak: float | None = None
    # Bytes the pass moves (every weight read once, the KV cache written) and their rate,
    # over the device's measured copy bandwidth (Environment). None in older results.
    bytes_moved: float | None = None
    achieved_bytes_per_second: float | None = None
    fraction_of_copy: float | None = None


@dataclass
class DecodePoint:
    batch_size: int
    context_tokens: int
    seconds_per_token: Samples  # one decode step (one token for each row)
    tokens_per_second: float  # batch_size / median step time
    bytes_per_step: float  # weights + KV read per step
    achieved_bytes_per_second: float
    peak_bytes_per_second: float | None = None
    fraction_of_peak: float | None = None
    # How the step ran (profiling.measure.decode_path): "static-compiled",
    # "static" or "eager"; `path_reason` says why when it is not the fastest.
    # Results written before this was recorded ran "eager".
    path: str = "eager"
    path_reason: str = ""
    # Achieved bytes/s over the device's measured copy bandwidth (Environment).
    fraction_of_copy: float | None = None
    # Model FLOPs of one step (every row: body and head once, attention over the context),
    # their rate and its share of the catalog's dense peak. None in older results.
    flops_per_step: float | None = None
    achieved_flops_per_second: float | None = None
    fraction_of_peak_flops: float | None = None


@dataclass
class PhaseVerdict:
    """Which phase dominates one request of the user's workload."""

    prompt_tokens: int
    output_tokens: int
    concurrency: int
    prefill_seconds: float
    decode_seconds: float
    end_to_end_seconds: float
    prefill_share: float
    decode_share: float
    dominant: str  # "prefill" or "decode"
    ttft_ms: float
    tpot_ms: float
    ttft_meets_target: bool | None
    tpot_meets_target: bool | None
    interpolated: bool  # the workload lies outside the measured sweep
    basis: str  # how the figures were derived from the measured points
    fits: bool | None = None
    summary: str = ""
