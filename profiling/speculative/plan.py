"""How much one speculative run measures: K values, batch sizes, new tokens, prompts,
warm-ups and repeats (`make_plan`), and the draft model a known target gets when the
user names none. No torch: the form and the engine run read it."""

from __future__ import annotations

from dataclasses import dataclass

from profiling.model.prompts import PromptSet, load_prompts
from profiling.options import FULL_KS, QUICK_KS

QUICK_MAX_BATCH = 8
FULL_MAX_BATCH = 32
QUICK_PROMPTS = 6
QUICK_NEW_TOKENS = 32
FULL_NEW_TOKENS = 128
DEFAULT_DRAFTS = {"demo": "demo-draft"}  # target name -> its default draft model


def default_draft_name(target_name: str) -> str | None:
    """The draft model to use for `target_name` when the user names none."""
    return DEFAULT_DRAFTS.get(target_name)


@dataclass
class SpeculativePlan:
    """How much one run measures: the arguments `run_speculative` takes besides the models."""

    ks: list[int]
    batch_sizes: list[int]
    max_new_tokens: int
    prompts: PromptSet
    warmup: int
    repeats: int


def make_plan(quick: bool, concurrency: int, output_tokens: int) -> SpeculativePlan:
    """Batch 1 and the user's concurrency (capped); the user's output length, capped.

    Quick mode keeps a CPU run of the demo pair to a few minutes: K in 1, 2, 4,
    half the prompt set, 32 new tokens, three timed repeats.
    """
    cap = QUICK_MAX_BATCH if quick else FULL_MAX_BATCH
    prompts = load_prompts()
    if quick:
        prompts = PromptSet(prompts.version, prompts.prompts[:QUICK_PROMPTS])
    return SpeculativePlan(
        ks=list(QUICK_KS if quick else FULL_KS),
        batch_sizes=sorted({1, min(max(1, concurrency), cap)}),
        max_new_tokens=max(1, min(output_tokens, QUICK_NEW_TOKENS if quick else FULL_NEW_TOKENS)),
        prompts=prompts,
        warmup=1,
        repeats=3 if quick else 5,  # rule_kit.MIN_REPEATS: fewer are never a win
    )
