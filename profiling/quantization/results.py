"""What the quantization experiment measured, as a serialisable dataclass tree.

No torch import: the site reads these with `profiling.serde` alone. One
`QuantVariant` per precision (and per "kept layers" choice); the first
measured variant is the reference the quality metrics compare against.
Timed quantities are `Samples` (raw samples kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.results import Samples

# QuantVariant.status
MEASURED = "measured"
NOT_AVAILABLE = "not_available"  # the method cannot run on this worker; `reason` says why
DOES_NOT_FIT = "does_not_fit"  # out of memory while loading or running: a finding, not a crash
FAILED = "failed"  # anything else went wrong for this variant; the job went on

QUALITY_CONVENTION = (
    "against the reference variant, on the fixed prompt set and evaluation text: "
    "perplexity = exp(mean next-token cross-entropy on the evaluation text); "
    "top1_agreement = share of teacher-forced positions whose argmax equals the reference's; "
    "kl_divergence = mean KL(reference || variant) of the next-token distributions, in nats"
)


@dataclass
class MethodSettings:
    """How a variant was made: enough to reproduce it."""

    method: str  # "dtype", "torchao", "bitsandbytes", "gptq"
    weight_dtype: str  # "float32", "bfloat16", "int8", "int4", "nf4", "float8_e4m3fn"
    bits: int  # bits per quantized weight (16/32 for plain dtypes)
    group_size: int | None = None
    compute_dtype: str = ""  # dtype of activations and non-quantized parts
    kept_modules: list[str] = field(default_factory=list)  # left in the reference precision
    quantized_modules: int = 0  # how many linear layers were quantized
    library: str = ""  # "torchao 0.18.0", "bitsandbytes 0.50.2", "gptqmodel 7.6.0"
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class GreedySample:
    """One fixed prompt's greedy continuation under a variant, beside the reference's."""

    prompt_index: int
    prompt: str
    reference_tokens: list[int]
    reference_text: list[str]  # each token decoded on its own
    tokens: list[int]
    text: list[str]
    first_divergence: int | None  # index of the first differing token; None when identical


@dataclass
class QuantVariant:
    """One precision of the model, with what it cost and what it changed."""

    name: str  # "int8", "int8 · lm_head quantized"
    precision: str  # the choice it came from: one of config.PRECISIONS
    status: str  # MEASURED, NOT_AVAILABLE, DOES_NOT_FIT, FAILED
    reason: str = ""  # why it was not measured
    is_reference: bool = False
    settings: MethodSettings | None = None
    # Memory: the real storage of the loaded weights (quantized tensors counted
    # by what they hold, not by the size helpers report), and the peak during generation.
    weights_bytes: int | None = None
    linear_weights_bytes: int | None = None  # the linear layers' share (where quantization acts)
    peak_bytes: int | None = None
    peak_method: str = ""  # "cuda_max_allocated", "rss_delta"
    # Speed on the fixed prompts.
    ttft_seconds: Samples | None = None  # prompt in, first token out (batch 1)
    seconds_per_token: Samples | None = None  # one decode step at batch 1
    tokens_per_second: float | None = None  # batch 1
    concurrency: int = 1
    concurrency_seconds_per_token: Samples | None = None  # one decode step at `concurrency`
    concurrency_tokens_per_second: float | None = None
    # How the timed decode steps ran (profiling.measure.decode_path: "static-compiled" on CUDA,
    # where torchao's quantized kernels get fused; "static" on CPU; "eager" in results
    # written before), and why when it is not the fastest.
    decode_path: str = "eager"
    decode_path_reason: str = ""
    # Quality against the reference (see QUALITY_CONVENTION); None when not meaningful.
    perplexity: float | None = None
    top1_agreement: float | None = None
    kl_divergence: float | None = None
    samples: list[GreedySample] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class QuantizationResult:
    """Everything the quantization experiment measured (`quantization` in the profile)."""

    model: str
    config_only: bool
    quality_meaningful: bool  # false for random weights: memory and speed only
    quality_convention: str
    reference: str  # the reference variant's name
    prompt_set_version: int | None
    eval_text_tokens: int  # tokens of the fixed evaluation text scored for perplexity
    max_new_tokens: int  # greedy tokens generated per prompt
    variants: list[QuantVariant]
    finding: str = ""  # "int8 weight-only: weights 3.6× smaller, decode 1.9× faster, ..."
    warnings: list[str] = field(default_factory=list)
    # Costed before it ran (profiling.quantization.budget): the estimated seconds, the
    # budget it was given (None: none, on CPU) and what was cut to fit.
    planned_seconds: float | None = None
    budget_seconds: float | None = None
    trimmed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuantizationResult:
        return serde.from_dict(cls, data)

    @property
    def reference_variant(self) -> QuantVariant | None:
        return next((v for v in self.variants if v.is_reference), None)
