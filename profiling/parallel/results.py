"""What the parallel experiment found, as a serialisable dataclass tree.

No torch import: the site reads these with `profiling.serde` alone. Timed
quantities are `Samples` (raw samples kept); byte counts are exact integers
from the loaded tensors' shapes or from real caches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.results import Samples

BASIS_MEASURED = "measured"
BASIS_ESTIMATED = "estimated from shapes"


@dataclass
class ParallelPlan:
    """One tensor-parallel × pipeline-parallel split and what each device holds.

    Bytes are for the most loaded device (the largest pipeline stage). The KV
    cache is for the user's concurrency × (prompt + output) tokens.
    """

    tp: int
    pp: int
    devices: int  # tp × pp
    valid: bool  # tp divides the attention heads and pp does not exceed the layers
    layers_per_stage: int  # the largest stage
    kv_heads_per_device: int
    kv_replication: int  # copies of each KV head across the tensor-parallel group
    weights_bytes_per_device: int
    kv_cache_bytes_per_device: int
    bytes_per_device: int  # weights + KV cache
    available_bytes_per_device: int | None  # device memory minus the activation reserve
    fits: bool | None  # None when no device memory is known
    note: str = ""


@dataclass
class PlanInputs:
    """What the plans were computed from, so a reader can redo the arithmetic."""

    weights_bytes: int  # every parameter once (tied weights once)
    split_weights_bytes: int  # attention and MLP linears: divided by TP
    kv_projection_bytes: int  # k/v projections: divided by TP down to one head per device
    vocab_bytes: int  # embeddings + untied LM head
    replicated_bytes: int  # norms and anything unrecognised: whole on every device
    layers: int
    attention_heads: int
    kv_heads: int
    kv_bytes_per_token: int  # measured, whole model
    kv_split_by_heads: bool  # false for latent (MLA) caches: replicated under TP
    vocab_parallel: bool  # embeddings and LM head split by vocabulary under TP
    concurrency: int
    context_tokens: int
    gpu_kind: str | None
    device_memory_bytes: int | None
    memory_source: str  # "catalog", "this device" or "unknown"
    reserve_note: str = ""


@dataclass
class MeasuredTP:
    """The model run split over `tp_size` processes with torchrun, against one process.

    `status` is "measured", "skipped" (with the reason) or "failed" (the
    reason says why; the rest of the profile still ran). Ratios are TP time
    over single-process time, medians of interleaved samples.
    """

    status: str
    reason: str = ""
    tp_size: int = 0
    backend: str = ""  # "gloo" or "nccl"
    device: str = ""  # "cpu" or "cuda"
    threads_per_rank: int | None = None
    prompt_tokens: int = 0
    decode_batch: int = 0
    decode_context_tokens: int = 0
    weights_bytes_per_rank: list[int] = field(default_factory=list)  # local shards
    weights_storage_bytes_per_rank: list[int] = field(default_factory=list)  # storages behind them
    single_weights_bytes: int = 0
    weights_ratio: float | None = None  # largest rank's shards / one process
    predicted_weights_bytes_per_rank: int | None = None  # the TP plan's figure
    kv_bytes_per_token_per_rank: list[int] = field(default_factory=list)
    single_kv_bytes_per_token: int | None = None
    prefill_seconds: Samples | None = None
    single_prefill_seconds: Samples | None = None
    prefill_ratio: float | None = None
    decode_step_seconds: Samples | None = None
    single_decode_step_seconds: Samples | None = None
    decode_ratio: float | None = None
    max_logit_difference: float | None = None
    logits_match: bool | None = None
    greedy_tokens_match: bool | None = None
    greedy_tokens: int = 0
    wall_seconds: float | None = None


@dataclass
class DisaggregationResult:
    """Prefill/decode interference measured here, and a split deployment sized from it.

    A mixed step is one decode step of `decode_batch` rows plus the prefill of
    a new request of `prefill_tokens`, run one after the other in the same
    iteration as a scheduler without chunked prefill does; the decode rows
    wait for both, so their token time in that step is the mixed step time.
    """

    decode_batch: int
    decode_context_tokens: int
    prefill_tokens: int  # the measured prompt (the user's, capped in quick mode)
    decode_alone_seconds: Samples
    decode_mixed_seconds: Samples
    prefill_seconds: Samples
    decode_alone_tpot_seconds: float
    decode_mixed_tpot_seconds: float
    tpot_spike: float  # mixed / alone
    mixed_step_share: float  # share of decode steps a new prefill joins
    mean_tpot_seconds: float  # colocated: alone and mixed steps in that share
    tpot_target_seconds: float | None
    alone_meets_tpot: bool | None
    mixed_meets_tpot: bool | None
    ratio_basis: str
    prefill_seconds_per_request: float  # one prompt of the user's length, batch 1
    decode_batch_for_ratio: int
    decode_seconds_per_request: float  # output tokens × step time at that batch
    request_rate_per_second: float  # concurrency / (prefill + decode), Little's law
    prefill_requests_per_second_per_worker: float
    decode_requests_per_second_per_worker: float
    prefill_to_decode_ratio: float  # prefill workers per decode worker
    prefill_workers: int  # for the user's rate
    decode_workers: int
    workers: str  # e.g. "1 prefill : 3 decode"
    kv_transfer_bytes_per_request: int  # measured KV bytes per token × prompt tokens
    kv_transfer_seconds: float | None
    link: str | None  # the catalog's GPU-to-GPU link the KV cache crosses
    link_bytes_per_second: float | None
    ttft_disaggregated_seconds: float | None  # prefill + KV transfer
    ttft_target_seconds: float | None
    disaggregated_meets_ttft: bool | None
    finding: str = ""
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DisaggregationResult:
        return serde.from_dict(cls, data)


@dataclass
class ParallelResult:
    """Everything the parallel experiment found (`parallel` in the profile)."""

    basis: str  # BASIS_MEASURED or BASIS_ESTIMATED
    inputs: PlanInputs
    plans: list[ParallelPlan]
    fewest_devices: ParallelPlan | None
    measured: MeasuredTP
    disaggregation: DisaggregationResult | None
    notes: list[str] = field(default_factory=list)
    finding: str = ""
    warnings: list[str] = field(default_factory=list)
    # Costed before it ran (profiling.parallel.budget): the estimated seconds, the
    # budget it was given (None: none, on CPU) and what was left out to fit.
    planned_seconds: float | None = None
    budget_seconds: float | None = None
    trimmed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParallelResult:
        return serde.from_dict(cls, data)
