"""What the prefix-caching experiment measured, as a serialisable dataclass tree.

No torch import: the site reads these with `profiling.serde` alone. Timed
quantities are `Samples` (raw samples kept). "Cold" is a prefill of the whole
prompt into an empty cache; "warm" is a prefill of only the tokens after a
prefix whose keys and values were computed once before and reused (the
cache is copied outside the timed region, as a server would reference it).
TTFT here is that prefill with last-token logits: queueing, tokenization and
sampling are left out, and they are the same warm or cold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.results import Samples

REUSE_CONVENTION = (
    "a prompt reuses the longest prefix it shares with any earlier prompt of the sample "
    "(an unbounded cache, prompts in file order), at most all its tokens but the last, "
    "which a server always computes to get the first token's logits; block figures count "
    "only whole blocks of block_size tokens, as paged caches (vLLM) do"
)


@dataclass
class PrefixPoint:
    """One prompt length and one cached prefix: cold against warm TTFT."""

    prompt_tokens: int
    prefix_tokens: int
    prefix_share: float  # prefix_tokens / prompt_tokens
    suffixes: int  # distinct prompt endings timed against the one cached prefix
    cold_ttft_seconds: Samples
    warm_ttft_seconds: Samples
    warm_to_cold: float  # warm median / cold median (the pairs were interleaved)
    prefix_cache_bytes: int  # measured: the key/value tensors the cached prefix holds
    outputs_match: bool  # same greedy tokens, logits within tolerance
    tokens_match: bool
    max_abs_logit_diff: float  # over the greedy steps compared
    greedy_tokens: int  # tokens generated warm and cold for the comparison
    # The first generated token where warm and cold differ (None: identical); in half
    # precision with logits within tolerance that split is numerics.
    first_divergence: int | None = None
    label: str = ""  # "", "shared prefix" (the workload's), "prompt sample"


@dataclass
class TurnPoint:
    """One turn of a conversation whose earlier turns are in the cache."""

    turn: int  # 1-based
    prompt_tokens: int  # the whole conversation so far, this turn's message included
    cached_tokens: int  # turns 1..n-1 (messages and replies), reused when warm
    new_tokens: int  # prefilled when warm: this turn's message
    cold_ttft_seconds: Samples
    warm_ttft_seconds: Samples
    warm_to_cold: float
    cache_bytes: int  # measured: what the cached turns hold
    outputs_match: bool
    max_abs_logit_diff: float


@dataclass
class PrefixBucket:
    """Prompts whose reused prefix is `low`..`high` tokens long (inclusive)."""

    low: int
    high: int | None  # None: no upper bound
    prompts: int


@dataclass
class PromptSampleReuse:
    """How much prefill a prefix cache would save on the user's own prompts.

    The counts follow REUSE_CONVENTION. `hit_rate` is the share of prompts
    reusing at least one token (the first prompt never can); the block
    variant needs at least one whole block. `unique_tokens` is what a cache
    holding every prompt would store. The TTFT figures are filled on the
    worker from the measured sweep at `prompt_tokens`.
    """

    prompts: int
    total_tokens: int
    reusable_tokens: int
    reuse_fraction: float
    hit_rate: float
    block_size: int
    block_reusable_tokens: int
    block_reuse_fraction: float
    block_hit_rate: float
    unique_tokens: int
    mean_prompt_tokens: float
    max_prompt_tokens: int
    median_reused_tokens: float
    shared_prefix_histogram: list[PrefixBucket]
    tokenization: str = "tokenizer"  # or "bytes": UTF-8 bytes, the model has no tokenizer
    convention: str = REUSE_CONVENTION
    cache_bytes_needed: int | None = None  # unique_tokens x measured KV bytes per token
    prompt_tokens: int | None = None  # the prompt length the TTFT figures are for
    cold_ttft_seconds: float | None = None  # median, no reuse
    warm_ttft_seconds: float | None = None  # measured at reuse_fraction of the prompt
    interpolated_warm_ttft_seconds: float | None = None  # from the sweep, a cross-check
    ttft_saving_fraction: float | None = None  # 1 - warm / cold
    measured: PrefixPoint | None = None  # the point at reuse_fraction the figures come from


@dataclass
class CachingResult:
    """Everything the prefix-caching experiment measured (`caching` in the profile)."""

    model: str
    config_only: bool
    prompt_tokens: int  # the sweep's prompt length (the workload's, capped)
    requested_prompt_tokens: int
    kv_bytes_per_token: int  # measured from a real cache
    prefix_sweep: list[PrefixPoint]
    multi_turn: list[TurnPoint]
    shared_prefix: PrefixPoint | None = None  # at the workload's shared_prefix_tokens
    shared_prefix_requested_tokens: int = 0
    prefix_cache_tokens: int = 0  # the shared prefix, else the sweep's largest prefix
    prefix_cache_bytes: int = 0  # measured from that prefix's cache
    prompt_sample: PromptSampleReuse | None = None
    finding: str = ""
    warnings: list[str] = field(default_factory=list)
    # Costed before it ran (profiling.caching.budget): the estimated seconds, the
    # budget it was given (None: none, on CPU) and what was cut to fit.
    planned_seconds: float | None = None
    budget_seconds: float | None = None
    trimmed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CachingResult:
        return serde.from_dict(cls, data)


@dataclass
class ConversationsResult:
    """A workload of conversations replayed through the prefix cache: the section the
    estimate's conversation projection writes (`profiling.caching.conversation_estimate`),
    with the hit check and the engine's replay the job adds to it. Kept as that section's
    JSON, flat under the result's name."""

    section: dict[str, Any] = field(default_factory=dict, metadata={"flatten": True})

    @property
    def finding(self) -> str:
        """Its one line: the replay's summary where it was projected on a GPU."""
        served = self.section.get("served")
        return str(served.get("summary", "")) if isinstance(served, dict) else ""
