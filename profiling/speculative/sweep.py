"""Timed runs of the loop over a prompt set, and what they add up to.

A "set run" decodes every prompt once, in batches of `batch_size` (the last
batch is filled by cycling the set, so every batch is full). One timed
sample is one set run. Counts are the same in every run (greedy decoding is
deterministic); phase costs and end-to-end time are sampled per run.

On a CPU, whatever is compared is timed interleaved, sample by sample (the
target alone, then with speculation; one token, then K+1): on a shared machine
load drifts over minutes, and pairing cancels most of it. The sweep times a
batch size's every draft and K in rounds after one run of the target alone,
which pairs with all of them (`round_robin`). On a GPU (a device
of its own) the target alone is timed once per batch size and reused for every
draft and K, which halves the sweep (`Timings`); its interval is then
resampled unpaired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from profiling.measure.timing import Clock
from profiling.results import Samples
from profiling.speculative.drafting import Drafter
from profiling.speculative.exactness import Exactness, compare
from profiling.speculative.loop import LoopRun, StepRecord, speculative_generate
from profiling.speculative.results import SweepPoint, TraceStep

DrafterFactory = Callable[[int], Drafter]  # batch size -> a fresh drafter
# Token ids for models without a tokenizer: about four characters per token.
CHARS_PER_TOKEN = 4


def encode_prompts(tokenizer: Any | None, prompts: list[str], vocab_size: int) -> list[list[int]]:
    """Token ids per prompt; seeded random ids of a similar length without a tokenizer."""
    if tokenizer is not None:
        return [list(tokenizer(p)["input_ids"]) for p in prompts]
    generator = torch.Generator().manual_seed(0)
    lengths = [max(4, len(p) // CHARS_PER_TOKEN) for p in prompts]
    return [torch.randint(0, vocab_size, (n,), generator=generator).tolist() for n in lengths]


def batches_of(prompts: list[list[int]], batch_size: int) -> list[list[list[int]]]:
    """Every prompt once, in full batches; the last is filled from the start of the set."""
    count = -(-len(prompts) // batch_size)
    return [
        [prompts[(b * batch_size + i) % len(prompts)] for i in range(batch_size)]
        for b in range(count)
    ]


@dataclass
class SetRun:
    """One decode of the whole prompt set: a loop run per batch."""

    runs: list[LoopRun]

    @property
    def outputs(self) -> list[list[int]]:
        return [out for run in self.runs for out in run.outputs]

    @property
    def records(self) -> list[StepRecord]:
        return [rec for run in self.runs for steps in run.steps for rec in steps]

    def draft_seconds_per_token(self) -> float | None:
        """Draft time per proposed token over the passes after the prefilling first."""
        seconds = sum(sum(r.draft_seconds[1:]) for r in self.runs)
        tokens = sum(sum(r.proposed_per_pass[1:]) for r in self.runs)
        return seconds / tokens if tokens else None

    def verify_seconds_per_pass(self) -> float | None:
        passes = sum(len(r.verify_seconds) - 1 for r in self.runs)
        seconds = sum(sum(r.verify_seconds[1:]) for r in self.runs)
        return seconds / passes if passes else None


@dataclass
class Timed:
    seconds: Samples
    runs: list[SetRun]  # the timed runs (warm-up runs left out)


@dataclass
class SetDecoder:
    """Decodes the whole prompt set once per call, with or without a drafter."""

    target: torch.nn.Module
    batches: list[list[list[int]]]
    max_new_tokens: int
    eos_token_ids: list[int]
    clock: Clock

    def run(self, factory: DrafterFactory | None, k: int) -> SetRun:
        return self._run(factory, k, self.batches)

    def warm(self, factory: DrafterFactory | None, k: int) -> None:
        """A warm-up: the set's first batch decoded the same way, untimed. It runs every
        step of the loop (draft, verify, roll back, rows leaving) at this batch size;
        the rest of the set would repeat those steps over other prompts."""
        self._run(factory, k, self.batches[:1])

    def _run(
        self, factory: DrafterFactory | None, k: int, batches: list[list[list[int]]]
    ) -> SetRun:
        loops = [
            speculative_generate(
                self.target,
                batch,
                self.max_new_tokens,
                drafter=factory(len(batch)) if factory else None,
                k=k,
                eos_token_ids=self.eos_token_ids,
                clock=self.clock,
            )
            for batch in batches
        ]
        return SetRun(loops)


def paired_set_runs(
    decoder: SetDecoder, factory: DrafterFactory, k: int, *, warmup: int, repeats: int
) -> tuple[Timed, Timed]:
    """(speculative, baseline) timings, interleaved sample by sample.

    Each repeat times the target alone, then the speculative loop, so load
    from other processes that drifts over minutes hits both alike and their
    ratio stays honest on a shared machine.
    """
    for _ in range(warmup):
        decoder.warm(None, 0)
        decoder.warm(factory, k)
    spec: list[SetRun] = []
    base: list[SetRun] = []
    base_s, spec_s = [], []
    for _ in range(repeats):
        base_s.append(decoder.clock.time(lambda: base.append(decoder.run(None, 0))))
        spec_s.append(decoder.clock.time(lambda: spec.append(decoder.run(factory, k))))
    return Timed(Samples(spec_s), spec), Timed(Samples(base_s), base)


def set_runs(
    decoder: SetDecoder, factory: DrafterFactory | None, k: int, *, warmup: int, repeats: int
) -> Timed:
    """One side alone: the target (`factory` None) or the speculative loop."""
    for _ in range(warmup):
        decoder.warm(factory, k)
    runs: list[SetRun] = []
    seconds = [
        decoder.clock.time(lambda: runs.append(decoder.run(factory, k))) for _ in range(repeats)
    ]
    return Timed(Samples(seconds), runs)


def round_robin(
    decoder: SetDecoder,
    configs: list[tuple[DrafterFactory, int]],
    *,
    warmup: int,
    repeats: int,
    tick: Callable[[str], None] | None = None,
) -> tuple[list[Timed], Timed]:
    """(speculative per config, baseline): every draft and K of one batch size timed in
    rounds, each round the target alone first, then each config once.

    The i-th sample of every config is paired with the i-th of the target alone,
    taken in the same round (seconds apart, where load drifts over minutes), so
    the target's own runs are shared by every point of the batch size instead of
    being repeated beside each one. Every config is warmed up, as is the target.
    `tick` is called once per config, spread over the rounds.
    """
    rounds = warmup + repeats
    ticks = _spread(len(configs), rounds * len(configs), tick)
    for number in range(1, warmup + 1):
        decoder.warm(None, 0)
        for factory, k in configs:
            decoder.warm(factory, k)
            ticks(f"warm-up round {number} of {rounds}")
    base: list[SetRun] = []
    spec: list[list[SetRun]] = [[] for _ in configs]
    base_s: list[float] = []
    spec_s: list[list[float]] = [[] for _ in configs]
    for number in range(warmup + 1, rounds + 1):
        base_s.append(decoder.clock.time(lambda: base.append(decoder.run(None, 0))))
        for (factory, k), runs, seconds in zip(configs, spec, spec_s, strict=True):
            seconds.append(
                decoder.clock.time(lambda f=factory, k=k, r=runs: r.append(decoder.run(f, k)))
            )
            ticks(f"timed round {number} of {rounds}")
    timed = [Timed(Samples(s), r) for s, r in zip(spec_s, spec, strict=True)]
    return timed, Timed(Samples(base_s), base)


def _spread(count: int, calls: int, tick: Callable[[str], None] | None) -> Callable[[str], None]:
    """A callback for `calls` calls that passes `count` of them on to `tick`, evenly."""
    made = [0]

    def call(message: str) -> None:
        made[0] += 1
        if tick is not None and made[0] * count // calls > (made[0] - 1) * count // calls:
            tick(message)

    return call


@dataclass
class Timings:
    """How speculation is timed against the target alone: interleaved pairs, or the
    target's own timing once per batch size, reused for every draft and K."""

    paired: bool
    warmup: int
    repeats: int
    baselines: dict[int, Timed] = field(default_factory=dict)  # by batch size

    def time_all(
        self,
        decoder: SetDecoder,
        configs: list[tuple[DrafterFactory, int]],
        tick: Callable[[str], None],
    ) -> tuple[list[Timed], Timed]:
        """(speculative per config, baseline) for every draft and K of one batch size:
        paired in rounds (`round_robin`), or each config after the target's own timing.
        `tick` is called once per config."""
        if self.paired:
            return round_robin(
                decoder, configs, warmup=self.warmup, repeats=self.repeats, tick=tick
            )
        timed = []
        for factory, k in configs:
            timed.append(self.time(decoder, factory, k)[0])
            tick(f"K={k} timed")
        return timed, self.baselines[len(decoder.batches[0])]

    def time(self, decoder: SetDecoder, factory: DrafterFactory, k: int) -> tuple[Timed, Timed]:
        """(speculative, baseline) for one draft and K."""
        if self.paired:
            return paired_set_runs(decoder, factory, k, warmup=self.warmup, repeats=self.repeats)
        batch = len(decoder.batches[0])
        if batch not in self.baselines:
            self.baselines[batch] = set_runs(
                decoder, None, 0, warmup=self.warmup, repeats=self.repeats
            )
        spec = set_runs(decoder, factory, k, warmup=self.warmup, repeats=self.repeats)
        return spec, self.baselines[batch]


def sweep_point(
    draft: str,
    k: int,
    batch_size: int,
    timed: Timed,
    baseline: Timed,
    decoder: SetDecoder | None = None,
    paired: bool = True,
) -> SweepPoint:
    """Counts from the loop's records, costs from the timed samples; with `decoder`,
    outputs that differ from the baseline's are judged (`exactness.compare`)."""
    run = timed.runs[-1]
    base_outputs = baseline.runs[-1].outputs
    exact = Exactness(1.0, None, "")
    if run.outputs != base_outputs:
        exact = Exactness(0.0, None, "real")
        if decoder is not None:
            prompts = [p for batch in decoder.batches for p in batch]
            exact = compare(decoder.target, prompts, base_outputs, run.outputs)
    records = run.records
    proposed = sum(len(r.proposed) for r in records)
    accepted = sum(r.accepted for r in records)
    generated = sum(len(out) for out in run.outputs)
    base_generated = sum(len(out) for out in baseline.runs[-1].outputs)
    return SweepPoint(
        draft=draft,
        k=k,
        batch_size=batch_size,
        prompts=len(run.outputs),
        generated_tokens=generated,
        proposed_tokens=proposed,
        accepted_tokens=accepted,
        corrections=sum(r.correction for r in records),
        bonus_tokens=sum(r.bonus for r in records),
        target_passes=sum(r.target_passes for r in run.runs),
        sequence_passes=len(records),
        acceptance_rate=accepted / proposed if proposed else 0.0,
        mean_accepted_length=1 + accepted / len(records),
        acceptance_by_position=[
            sum(r.accepted > i for r in records) / len(records) for i in range(k)
        ],
        seconds=timed.seconds,
        baseline_seconds=baseline.seconds,
        tokens_per_second=generated / timed.seconds.median,
        baseline_tokens_per_second=base_generated / baseline.seconds.median,
        # The ratio of the medians behind the tok/s figures beside it (the pairs'
        # interleaving is kept for the speedup's interval, `advice.speedup_interval`).
        speedup=baseline.seconds.median / timed.seconds.median,
        draft_seconds_per_token=_samples(r.draft_seconds_per_token() for r in timed.runs),
        verify_seconds_per_pass=_samples(r.verify_seconds_per_pass() for r in timed.runs),
        matches_baseline=run.outputs == base_outputs,
        paired=paired,
        agreement=exact.agreement,
        first_divergence=exact.first_divergence,
        divergence=exact.divergence,
        logit_gap=exact.logit_gap,
    )


def _samples(values: Any) -> Samples | None:
    kept = [v for v in values if v is not None]
    return Samples(kept) if kept else None


def trace_steps(records: list[StepRecord], tokenizer: Any | None) -> list[TraceStep]:
    """The sample prompt's passes, with each token decoded on its own."""

    def text(token: int | None) -> str:
        if tokenizer is None or token is None:
            return ""
        return tokenizer.decode([token])

    return [
        TraceStep(
            proposed=list(r.proposed),
            proposed_text=[text(t) for t in r.proposed],
            accepted_count=r.accepted,
            target_token=r.target_token,
            target_text=text(r.target_token),
            bonus=r.bonus,
            first_rejected=r.proposed[r.accepted] if r.accepted < len(r.proposed) else None,
        )
        for r in records
    ]
