"""Does speculation keep the target's greedy text, with numerics in mind?

Greedy speculation must emit exactly the tokens the target would. In float32
on a CPU it does, bit for bit, so any difference is real. In bf16/fp16 on a
GPU it need not: the verify pass scores K+1 positions in one forward, with a
different reduction order than K+1 single-token steps, and where the target's
two best tokens are within rounding of each other the argmax can flip. Such a
flip is numerics, not a wrong verification.

So the outputs are compared row by row: the agreement (tokens before each
row's first difference, over all tokens) and the first divergent position.
Where they differ, the divergent row is scored once more, teacher-forced over
the prompt and the tokens both agree on: if the two candidate tokens' logits
are within the dtype's tolerance of each other (the same tolerance the prefix
cache check uses), the divergence is "numerics"; otherwise it is "real" and
the report says so as a finding. float32 keeps the strict check: any
difference is "real".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from profiling.measure.numerics import is_strict, logit_tolerance


@dataclass
class Exactness:
    agreement: float  # tokens before each row's first difference / all tokens
    first_divergence: int | None  # the earliest position that differs in any row
    divergence: str  # "" (identical), "numerics" or "real"
    logit_gap: float | None = None  # |logit(base token) - logit(spec token)| where it split
    tolerance: float | None = None  # the gap allowed at that position


def compare(
    target: Any, prompts: list[list[int]], base: list[list[int]], spec: list[list[int]]
) -> Exactness:
    """`prompts[i]` produced `base[i]` greedily and `spec[i]` speculatively."""
    total = sum(len(b) for b in base) or 1
    agreed, first, row_at = 0, None, None
    for row, (b, s) in enumerate(zip(base, spec, strict=True)):
        split = next((i for i, (x, y) in enumerate(zip(b, s, strict=False)) if x != y), None)
        if split is None and len(b) != len(s):
            split = min(len(b), len(s))  # one stopped (EOS) where the other went on
        agreed += len(b) if split is None else split
        if split is not None and (first is None or split < first):
            first, row_at = split, row
    if first is None or row_at is None:
        return Exactness(1.0, None, "")
    agreement = agreed / total
    dtype = str(next(target.parameters()).dtype).removeprefix("torch.")
    b, s = base[row_at], spec[row_at]
    if is_strict(dtype) or first >= min(len(b), len(s)):
        return Exactness(agreement, first, "real")
    gap, scale = _gap(target, prompts[row_at] + b[:first], b[first], s[first])
    tolerance = logit_tolerance(dtype, scale)
    kind = "numerics" if gap <= tolerance else "real"
    return Exactness(agreement, first, kind, round(gap, 6), round(tolerance, 6))


def _gap(target: Any, ids: list[int], a: int, b: int) -> tuple[float, float]:
    """(|logit a - logit b|, largest |logit|) at the next position after `ids`."""
    device = next(target.parameters()).device
    with torch.inference_mode():
        logits = target(input_ids=torch.tensor([ids], device=device), logits_to_keep=1).logits
    row = logits[0, -1].float()
    return float((row[a] - row[b]).abs()), float(row.abs().max())
