"""The speculative-decoding rule in an estimate (no experiment, no draft measured): an
EAGLE-style draft head on the target's own shapes, at the acceptance the user gives or
over a stated default range, served at the user's concurrency and at one user.

A target pass verifies K drafted tokens plus one of its own for every row (a chunk of
K + 1 tokens over each row's cached context, on the step model); with a per-token
acceptance a, a pass emits (1 − a^(K+1)) / (1 − a) tokens on average (the first
rejection ends the run; the target's own token always counts). Each drafted token
costs a pass of the draft: one decoder layer of the target's width and the LM head
(what an EAGLE head reads), on the same rates and per-pass floor. The speedup is the
plain step's time per token over the pass's, and TPOT loses only the decode step's
share of it (the prompt chunks mixed into decode steps are not sped up).
"""

from __future__ import annotations

from profiling.projection.speculation import (
    DRAFT_LENGTHS,
    draft_bytes,
    draft_params,
    speedup,
    tokens_per_pass,
)
from profiling.projection.step_time import StepModel
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import MIN_GAIN, Outcome, ms, your_users
from profiling.units import size

# Acceptance per drafted token assumed where the user gives none: not measured, a range
# wide enough that a gain found at its low end does not rest on a lucky draft.
ASSUMED_ACCEPTANCE = (0.5, 0.8)
KEY = "predictions"


def speculative_estimate(facts: Facts) -> list[Outcome] | None:
    """None where this rule cannot judge (a measured basis, no shapes or rates)."""
    shapes, rates, w = facts.shapes, facts.calibration, facts.workload
    if facts.basis != ESTIMATED or shapes is None or rates is None:
        return None
    if facts.fit is not None and not facts.fit.fits:
        why = (f"set aside while the model does not fit: weights and KV cache need "
               f"{size(facts.fit.required_bytes)} of {size(facts.fit.available_bytes)} usable; "
               "the capacity advice comes first")  # fmt: skip
        return [NotRecommended("speculative", why, "memory.fit")]
    step = StepModel(shapes, rates, facts.dtype, "", facts.gpu_count, facts.gpu)
    rows = max(1, facts.served.max_running if facts.served else w.concurrency)
    rows = min(rows, w.concurrency)
    context = rows * facts.decode_context
    given = facts.spec_acceptance
    low, high = (given, given) if given is not None else ASSUMED_ACCEPTANCE
    middle = (low + high) / 2
    k = max(DRAFT_LENGTHS, key=lambda k: speedup(step, rows, context, middle, k))
    at_low, at_mid, at_high = (speedup(step, rows, context, a, k) for a in (low, middle, high))
    alone = speedup(step, 1, facts.decode_context, middle, k)
    if given is not None:
        what, span = f"your acceptance of {given:.2f}", f"{at_mid:.2f}×"
    else:
        what = f"an acceptance of {low:.1f}–{high:.1f} per drafted token, assumed"
        span = f"{at_low:.2f}–{at_high:.2f}×"
    users = your_users(w.concurrency)
    if at_high < MIN_GAIN:
        why = (f"estimated {span} at {users} with K={k} for {what}: verifying K + 1 tokens "
               "per row costs about what the accepted drafts save at this load")  # fmt: skip
        return [NotRecommended("speculative", why, KEY)]
    if at_low < MIN_GAIN:
        why = (f"estimated {span} at {users} with K={k} for {what}: whether it pays rests on "
               "the acceptance your draft reaches, which only the experiment measures")  # fmt: skip
        return [NotRecommended("speculative", why, KEY)]
    plain = step.seconds(rows, context)
    one = f", {alone:.2f}× at one user" if w.concurrency > 1 else ""
    before = facts.tpot_seconds
    after = before - plain * (1 - 1 / at_mid)
    return [
        Recommendation(
            technique="speculative",
            setting=f"a draft head (EAGLE-style, one layer) with K={k}",
            expected_effect=ExpectedEffect(
                f"decode steps {at_mid:.2f}× faster ({span} for {what}): TPOT {ms(before)} → "
                f"{ms(after)} ms at {users}{one}",
                [Change("tpot_ms", before * 1e3, after * 1e3, "ms")],
            ),
            evidence=[
                Evidence(
                    "#predictions", f"{facts.timing_key}.tpot", f"TPOT {ms(before)} ms at {users}"
                )
            ],  # fmt: skip
            caveats=[
                "estimated: no draft was run; the acceptance decides the gain and only the "
                "speculative experiment measures it on your model and prompts",
                f"{tokens_per_pass(middle, k):.2f} tokens per target pass at acceptance "
                f"{middle:.2f}; each pass verifies {k + 1} tokens per row, and the draft head "
                f"({draft_params(shapes) / 1e9:.2f} B parameters, "
                f"{size(draft_bytes(shapes, facts.dtype))}) runs {k} pass"
                + ("es" if k > 1 else "")
                + " per target pass",
                "the prompt chunks mixed into decode steps are not sped up",
            ],
            basis=ESTIMATED,
            serves="generation",
            gain=before / after,
            confidence=f"estimated: {what}" + ("" if given is not None else ", not measured"),
        )
    ]
