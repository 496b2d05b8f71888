"""Our own greedy speculative loop, batched, with exact per-step counts.

Each target pass: the drafter proposes up to K tokens per row; the target
scores the row's pending tokens plus the proposals in ONE forward over its KV
cache; the longest prefix of proposals equal to the target's own greedy
choices is kept, plus the target's token at the first disagreement (a
correction) or after the last proposal (the bonus token). The refused
proposals are rolled back out of both caches. Every kept token is the
target's own argmax given the tokens before it, so the output is the target's
greedy output token for token.

The first pass also prefills the prompt (prompt + proposals in one forward),
as transformers' assisted generation does. With no drafter the same loop is
plain greedy decoding, one token per pass: the baseline, timed the same way.
Only plain argmax is applied: the target's generation_config logits
processors (repetition penalty and the like) are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from profiling.measure.timing import Clock, CpuClock
from profiling.speculative.drafting import Drafter
from profiling.speculative.stream import KVStream

T = TypeVar("T")


@dataclass
class StepRecord:
    """One target pass of one row."""

    proposed: list[int]
    accepted: int
    target_token: int | None  # None: the row ended on an accepted end-of-sequence token

    @property
    def bonus(self) -> bool:
        return self.target_token is not None and self.accepted == len(self.proposed)

    @property
    def correction(self) -> bool:
        return self.target_token is not None and self.accepted < len(self.proposed)

    @property
    def emitted(self) -> list[int]:
        extra = [] if self.target_token is None else [self.target_token]
        return self.proposed[: self.accepted] + extra


@dataclass
class LoopRun:
    """What one call of `speculative_generate` did, row by row and pass by pass."""

    outputs: list[list[int]]  # new tokens per input row
    steps: list[list[StepRecord]]  # per input row, one record per pass it took part in
    draft_seconds: list[float] = field(default_factory=list)  # per batched pass
    verify_seconds: list[float] = field(default_factory=list)
    proposed_per_pass: list[int] = field(default_factory=list)

    @property
    def target_passes(self) -> int:
        return len(self.verify_seconds)


@torch.inference_mode()
def speculative_generate(
    target: torch.nn.Module,
    prompts: list[list[int]],
    max_new_tokens: int,
    *,
    drafter: Drafter | None = None,
    k: int = 0,
    eos_token_ids: Iterable[int] = (),
    clock: Clock | None = None,
) -> LoopRun:
    """Greedy-decode every prompt (one batch) with drafts of up to `k` tokens.

    `drafter=None` (or k=0) is plain greedy decoding. Rows stop at
    `max_new_tokens` or after an end-of-sequence token, like `generate`.
    `clock` (a `profiling.measure.timing` clock) times the draft and verify phases of
    every pass; a CUDA clock synchronises around each phase.
    """
    eos = set(eos_token_ids)
    clock = clock or CpuClock()
    run = LoopRun(outputs=[[] for _ in prompts], steps=[[] for _ in prompts])
    sequences = [list(p) for p in prompts]
    rows = list(range(len(prompts)))  # input rows still generating
    stream = KVStream(target, len(prompts), target.device)
    while rows:
        limits = [min(k, max_new_tokens - len(run.outputs[r]) - 1) for r in rows]
        records = _one_pass(run, stream, drafter, [sequences[r] for r in rows], limits, clock)
        still = _advance(
            run, sequences, rows, [_eos_cut(r, eos) for r in records], max_new_tokens, eos
        )
        _keep_rows(stream, drafter, [rows.index(r) for r in still])
        rows = still
    return run


def _one_pass(
    run: LoopRun,
    stream: KVStream,
    drafter: Drafter | None,
    sequences: list[list[int]],
    limits: list[int],
    clock: Clock,
) -> list[StepRecord]:
    """Draft, verify and roll back once; time both phases into `run`."""
    proposals, draft_s = _timed(clock, _propose, drafter, sequences, limits)
    own, verify_s = _timed(clock, _verify, stream, sequences, proposals)
    records = [_judge(p, o) for p, o in zip(proposals, own, strict=True)]
    if drafter is not None:
        _, rollback_s = _timed(clock, drafter.accept, [r.accepted for r in records])
        draft_s += rollback_s
    run.draft_seconds.append(draft_s)
    run.verify_seconds.append(verify_s)
    run.proposed_per_pass.append(sum(len(p) for p in proposals))
    return records


def _timed(clock: Clock, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    """Call `fn(*args)` once under the clock; its result and its seconds."""
    box: list[T] = []
    seconds = clock.time(lambda: box.append(fn(*args)))
    return box[0], seconds


def _propose(drafter: Drafter | None, seqs: list[list[int]], limits: list[int]) -> list[list[int]]:
    if drafter is None or max(limits) <= 0:
        return [[] for _ in seqs]
    return drafter.propose(seqs, limits)


def _verify(stream: KVStream, seqs: list[list[int]], proposals: list[list[int]]) -> list[list[int]]:
    """The target's greedy token after each pending token and each proposal, per row."""
    chunks = [s[n:] + p for s, n, p in zip(seqs, stream.lengths, proposals, strict=True)]
    keep = max(len(p) for p in proposals) + 1
    predicted = stream.feed(chunks, logits_to_keep=keep).argmax(dim=-1).tolist()
    own = [row[len(row) - len(p) - 1 :] for row, p in zip(predicted, proposals, strict=True)]
    # Refused proposals leave the cache now; the target's own token is fed next pass.
    stream.drop([len(p) - _judge(p, o).accepted for p, o in zip(proposals, own, strict=True)])
    return own


def _judge(proposed: list[int], own: list[int]) -> StepRecord:
    """Keep the longest prefix the target agrees with, then the target's own token."""
    accepted = 0
    while accepted < len(proposed) and proposed[accepted] == own[accepted]:
        accepted += 1
    return StepRecord(list(proposed), accepted, own[accepted])


def _eos_cut(record: StepRecord, eos: set[int]) -> StepRecord:
    """What follows an accepted end-of-sequence token is never emitted."""
    for index, token in enumerate(record.proposed[: record.accepted]):
        if token in eos:
            return StepRecord(record.proposed, index + 1, None)
    return record


def _advance(
    run: LoopRun,
    sequences: list[list[int]],
    rows: list[int],
    records: list[StepRecord],
    max_new_tokens: int,
    eos: set[int],
) -> list[int]:
    """Append each row's emitted tokens; the rows that go on."""
    still = []
    for row, record in zip(rows, records, strict=True):
        emitted = record.emitted
        run.steps[row].append(record)
        run.outputs[row].extend(emitted)
        sequences[row].extend(emitted)
        ended = record.target_token is None or record.target_token in eos
        if not ended and len(run.outputs[row]) < max_new_tokens:
            still.append(row)
    return still


def _keep_rows(stream: KVStream, drafter: Drafter | None, positions: list[int]) -> None:
    """Drop finished rows (by batch position) from both caches."""
    if len(positions) == stream.batch_size or not positions:
        return
    stream.select(positions)
    if drafter is not None:
        drafter.select(positions)
