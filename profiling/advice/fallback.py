"""Estimates standing in for experiments that did not run (every entry marked "estimated").

Quantization: int8 weights from the model's bytes, decode time from the
calibrated (or datasheet) bytes rate. Caching: the prefill of the prompt
after the workload's shared prefix. Parallel: the fewest tensor-parallel
devices whose share of weights and KV cache fits. Disaggregation: a prefill
joining a decode step adds its whole time to that step. Speculative decoding
has no estimate: its gain rests on acceptance, which only a run measures.
"""

from __future__ import annotations

from profiling.advice.facts import Facts
from profiling.advice.text import gb, ms
from profiling.advice_results import (
    ESTIMATED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    Recommendation,
)
from profiling.memory import RESERVE_FIXED_BYTES, RESERVE_SHARE
from profiling.shapes import DTYPE_BYTES

MAKES_IT_FIT = 10.0
TP_SIZES = (1, 2, 4, 8)
Outcome = Recommendation | NotRecommended


def capacity_gain(facts: Facts, weights_after: int) -> float:
    """Factor by which the requests that fit grow with smaller weights (MAKES_IT_FIT when
    the workload fits only after); the weights ratio when no GPU memory is known."""
    fit, after = facts.fit, facts.fit_with_weights(weights_after)
    if fit is None or after is None:
        return facts.weights_bytes / max(1, weights_after)
    if not after.fits:
        return 1.0
    if not fit.fits:
        return MAKES_IT_FIT
    return min(MAKES_IT_FIT, after.max_concurrency / max(1, fit.max_concurrency))


def capacity_changes(facts: Facts, weights_after: int) -> list[Change]:
    fit, after = facts.fit, facts.fit_with_weights(weights_after)
    if fit is None or after is None:
        return []
    return [
        Change("max_concurrency", fit.max_concurrency, after.max_concurrency, "requests"),
        Change("memory_headroom_bytes", fit.headroom_bytes, after.headroom_bytes, "bytes"),
    ]


def decode_seconds_with_weights(facts: Facts, weights_after: int) -> float:
    """The TPOT again with fewer weight bytes read per step (the calibrated bytes rate)."""
    shapes, calibration = facts.shapes, facts.calibration
    batch, context = facts.workload.concurrency, facts.decode_context
    if shapes is None or calibration is None:
        kv = facts.kv_bytes_per_token * batch * context
        return facts.tpot_seconds * (weights_after + kv) / (facts.weights_bytes + kv)
    flops = shapes.decode_flops(batch, context)
    moved = shapes.decode_bytes(facts.dtype, batch, context)
    before = calibration.decode.seconds(flops, moved)
    after = calibration.decode.seconds(flops, moved - (facts.weights_bytes - weights_after))
    return facts.tpot_seconds * after / before


def quantization(facts: Facts, goal: str) -> list[Outcome]:
    per_param = DTYPE_BYTES.get(facts.dtype, 2)
    if per_param <= 1:
        return []
    after = int(facts.weights_bytes / per_param)
    tpot_after = decode_seconds_with_weights(facts, after)
    serves = "memory" if goal in ("memory", "devices") else "generation"
    gain = capacity_gain(facts, after) if serves == "memory" else facts.tpot_seconds / tpot_after
    if gain < 1.05:
        why = f"int8 weights ({gb(after)}) would not change what the goal needs (estimated)"
        return [NotRecommended("quantization", why, "memory.weights_bytes")]
    tpot = facts.tpot_seconds
    changes = [Change("weights_bytes", facts.weights_bytes, after, "bytes"),
               Change("tpot_ms", tpot * 1e3, tpot_after * 1e3, "ms")]  # fmt: skip
    changes += capacity_changes(facts, after)
    text = (f"weights {gb(facts.weights_bytes)} → {gb(after)}; TPOT {ms(tpot)} → "
            f"{ms(tpot_after)} ms (fewer bytes read per decode step)")  # fmt: skip
    return [Recommendation(
        technique="quantization",
        setting=f"int8 weight-only, keep lm_head in {facts.dtype}",
        expected_effect=ExpectedEffect(text, changes),
        evidence=[Evidence("#memory", "memory.weights_bytes",
                           f"weights {gb(facts.weights_bytes)} in {facts.dtype}")],
        caveats=["estimated: the quantization experiment did not run, so quality was not "
                 "measured; run it to see top-1 agreement and perplexity on your model",
                 "assumes kernels that read int8 weights directly (e.g. torchao on a GPU)"],
        basis=ESTIMATED,
        serves=serves,
        gain=gain,
    )]  # fmt: skip


def caching(facts: Facts) -> list[Outcome]:
    prefix = facts.workload.shared_prefix_tokens
    shapes, calibration = facts.shapes, facts.calibration
    if not prefix or shapes is None or calibration is None:
        return []
    prompt = facts.workload.prompt_tokens
    suffix = max(1, prompt - prefix)

    def prefill(tokens: int) -> float:
        moved = shapes.weights_bytes(facts.dtype) + shapes.kv_bytes_per_token(facts.dtype) * tokens
        return calibration.prefill.seconds(shapes.prefill_flops(tokens, 1), moved)

    ratio = prefill(prompt) / prefill(suffix)
    if ratio < 1.05:
        why = f"the prefill of {prompt - suffix} cached tokens is a small part of TTFT (estimated)"
        return [NotRecommended("caching", why, "config.workload.shared_prefix_tokens")]
    ttft = facts.ttft_seconds
    return [Recommendation(
        technique="caching",
        setting=f"prefix cache for the shared {prefix}-token system prompt",
        expected_effect=ExpectedEffect(
            f"TTFT {ratio:.1f}× shorter: {ms(ttft)} → {ms(ttft / ratio)} ms",
            [Change("ttft_ms", ttft * 1e3, ttft / ratio * 1e3, "ms")]),
        evidence=[Evidence("#verdict", f"{facts.timing_key}.ttft",
                           f"TTFT {ms(ttft)} ms at {prompt} prompt tokens, {prefix} shared")],
        caveats=["estimated: the caching experiment did not run; only the prefill after the "
                 "prefix is counted",
                 f"the cached prefix holds {gb(facts.kv_bytes_per_token * prefix)} of KV cache"],
        basis=ESTIMATED,
        serves="prompt",
        gain=ratio,
    )]  # fmt: skip


def parallel_not_needed(facts: Facts) -> NotRecommended:
    fit = facts.fit
    if fit is None:
        return NotRecommended("parallel", "no deployment GPU named: capacity not judged", "")
    why = (
        f"weights and KV cache fit on {fit.gpu_count}× {fit.gpu_kind} with "
        f"{gb(fit.headroom_bytes)} to spare: a split adds communication, not capacity"
    )
    return NotRecommended("parallel", why, "memory.fit")


def needs_more_devices(facts: Facts, goal: str) -> bool:
    """Splitting is advised only when the workload does not fit the user's GPUs."""
    return goal == "devices" or (facts.fit is not None and not facts.fit.fits)


def parallel(facts: Facts, goal: str) -> list[Outcome]:
    if not needs_more_devices(facts, goal):
        return [parallel_not_needed(facts)]
    gpu, shapes = facts.gpu, facts.shapes
    if gpu is None:
        return []
    usable = gpu.memory_bytes * (1 - RESERVE_SHARE) - RESERVE_FIXED_BYTES
    kv = facts.kv_bytes_per_token * facts.workload.concurrency * facts.workload.context_tokens
    kv_heads = shapes.num_key_value_heads if shapes else max(TP_SIZES)
    for tp in TP_SIZES:
        per_device = facts.weights_bytes / tp + kv / min(tp, kv_heads)
        if per_device <= usable:
            break
    else:
        why = f"even TP={tp} leaves {gb(per_device)} per device against {gb(usable)} usable"
        return [NotRecommended("parallel", why, "memory.fit")]
    figure = f"{gb(per_device)} per device against {gb(usable)} usable (estimated)"
    need = f"needs {gb(facts.weights_bytes + kv)} on {facts.gpu_count}× {gpu.key}"
    return [Recommendation(
        technique="parallel",
        setting=f"TP={tp} on {tp}× {gpu.label}",
        expected_effect=ExpectedEffect(
            f"fits: {figure}",
            [Change("devices", facts.gpu_count, tp, "GPUs"),
             Change("bytes_per_device", (facts.weights_bytes + kv) / facts.gpu_count,
                    per_device, "bytes")]),
        evidence=[Evidence("#memory", "memory.fit", need)],
        caveats=[f"estimated: weights split evenly over {tp} devices, KV cache by KV heads; "
                 "the parallel experiment sizes each device from the real parameters",
                 f"{tp}× the GPUs; communication over {gpu.interconnect} is not counted"],
        basis=ESTIMATED,
        serves="devices",
        gain=MAKES_IT_FIT,
    )]  # fmt: skip


def disaggregation(facts: Facts) -> list[Outcome]:
    """Only where a TPOT target is met by decode alone and missed when a prefill joins."""
    target = facts.workload.tpot_ms
    step, prefill = facts.tpot_seconds, facts.ttft_seconds
    if facts.workload.concurrency == 1 or target is None:
        return []
    mixed = step + prefill
    if not (step * 1e3 <= target < mixed * 1e3):
        return []
    return [Recommendation(
        technique="disaggregation",
        setting="disaggregate prefill and decode onto separate workers",
        expected_effect=ExpectedEffect(
            f"no prefill stalls decode: worst TPOT {ms(mixed)} → {ms(step)} ms "
            f"(target {target:g} ms)",
            [Change("worst_tpot_ms", mixed * 1e3, step * 1e3, "ms")]),
        evidence=[Evidence("#verdict", f"{facts.timing_key}.tpot",
                           f"TPOT {ms(step)} ms alone; a {ms(prefill)} ms prefill joins a step")],
        caveats=["estimated: the parallel experiment (which measures a prefill joining decode "
                 "steps) did not run; chunked prefill is the other fix",
                 "more workers to operate, and each request's KV cache crosses the link"],
        basis=ESTIMATED,
        serves="generation",
        gain=mixed / step,
    )]  # fmt: skip
