"""The quantization rule where the experiment did not run, on a catalog GPU: every
serving precision the device runs (`profiling.projection.precision`) served at the user's
workload and at one user by the simulated engine, against the 16-bit baseline.

The recommendation is the format that does most for the goal (the requests that
fit for memory and devices, TPOT for generation), the higher-quality format
winning a near tie; the others are listed with their figures, and formats the
device lacks (fp8 before Hopper and Ada) are said to be unavailable.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Projection, Traffic, project
from profiling.projection.precision import PRECISIONS, Precision, already_quantized
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import MIN_GAIN, Outcome, capacity_changes, capacity_gain, ms
from profiling.units import size

CANDIDATES = ("fp8", "w8a8-int8", "int8-weight-only", "int4-weight-only")  # best quality first
NEAR_TIE = 0.03  # a lower-quality format must beat a higher one by more than this


@dataclass
class Option:
    form: Precision
    served: Projection  # at the user's workload
    alone: Projection  # one user
    gain: float = 0.0


def precision_estimate(facts: Facts, goal: str) -> list[Outcome] | None:
    """None where this rule cannot judge (no catalog GPU, no shapes, a measured basis)."""
    gpu, shapes, w = facts.gpu, facts.shapes, facts.workload
    if facts.basis != ESTIMATED or gpu is None or shapes is None:
        return None
    if already_quantized(shapes, facts.dtype):
        return []  # already quantized (a checkpoint shipped quantized included)
    count, layers = facts.gpu_count, shapes.num_layers

    def serve(key: str, users: int) -> Projection:
        traffic = Traffic(w.prompt_tokens, w.output_tokens, users, w.ttft_ms, w.tpot_ms)
        deployment = Deployment(gpu, count, engine=facts.engine_limits())
        return project(shapes, assumed(gpu, key, layers), key, traffic, deployment)

    base_alone = serve(facts.dtype, 1)
    serves = "memory" if goal in ("memory", "devices") else "generation"
    options, missing = [], []
    for key in CANDIDATES:
        form = PRECISIONS[key]
        if not form.peak(gpu):
            missing.append(form.label)
            continue
        option = Option(form, serve(key, w.concurrency), serve(key, 1))
        if serves == "memory":
            option.gain = capacity_gain(facts, option.served.weights_bytes)
        else:
            option.gain = facts.tpot_seconds / option.served.tpot_seconds
        options.append(option)
    if not options:
        return []
    pick = options[0]
    for option in options[1:]:
        if option.gain > pick.gain * (1 + NEAR_TIE):
            pick = option
    unavailable = f"{', '.join(missing)}: not on {gpu.label}" if missing else ""
    if pick.gain < MIN_GAIN:
        why = (f"no format changes what the goal needs (estimated): {_others(options, None)}"
               + (f"; {unavailable}" if unavailable else ""))  # fmt: skip
        return [NotRecommended("quantization", why, "memory.weights_bytes")]
    return [_recommend(facts, pick, base_alone, options, unavailable, serves)]


def _recommend(
    facts: Facts,
    pick: Option,
    base_alone: Projection,
    options: list[Option],
    unavailable: str,
    serves: str,
) -> Recommendation:
    after, one = pick.served, pick.alone
    tpot = facts.tpot_seconds
    users = facts.workload.concurrency
    changes = [Change("weights_bytes", facts.weights_bytes, after.weights_bytes, "bytes"),
               Change("tpot_ms", tpot * 1e3, after.tpot_seconds * 1e3, "ms")]  # fmt: skip
    changes += capacity_changes(facts, after.weights_bytes)
    text = (
        f"weights {size(facts.weights_bytes)} → {size(after.weights_bytes)}; TPOT {ms(tpot)} → "
        f"{ms(after.tpot_seconds)} ms at your {users} user{'s' if users != 1 else ''} "
        f"({tpot / after.tpot_seconds:.2f}×), {base_alone.tpot_seconds / one.tpot_seconds:.2f}× "
        "at one user"
    )
    caveats = [
        f"estimated: the quantization experiment did not run, so quality was not measured "
        f"({pick.form.quality}); run it to see top-1 agreement and perplexity on your model",
        f"embeddings and LM head kept in 16 bits; {pick.form.label} served with an engine's "
        "kernels for it",
    ]
    others = _others(options, pick)
    if others:
        caveats.append(f"the other formats at your workload: {others}")
    if unavailable:
        caveats.append(unavailable)
    return Recommendation(
        technique="quantization",
        setting=pick.form.label,
        expected_effect=ExpectedEffect(text, changes),
        evidence=[Evidence("#memory", "memory.weights_bytes",
                           f"weights {size(facts.weights_bytes)} in {facts.dtype}")],
        caveats=caveats,
        basis=ESTIMATED,
        serves=serves,
        gain=pick.gain,
    )  # fmt: skip


def _others(options: list[Option], pick: Option | None) -> str:
    return "; ".join(
        f"{o.form.label} {size(o.served.weights_bytes)}, TPOT {ms(o.served.tpot_seconds)} ms"
        + ("" if o.served.fits is not False else " (does not fit)")
        for o in options
        if o is not pick
    )
