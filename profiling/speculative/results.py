"""What the speculative-decoding experiment measured, as a serialisable dataclass tree.

No torch import: the site reads these with `profiling.serde` alone. Timed
quantities are `Samples` (raw samples kept); counts are exact integers from
our own loop, so ratios derived from them are exact too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.results import Samples

PROMPT_LOOKUP = "prompt-lookup"
ACCEPTANCE_CONVENTION = (
    "mean_accepted_length = 1 + accepted / target passes: tokens emitted per target pass "
    "per sequence (the accepted draft tokens plus the target's own token)"
)


@dataclass
class DraftMemory:
    """What a draft costs in memory beside the target (zero for prompt lookup)."""

    name: str
    kind: str  # "model" or "prompt_lookup"
    num_parameters: int
    weights_bytes: int  # real storage of parameters and buffers, shared storage once
    kv_cache_bytes_per_token: int  # measured from a real cache, per sequence


@dataclass
class TraceStep:
    """One target pass of the sample prompt.

    `target_token` is the target's own greedy token: a correction when a
    proposal was rejected (`bonus` false), the bonus token when every proposal
    was accepted (`bonus` true). It is None only when the sequence ended on an
    accepted end-of-sequence token.
    """

    proposed: list[int]
    proposed_text: list[str]
    accepted_count: int
    target_token: int | None
    target_text: str
    bonus: bool
    first_rejected: int | None = None  # the first proposal the target refused


@dataclass
class SweepPoint:
    """One draft at one K and one batch size, over the whole prompt set."""

    draft: str
    k: int
    batch_size: int
    prompts: int
    generated_tokens: int
    proposed_tokens: int
    accepted_tokens: int
    corrections: int
    bonus_tokens: int
    target_passes: int  # batched target forwards
    sequence_passes: int  # target forwards summed over the rows they served
    acceptance_rate: float  # accepted / proposed
    mean_accepted_length: float  # see ACCEPTANCE_CONVENTION
    acceptance_by_position: list[float]  # share of sequence passes accepting position i
    seconds: Samples  # one sample: every prompt of the set, end to end
    baseline_seconds: Samples  # the target's own greedy decode, same prompts and batch
    tokens_per_second: float
    baseline_tokens_per_second: float
    speedup: float  # baseline median / speculative median (the pairs were interleaved)
    # Phase costs over the passes after the first (which also prefills the prompt).
    draft_seconds_per_token: Samples | None = None
    verify_seconds_per_pass: Samples | None = None
    matches_baseline: bool = True  # token-for-token equal to the target's greedy output
    # True: each baseline sample timed right before its speculative one (CPU); False:
    # one baseline timing per batch size, shared by every draft and K (GPU).
    paired: bool = True
    # Where it is not (profiling.speculative.exactness): the share of tokens before
    # each row's first difference, the earliest differing position, and whether the
    # split is "numerics" (bf16/fp16, a near tie within rounding) or "real".
    agreement: float = 1.0
    first_divergence: int | None = None
    divergence: str = ""
    logit_gap: float | None = None


@dataclass
class VerifyCostPoint:
    """One target pass over K+1 new tokens against one over a single token.

    With free drafting and every proposal accepted, a pass emits K+1 tokens,
    so `speedup_bound = (k + 1) / cost_ratio` caps what speculation can gain.
    With a draft model, drafting K tokens costs K draft steps:
    `speedup_bound_with_draft = (k + 1) / (cost_ratio + k * draft step / target step)`.
    Both hold for random weights too: they need timing only.
    """

    k: int
    batch_size: int
    context_tokens: int
    one_token_seconds: Samples
    verify_seconds: Samples
    cost_ratio: float  # median over interleaved pairs of verify / one-token seconds
    speedup_bound: float
    draft_token_seconds: Samples | None = None  # one draft step at the same batch and context
    speedup_bound_with_draft: float | None = None
    # The baseline's decode path the passes ran on (profiling.measure.decode_path) and
    # why it is not the fastest; "" in results from before the passes ran there.
    path: str = ""
    path_reason: str = ""


@dataclass
class BestK:
    draft: str
    batch_size: int
    k: int
    speedup: float
    tokens_per_second: float


@dataclass
class SpeculativeResult:
    """Everything the speculative-decoding experiment measured (`speculative` in the profile)."""

    target: str
    config_only: bool
    acceptance_meaningful: bool  # false for random weights: only the cost curve counts
    acceptance_convention: str
    max_new_tokens: int
    prompt_set_version: int | None
    draft_memory: list[DraftMemory]
    sweeps: list[SweepPoint]
    best_k: list[BestK]  # one per (draft, batch size)
    verify_cost: list[VerifyCostPoint]
    # Each batch size's best sweep point timed again with fresh repeats: the sweep
    # chose it as the luckiest of several, so its speedup is judged on these.
    confirmations: list[SweepPoint] = field(default_factory=list)
    trace: list[TraceStep] = field(default_factory=list)
    trace_draft: str = ""
    trace_k: int = 0
    trace_prompt: str = ""
    finding: str = ""
    # Which cache and path each timing ran on, and why the sweep's figures differ from
    # the baseline's decode steps (`report.timing_note`).
    timing_note: str = ""
    warnings: list[str] = field(default_factory=list)
    # Costed before it ran (profiling.speculative.budget): the sweep's estimated
    # seconds, the budget it was given (None: none, on CPU) and what was cut to fit.
    planned_seconds: float | None = None
    budget_seconds: float | None = None
    trimmed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpeculativeResult:
        return serde.from_dict(cls, data)
