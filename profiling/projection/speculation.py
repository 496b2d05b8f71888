"""Speculative decoding on the step model: an EAGLE-style draft head on the target's own
shapes, its passes and the target's verify pass over K + 1 tokens per row.

No torch import. With a per-token acceptance a, a target pass emits
(1 − a^(K+1)) / (1 − a) tokens on average (the first rejection ends the run; the
target's own token always counts). Each drafted token costs a pass of the draft: one
decoder layer of the target's width and the LM head (what an EAGLE head reads), on
the same rates and per-pass floor. `Speculating` serves it in the simulated engine:
a step's decode rows cost the verify pass and the K draft passes over the tokens a
pass emits, so each simulated step stands for the mean token of a pass (TPOT is the
mean; the bursts within a pass are not modelled), and a prompt chunk in the step
costs what it adds to the verify pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.model.shapes import DTYPE_BYTES, Shapes
from profiling.projection.precision import dequant, weights_format
from profiling.projection.step_time import StepModel, allreduce_seconds

DRAFT_LENGTHS = (1, 2, 3, 4, 5)


def tokens_per_pass(acceptance: float, k: int) -> float:
    """Expected tokens a pass emits: the accepted run of K drafts, plus the target's own."""
    if acceptance >= 1.0:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


def draft_params(shapes: Shapes) -> int:
    """An EAGLE-style draft head: one dense decoder layer of the target's width and the
    target's LM head."""
    layer = shapes.attention_params + 3 * shapes.hidden_size * shapes.intermediate_size
    return layer + shapes.head_params


def draft_bytes(shapes: Shapes, dtype: str) -> float:
    """The draft head's weights in the target's weight format."""
    return draft_params(shapes) * DTYPE_BYTES.get(weights_format(dtype), 2)


def draft_seconds(step: StepModel, rows: int, context: float) -> float:
    """One draft pass over `rows` rows: the head's weights once, one layer's KV per row."""
    s = step.shapes
    kv = step.kv_token / max(1, s.num_layers) * context
    n = step.devices
    flops = 2.0 * draft_params(s) * rows
    return step.rates.decode.seconds(flops / n, (draft_bytes(s, step.dtype) + kv) / n)


def speedup(step: StepModel, rows: int, context: float, acceptance: float, k: int) -> float:
    """Plain decode's time per token over speculation's, at `rows` rows holding `context`
    tokens in all."""
    plain = step.seconds(rows, context)
    spent = verify_seconds(step, rows, k + 1, round(context / rows))
    spent += k * draft_seconds(step, rows, context)
    return tokens_per_pass(acceptance, k) * plain / spent


@dataclass(frozen=True)
class Speculating:
    """The step model of a tensor-parallel engine serving with a draft head of `k` tokens
    at `acceptance` per drafted token (see the module's docstring)."""

    step: StepModel
    acceptance: float
    k: int

    @property
    def gpu(self) -> GPU | None:
        return self.step.gpu

    @property
    def tokens_per_pass(self) -> float:
        return tokens_per_pass(self.acceptance, self.k)

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        if not rows:
            return self.step.seconds(0, 0, chunks)
        per_row = round(context / rows)
        drafts = self.k * draft_seconds(self.step, rows, context)
        alone = verify_seconds(self.step, rows, self.k + 1, per_row) + drafts
        if not chunks:
            return alone / self.tokens_per_pass
        extra = verify_seconds(self.step, rows, self.k + 1, per_row, chunks) + drafts - alone
        return alone / self.tokens_per_pass + max(0.0, extra)


def verify_seconds(
    step: StepModel, rows: int, tokens: int, offset: int, chunks: tuple[tuple[int, int], ...] = ()
) -> float:
    """`step.seconds(0, 0, verify + chunks)` where `verify` is `rows` equal chunks of
    `tokens` after `offset` cached: its work summed once instead of chunk by chunk (the
    simulated engine asks for it every step, with hundreds of rows). Mirrors
    `StepModel.work`; a test holds the two equal."""
    s = step.shapes
    prompt = sum(t for t, _ in chunks)
    flops = rows * s.chunk_flops(tokens, offset) + sum(s.chunk_flops(t, o) for t, o in chunks)
    kv_moved = rows * (offset + tokens) + sum(o + t for t, o in chunks)
    weights = s.weights_read(weights_format(step.dtype), rows * tokens + prompt)
    bytes_ = weights * (1 + dequant(step.dtype)) + step.kv_token * kv_moved
    n = step.devices
    seconds = step.time_of(flops / n, bytes_ / n, True, 0)  # as step.seconds(0, 0, …)
    return seconds + allreduce_seconds(s, rows * tokens + prompt, n, step.gpu)


def best_draft_length(step: StepModel, rows: int, context: float, acceptance: float) -> int:
    """The draft length of `DRAFT_LENGTHS` that decodes fastest at `rows` rows."""
    return max(DRAFT_LENGTHS, key=lambda k: speedup(step, rows, context, acceptance, k))
