"""The advice and the predictions as serialisable dataclasses (no torch).

`Advice.to_dict()` is the `advice` key of a profile's JSON and of
`python -m profiling estimate --json`; each `PredictionPoint.to_dict()` is
one entry of the `predictions` list beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde

MEASURED, ESTIMATED = "measured", "estimated"
# PredictionPoint.basis: a point predicted by a fit that left it out, the
# user's workload projected with the fit on this device, or datasheet rates.
CALIBRATED, PROJECTED = "calibrated", "projected"


@dataclass
class DecidingNumber:
    """A figure the bottleneck was decided on, with the line it was held against."""

    name: str  # "decode_share", "memory_headroom_share", ...
    value: float | None
    unit: str  # "share", "bytes", "ms", "FLOP/byte", ...
    threshold: float | None = None
    note: str = ""


@dataclass
class Change:
    """One figure before and after the recommendation (computed from measured numbers)."""

    metric: str  # "tpot_ms", "weights_bytes", "decode_tokens_per_second", ...
    before: float
    after: float
    unit: str


@dataclass
class ExpectedEffect:
    text: str  # "decode 2.1× faster: TPOT 10.3 → 4.9 ms"
    changes: list[Change] = field(default_factory=list)


@dataclass
class Evidence:
    """Where in the report a figure comes from: the page anchor, the JSON key, the figure."""

    anchor: str  # "#quantization"
    key: str  # "quantization.variants[2]"
    figure: str  # "top-1 agreement 99 %, perplexity +0.4 %"


@dataclass
class Recommendation:
    technique: str  # a name in profiling.techniques
    setting: str  # concrete: "int8 weight-only, keep lm_head and embeddings in float32"
    expected_effect: ExpectedEffect
    evidence: list[Evidence]
    caveats: list[str]
    basis: str  # MEASURED or ESTIMATED
    serves: str  # the bottleneck it acts on: "memory", "generation", "prompt", "devices"
    gain: float  # the ranking key: factor of improvement on the metric it serves
    # How sure: "measured, 95 % interval 1.31–1.55× over 5 repeats", or why it is estimated.
    confidence: str = ""
    gain_low: float | None = None  # the gain's interval, where repeats were measured
    gain_high: float | None = None
    # The report's figures already include it (an engine default such as vLLM's prefix
    # caching): its "after" is the report's figure, its "before" the figure without it.
    already_on: bool = False
    # Whether it meets the user's TTFT and TPOT targets (None: no target, or not known);
    # a technique whose own figures say it cannot meet them is False.
    meets_targets: bool | None = None
    # It needs GPUs beyond the user's: ranked after every change to what they have.
    more_hardware: bool = False
    # The GPUs it runs on, where it changes them (None: the ones the job named); more
    # than the job named ranks it as `more_hardware` (`profiling.advice.ranking`).
    devices: int | None = None
    # Its own section's words where its figures rule out the user's target ("even
    # decode alone misses the 5 ms TPOT target"): it then ranks after what can help.
    cannot: str = ""
    # The most its gain can physically be, and why (a speculative speedup's tokens per
    # target pass): a figure above it is an outlier, never shown as measured.
    gain_bound: float | None = None
    bound_why: str = ""
    # The batch its evidence was measured at, where not the user's concurrency: its text
    # or caveats say so.
    measured_at_batch: int | None = None


@dataclass
class NotRecommended:
    technique: str
    why: str  # the measured reason, with its figure
    key: str = ""  # the JSON key of that figure
    # The effect was measured but its interval holds "no change": neither a win nor a loss.
    inconclusive: bool = False


@dataclass
class MissingExperiment:
    technique: str
    judged: str  # "estimated" (an analytic fallback stands in) or "not judged"
    note: str


@dataclass
class QualityTolerance:
    """How much a quantized variant may change the model's outputs and still be advised."""

    min_top1_agreement: float
    max_perplexity_increase: float  # relative: 0.05 is +5 %


@dataclass
class Advice:
    """The measured bottleneck and the ranked recommendations for the user's workload."""

    basis: str  # MEASURED (a profiled job) or ESTIMATED (shapes and datasheet only)
    bottleneck: str  # "memory", "generation", "prompt" or "devices"
    bottleneck_label: str
    summary: str  # one line: the bottleneck and the first recommendation
    deciding_numbers: list[DecidingNumber]
    stated_bottleneck: str  # what the user said: one of config.BOTTLENECKS
    agrees: bool | None  # None when the user was unsure
    agreement_note: str
    recommendations: list[Recommendation]
    not_recommended: list[NotRecommended]
    experiments_missing: list[MissingExperiment]
    quality_tolerance: QualityTolerance
    ranking: str = ""  # how the recommendations are ordered, in words
    notes: list[str] = field(default_factory=list)
    # The search over deployable configurations (`profiling.projection.deployments`'s
    # `Deployments.to_dict()`), where the deployment GPU is known.
    deployments: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Advice:
        return serde.from_dict(cls, data)

    @property
    def first(self) -> Recommendation | None:
        return self.recommendations[0] if self.recommendations else None


@dataclass
class PredictionPoint:
    """A predicted figure beside its measurement (None where nothing was measured there)."""

    metric: str  # "prefill_seconds", "tpot_seconds", "memory_bytes", ...
    unit: str  # "s", "bytes", "tokens/s"
    at: dict[str, Any]  # the point: shapes of the request, and the device
    predicted: float
    measured: float | None
    error: float | None  # (predicted - measured) / measured
    basis: str  # CALIBRATED, PROJECTED or ESTIMATED
    note: str = ""
    # An estimated figure's error against published serving measurements of its metric
    # (`profiling.projection.validation.Band`): {"metric", "median_error", "rows", ...}.
    published_error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @property
    def published_error_text(self) -> str:
        e = self.published_error
        if not e:
            return ""
        rows = f"{e['rows']} published serving row{'s' if e['rows'] != 1 else ''}"
        of = f" of {e['kind']} models" if e.get("kind") else ""
        return f"± {e['median_error']:.0%} against {rows}{of}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PredictionPoint:
        return serde.from_dict(cls, data)
