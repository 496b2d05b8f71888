"""What the baseline measures for a workload: the prefill and decode points and how often.

Quick mode takes a few points for a first look plus the user's own shape (prompt
length, concurrency, mean context); full mode sweeps powers of two up to the
user's prompt length, context and concurrency, with more repeats.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.config import Workload

QUICK_PREFILL_TOKENS = (32, 128, 256)
QUICK_DECODE_BATCHES = (1, 4)
QUICK_DECODE_CONTEXTS = (64, 256)
FULL_PREFILL_BATCH = 4


@dataclass
class Plan:
    """The points a baseline run measures, and how often."""

    prefill_tokens: list[int]
    prefill_batches: list[int]
    decode_batches: list[int]
    decode_contexts: list[int]
    warmup: int
    repeats: int
    min_seconds: float | None = None

    @property
    def num_points(self) -> int:
        prefill = len(self.prefill_tokens) * len(self.prefill_batches)
        return prefill + len(self.decode_batches) * len(self.decode_contexts)


def _powers_of_two(low: int, high: int) -> list[int]:
    out, n = [], low
    while n <= high:
        out.append(n)
        n *= 2
    return out


def _capped(values: list[int] | tuple[int, ...], cap: int) -> list[int]:
    kept = sorted({v for v in values if 1 <= v <= cap})
    return kept or [max(1, cap)]


def make_plan(workload: Workload, quick: bool, max_positions: int | None) -> Plan:
    """The sweep for a workload: quick for a first look, full for a report."""
    positions = max_positions or 1 << 20
    prompt_cap = min(workload.prompt_tokens, positions)
    context_cap = min(workload.context_tokens, positions - 1)
    concurrency = workload.concurrency
    mid_context = workload.prompt_tokens + workload.output_tokens // 2
    if quick:
        # A few grid points for the fits, and always the user's own shape: their prompt
        # length, and a decode step at their concurrency and mean context, so the verdict
        # is measured where they serve rather than extrapolated to it.
        return Plan(
            prefill_tokens=_capped([*QUICK_PREFILL_TOKENS, prompt_cap], prompt_cap),
            prefill_batches=[1],
            decode_batches=_capped(
                [*(min(b, concurrency) for b in QUICK_DECODE_BATCHES), concurrency], 4096
            ),
            decode_contexts=_capped([*QUICK_DECODE_CONTEXTS, mid_context], context_cap),
            warmup=1,
            repeats=5,
        )
    contexts = [c for c in (64, 256, 1024, 4096, 16384, 65536) if c < context_cap]
    return Plan(
        prefill_tokens=_capped([*_powers_of_two(16, prompt_cap), prompt_cap], prompt_cap),
        prefill_batches=sorted({1, min(FULL_PREFILL_BATCH, concurrency)}),
        decode_batches=_capped([*_powers_of_two(1, concurrency), concurrency], concurrency),
        decode_contexts=_capped([*contexts, mid_context, context_cap], context_cap),
        warmup=3,
        repeats=10,
        min_seconds=0.25,
    )
