"""What one target pass over K+1 tokens costs against one over a single token.

Every pass runs on the baseline's decode path (`profiling.measure.decode_path`:
a static cache, compiled where the baseline compiles, with its compiled forward
reused), so the one-token step here is the baseline's decode step at the same
batch and context, measured the same way: warmed up, rolled back to the context
before each sample outside the timing, synchronised by the device's clock. A
page that shows both shows one figure for one shape.

The batch's prompts are cycled to the longest one's length, so every row holds
that many real tokens, as in the baseline's decode (token values do not change
a dense model's cost). The speculative loop itself (`loop`, `stream`) runs on a
dynamic cache that rolls back row by row; its set runs are timed end to end and
compared only with each other, as the page says (`report.timing_note`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from profiling.measure import decode_path
from profiling.measure.timing import Clock
from profiling.results import Samples
from profiling.speculative.results import VerifyCostPoint


@dataclass
class Pass:
    """A prepared pass: the timed call, its untimed roll-back, and the path it runs on."""

    run: Callable[[], Any]
    setup: Callable[[], Any]
    path: str
    reason: str


def rectangle(batch: list[list[int]], width: int) -> torch.Tensor:
    """[rows, longest prompt + width] ids: each prompt cycled to that length."""
    length = max(len(p) for p in batch) + width
    rows = [(p * (length // len(p) + 1))[:length] for p in batch]
    return torch.tensor(rows, dtype=torch.long)


def prepare_pass(
    model: torch.nn.Module,
    ids: torch.Tensor,
    context: int,
    width: int,
    *,
    asked: str = "auto",
    compiled: dict[str, Any] | None = None,
) -> Pass:
    """`model` over `ids[:, :context]`, then a step over the next `width` tokens, on the
    decode path `asked` resolves to on the model's device."""
    device = str(model.device)
    ids = ids.to(device)
    step_ids = ids[:, context : context + width]
    compiled = {} if compiled is None else compiled
    prepared = decode_path.prepare(model, ids[:, :context], step_ids, asked, device, compiled)
    run, setup = decode_path.rolled_back(prepared.step, prepared.cache)
    return Pass(run, setup, prepared.path, prepared.reason)


@torch.inference_mode()
def verify_cost_curve(
    target: torch.nn.Module,
    draft: torch.nn.Module | None,
    batch: list[list[int]],
    ks: list[int],
    *,
    clock: Clock,
    repeats: int,
    asked: str = "auto",
    compiled: dict[str, Any] | None = None,
) -> list[VerifyCostPoint]:
    """One target pass over K+1 tokens vs one over a single token, after the batch's prompts.

    For each K the passes are timed in turn, repeat by repeat, so load drifting
    over time hits all of them alike. With a draft model its one-token step is
    timed too (on its own compiled forward): drafting K tokens costs K of them.
    `compiled` is the target's compiled forward, shared with the baseline.
    """
    context = max(len(p) for p in batch)
    ids = rectangle(batch, max(ks, default=0) + 1)
    one = prepare_pass(target, ids, context, 1, asked=asked, compiled=compiled)
    drafted = None
    if draft is not None:
        drafted = prepare_pass(draft, ids, context, 1, asked=asked, compiled={})
    points = []
    for k in ks:
        verify = prepare_pass(target, ids, context, k + 1, asked=asked, compiled=compiled)
        passes = [one, verify] + ([drafted] if drafted is not None else [])
        one_s, verify_s, *draft_s = interleaved(clock, passes, repeats)
        ratio = median_ratio(verify_s, one_s)
        with_draft = None
        if draft_s:
            with_draft = (k + 1) / (ratio + k * median_ratio(draft_s[0], one_s))
        points.append(
            VerifyCostPoint(
                k=k,
                batch_size=len(batch),
                context_tokens=context,
                one_token_seconds=one_s,
                verify_seconds=verify_s,
                cost_ratio=ratio,
                speedup_bound=(k + 1) / ratio,
                draft_token_seconds=draft_s[0] if draft_s else None,
                speedup_bound_with_draft=with_draft,
                path=one.path,
                path_reason=_reason(one, verify),
            )
        )
        del verify  # its cache goes before the next K's is filled
    return points


def _reason(one: Pass, verify: Pass) -> str:
    if verify.path == one.path:
        return one.reason
    return f"{one.reason}; the K+1 pass ran {verify.path}: {verify.reason}".lstrip("; ")


def interleaved(clock: Clock, passes: list[Pass], repeats: int) -> list[Samples]:
    """Warm each pass up once, then time them in turn `repeats` times, each rolled
    back to the context before its sample, outside the timing."""
    for one in passes:
        one.setup()
        one.run()
    seconds: list[list[float]] = [[] for _ in passes]
    for _ in range(repeats):
        for kept, one in zip(seconds, passes, strict=True):
            one.setup()
            kept.append(clock.time(one.run))
    return [Samples(s) for s in seconds]


def median_ratio(numerator: Samples, denominator: Samples) -> float:
    """Median of the sample-by-sample ratios of two interleaved measurements."""
    pairs = zip(numerator.samples, denominator.samples, strict=True)
    return Samples([a / b for a, b in pairs]).median
