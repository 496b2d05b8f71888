"""How to lay the model over the user's GPUs, from the layout search (`layouts`).

Where the workload fits, the projection serves it as one engine split over
every GPU (TP = the GPU count): the baseline. The search serves every
tp × pp × replicas layout of the same GPUs at the user's workload on the
deployment GPU's datasheet rates, and the rule recommends the pick when it
beats the baseline (more throughput, or the targets met where the baseline
misses them). Where no layout of the user's GPUs meets the TPOT target, it
looks for the fewest GPUs (up to 8× as many) where one does.
"""

from __future__ import annotations

from profiling.parallel import layouts
from profiling.parallel.layouts import Layout
from profiling.projection.calibration import assumed
from profiling.projection.precision import model_format
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import MIN_GAIN, Outcome, ms

KEY = "parallel.layouts"
CAVEAT = (
    "estimated: every layout served by the simulated engine on the datasheet's rates; the "
    "all-reduce and stage-send latencies are assumed"
)


def layout_advice(facts: Facts) -> list[Outcome]:
    gpu, shapes, work = facts.gpu, facts.shapes, facts.workload
    if gpu is None or shapes is None:
        return []
    # The model's own format: 16-bit, or the checkpoint's where it ships quantized.
    dtype = model_format(facts.dtype)
    own = dtype == facts.dtype
    rates = assumed(gpu, dtype, shapes.num_layers)
    count = facts.gpu_count
    kv = facts.kv_dtype if own else ""  # the figures' KV format, with their weights'
    found = layouts.search(shapes, rates, dtype, work, gpu, count, kv, facts.engine)
    pick = layouts.best(found)
    if pick is None:
        return _more_gpus(facts, found, rates, dtype, kv)
    base = next((x for x in found if x.tp == count and x.pp == 1 and x.ep == 1), None)
    if base is None or pick is base:
        if count == 1:
            return []
        why = f"{pick.name} is the best layout of your {_gpus(count)}: {_figures(pick)}"
        others = [x for x in layouts.front(found) if x is not pick]
        if others:
            why += "; the other layouts on the throughput–latency front: " + "; ".join(
                f"{x.name} {_figures(x)}" for x in others
            )
        return [NotRecommended("parallel", why, KEY)]
    assert base.served is not None and pick.served is not None
    met = pick.meets is True and base.meets is False
    gain = pick.throughput / base.throughput
    if met:  # meeting the targets is worth its TPOT gain when that is the larger
        gain = max(gain, base.served.tpot.p50 / pick.served.tpot.p50)
    if gain < MIN_GAIN and not met:
        why = (f"{pick.name}: {_figures(pick)}, against one TP={count} engine's "
               f"{_figures(base)}: within {MIN_GAIN:.2f}×")  # fmt: skip
        return [NotRecommended("parallel", why, KEY)]
    reason = "meets your targets where one split engine does not" if met else "more throughput"
    return [Recommendation(
        technique="parallel",
        setting=f"serve {count}× {gpu.label} as {pick.name}, not one TP={count} engine",
        expected_effect=ExpectedEffect(
            f"{reason}: {_tok_s(base.throughput)} → {_tok_s(pick.throughput)} tok/s in all, "
            f"TPOT {ms(base.served.tpot.p50)} → {ms(pick.served.tpot.p50)} ms at your "
            f"{work.concurrency} users",
            [Change("tokens_per_second", base.throughput, pick.throughput, "tokens/s"),
             Change("tpot_ms", base.served.tpot.p50 * 1e3, pick.served.tpot.p50 * 1e3, "ms")]),
        evidence=[Evidence("#memory", "memory.fit", f"{pick.name} fits {count}× {gpu.key}")],
        caveats=[CAVEAT, *(["needs a load balancer in front; each replica holds the whole "
                            "model"] if pick.replicas > 1 else []), *pick.notes],
        basis=ESTIMATED,
        serves="generation",
        gain=gain,
        confidence="estimated: every layout simulated on the datasheet",
    )]  # fmt: skip


def _more_gpus(facts: Facts, found: list[Layout], rates, dtype: str, kv: str = "") -> list[Outcome]:
    gpu, work, count = facts.gpu, facts.workload, facts.gpu_count
    assert gpu is not None and facts.shapes is not None
    if not any(x.fits for x in found):
        return []  # nothing fits: the capacity rule speaks
    for more in (2 * count, 4 * count, 8 * count):
        if more > 64:
            break
        pick = layouts.best(
            layouts.search(facts.shapes, rates, dtype, work, gpu, more, kv, facts.engine)
        )
        if pick is None or pick.served is None:
            continue
        before = facts.tpot_seconds
        # Where some configuration of the user's GPUs meets the targets (another precision,
        # speculation, caching), more GPUs are only the separate "with more hardware" line.
        extra = facts.meets_on_your_gpus is True
        setting = f"{pick.name} on {more}× {gpu.label}"
        alone = (f"which no configuration of your {_gpus(count)} does (every layout, weight "
                 "and KV-cache precision, speculation where an acceptance is known and "
                 "prefix caching where prompts share one, searched)"
                 if facts.meets_on_your_gpus is False
                 else f"which no layout of your {_gpus(count)} does in {dtype}")  # fmt: skip
        return [Recommendation(
            technique="parallel",
            setting=f"with more hardware: {setting}" if extra else setting,
            expected_effect=ExpectedEffect(
                f"meets your targets: TPOT {ms(before)} → {ms(pick.served.tpot.p50)} ms "
                f"(p90 {ms(pick.served.tpot.p90)} ms)"
                + ("; a configuration of the GPUs you have meets them too (see above)"
                   if extra else f", {alone}"),
                [Change("devices", count, more, "GPUs"),
                 Change("tpot_ms", before * 1e3, pick.served.tpot.p50 * 1e3, "ms")]),
            evidence=[Evidence("#verdict", f"{facts.timing_key}.tpot",
                               f"TPOT {ms(before)} ms on {count}× {gpu.key}")],
            caveats=[CAVEAT, f"{more}× the GPUs instead of {count}"],
            basis=ESTIMATED,
            serves="generation",
            gain=before / pick.served.tpot.p50,
            confidence="estimated: every layout simulated on the datasheet",
            meets_targets=True,
            more_hardware=True,
        )]  # fmt: skip
    why = (f"no layout of up to {_gpus(8 * count)} meets your targets at {work.concurrency} "
           "users")  # fmt: skip
    return [NotRecommended("parallel", why, KEY)]


def _figures(x: Layout) -> str:
    assert x.served is not None
    return (f"{_tok_s(x.throughput)} tok/s, TPOT p50 {ms(x.served.tpot.p50)} ms, "
            f"TTFT p90 {ms(x.served.ttft.p90)} ms")  # fmt: skip


def _tok_s(value: float) -> str:
    return f"{value:,.0f}"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
