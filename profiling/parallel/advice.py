"""The parallelism rule: the fewest devices that fit, and the measured tensor-parallel run."""

from __future__ import annotations

import math

from profiling.measure import hardware
from profiling.measure.hardware import GPU
from profiling.measure.stats import ratio_interval
from profiling.model.shapes import DTYPE_BYTES
from profiling.parallel import split_serving
from profiling.parallel.layout_advice import layout_advice
from profiling.parallel.plans import TP_SIZES
from profiling.parallel.results import BASIS_MEASURED, DisaggregationResult, ParallelResult
from profiling.projection import serving
from profiling.projection.engines import limits
from profiling.projection.fit import activation_bytes, usable_bytes
from profiling.projection.precision import PRECISIONS
from profiling.projection.step_time import (
    DeviceMemory,
    StepModel,
    kv_capacity_tokens,
    link_bytes_per_second,
)
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    NotRecommended,
    QualityTolerance,
    Recommendation,
)
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import (
    DISAGGREGATION_MIN_SPIKE,
    MAKES_IT_FIT,
    MIN_GAIN,
    Outcome,
    interval_fields,
    ms,
    weak,
)
from profiling.units import size


def parallel(
    facts: Facts, result: ParallelResult | None, goal: str, tolerance: QualityTolerance
) -> list[Outcome]:
    if result is None:
        return parallel_estimate(facts, goal)
    measured = result.measured
    if measured.status == "failed":
        why = f"the tensor-parallel run failed: {measured.reason}"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if measured.status == "measured" and measured.logits_match is False:
        why = "split over processes the model's logits differed from one process (a failed check)"
        return [NotRecommended("parallel", why, "parallel.measured")]
    if not needs_more_devices(facts, goal):
        return room_to_spare(facts)
    plan = result.fewest_devices
    if plan is None:
        why = "no tensor × pipeline split of up to 8 devices fits weights and KV cache"
        return [NotRecommended("parallel", why, "parallel.plans")]
    index = result.plans.index(plan)
    gpu = facts.gpu.label if facts.gpu else "devices"
    pp = f" × PP={plan.pp}" if plan.pp > 1 else ""
    changes = [Change("devices", facts.gpu_count, plan.devices, "GPUs"),
               Change("bytes_per_device", facts.fit.required_bytes / facts.gpu_count
                      if facts.fit else 0.0, plan.bytes_per_device, "bytes")]  # fmt: skip
    if measured.decode_ratio:
        tpot = facts.tpot_seconds
        changes.append(Change("tpot_ms", tpot * 1e3, tpot * measured.decode_ratio * 1e3, "ms"))
    usable = size(plan.available_bytes_per_device or 0)
    figure = f"{size(plan.bytes_per_device)} per device against {usable} usable"
    return [Recommendation(
        technique="parallel",
        setting=f"TP={plan.tp}{pp} on {plan.devices}× {gpu}",
        expected_effect=ExpectedEffect(f"fits: {figure}", changes),
        evidence=[Evidence("#parallel", f"parallel.plans[{index}]", figure)],
        caveats=[f"{plan.devices}× the GPUs; communication between them is not counted",
                 *([plan.note] if plan.note else [])],
        basis=MEASURED if result.basis == BASIS_MEASURED else ESTIMATED,
        serves="devices",
        gain=MAKES_IT_FIT,
        devices=plan.devices,
    )]  # fmt: skip


# -- where the experiment did not run: an estimate -------------------------------


def room_to_spare(facts: Facts) -> list[Outcome]:
    """The workload fits: how best to lay it over the GPUs, or why no split is needed."""
    outcomes = layout_advice(facts)
    if any(isinstance(o, Recommendation) for o in outcomes):
        return outcomes
    return [parallel_not_needed(facts), *outcomes]


def parallel_not_needed(facts: Facts) -> NotRecommended:
    fit = facts.fit
    if fit is None:
        return NotRecommended("parallel", "no deployment GPU named: capacity not judged", "")
    why = (
        f"weights and KV cache fit on {fit.gpu_count}× {fit.gpu_kind} with "
        f"{size(fit.headroom_bytes)} to spare: no split is needed for capacity"
    )
    return NotRecommended("parallel", why, "memory.fit")


def needs_more_devices(facts: Facts, goal: str) -> bool:
    """Splitting is advised only when the workload does not fit the user's GPUs."""
    return goal == "devices" or (facts.fit is not None and not facts.fit.fits)


def parallel_estimate(facts: Facts, goal: str) -> list[Outcome]:
    if not needs_more_devices(facts, goal):
        return room_to_spare(facts)
    gpu, shapes = facts.gpu, facts.shapes
    if gpu is None:
        return []
    kv = facts.kv_bytes_per_token * facts.workload.concurrency * facts.workload.context_tokens
    kv_heads = shapes.num_key_value_heads if shapes else max(TP_SIZES)
    for tp in TP_SIZES:
        usable = usable_bytes(gpu.memory_bytes, activation_bytes(shapes, facts.dtype, tp),
                              facts.engine_limits(tp), facts.weights_bytes / tp)  # fmt: skip
        per_device = facts.weights_bytes / tp + kv / min(tp, kv_heads)
        if per_device <= usable:
            break
    else:
        why = f"even TP={tp} leaves {size(per_device)} per device against {size(usable)} usable"
        return [NotRecommended("parallel", why, "memory.fit")]
    figure = f"{size(per_device)} per device against {size(usable)} usable (estimated)"
    need = f"needs {size(facts.weights_bytes + kv)} on {facts.gpu_count}× {gpu.key}"
    more = [f"TP={n}: {size(facts.weights_bytes / n + kv / min(n, kv_heads))} per device"
            for n in TP_SIZES if n > tp]  # fmt: skip
    bigger = _bigger_gpu(facts, facts.weights_bytes + kv)
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
                 f"{tp}× the GPUs, all-reducing over {gpu.interconnect}",
                 *([f"more room: {'; '.join(more)}"] if more else []),
                 *([bigger] if bigger else [])],
        basis=ESTIMATED,
        serves="devices",
        gain=MAKES_IT_FIT,
        devices=tp,
    )]  # fmt: skip


def _bigger_gpu(facts: Facts, needed: float) -> str:
    """The smallest catalog GPU of the same maker that holds the workload on as many GPUs."""
    gpu, count = facts.gpu, facts.gpu_count
    if gpu is None:
        return ""
    peak = activation_bytes(facts.shapes, facts.dtype, count)

    def usable(g: GPU) -> int:
        rule = limits(g, facts.engine, tp=count)
        return usable_bytes(g.memory_bytes, peak, rule, facts.weights_bytes / count) * count

    roomier = [g for g in hardware.catalog().values()
               if g.vendor == gpu.vendor and g.memory_bytes > gpu.memory_bytes
               and usable(g) >= needed]  # fmt: skip
    if not roomier:
        return ""
    g = min(roomier, key=lambda g: g.memory_bytes)
    return (
        f"or a bigger GPU: {count}× {g.label} holds it ({size(needed)} of {size(usable(g))} usable)"
    )


# -- disaggregation --------------------------------------------------------------


def disaggregation(
    facts: Facts, d: DisaggregationResult | None, goal: str, tolerance: QualityTolerance
) -> list[Outcome]:
    if d is None:
        return disaggregation_estimate(facts)
    key = "disaggregation"
    if facts.workload.concurrency == 1:
        why = "one request at a time: no prefill ever joins another request's decode"
        return [NotRecommended("disaggregation", why, key)]
    if d.tpot_spike < DISAGGREGATION_MIN_SPIKE:
        why = (f"a prefill joining a decode step slows it only {d.tpot_spike:.2f}× "
               f"(threshold {DISAGGREGATION_MIN_SPIKE}×)")  # fmt: skip
        return [NotRecommended("disaggregation", why, key + ".tpot_spike")]
    spike = ratio_interval(d.decode_mixed_seconds.samples, d.decode_alone_seconds.samples)
    if spike is not None and (spike.repeats < 2 or spike.low < DISAGGREGATION_MIN_SPIKE):
        why = (f"a prefill joining a decode step slows it {spike.text()}: the interval reaches "
               f"below the {DISAGGREGATION_MIN_SPIKE}× that makes a split worth its workers, "
               "so the effect is inconclusive")  # fmt: skip
        return [NotRecommended("disaggregation", why, key + ".tpot_spike", inconclusive=True)]
    recommendation = disaggregation_recommendation(facts, d, MEASURED)
    if recommendation.gain < MIN_GAIN:
        # The spikes are real but rare: averaged over the steps, TPOT barely moves.
        what = "mean TPOT colocated / disaggregated"
        return [weak("disaggregation", recommendation.gain, what, key + ".mean_tpot_seconds")]
    if spike is not None:
        fields = interval_fields(spike, "the prefill's slowdown of a step")
        recommendation.confidence = fields["confidence"]
    return [recommendation]


def disaggregation_recommendation(
    facts: Facts, d: DisaggregationResult, basis: str
) -> Recommendation:
    fixes_target = d.alone_meets_tpot and d.mixed_meets_tpot is False
    # The mean over steps, colocated → alone, carried to the report's own TPOT at the
    # user's workload (the measured steps ran at the experiment's batch and context).
    mean_ratio = d.mean_tpot_seconds / d.decode_alone_tpot_seconds
    gain = d.tpot_spike if fixes_target else mean_ratio
    tpot = facts.tpot_seconds
    changes = [
        Change("tpot_ms", tpot * 1e3, tpot / mean_ratio * 1e3, "ms"),
        Change(
            "worst_tpot_ms",
            d.decode_mixed_tpot_seconds * 1e3,
            d.decode_alone_tpot_seconds * 1e3,
            "ms",
        ),
        Change("mean_tpot_ms", d.mean_tpot_seconds * 1e3, d.decode_alone_tpot_seconds * 1e3, "ms"),
    ]
    if d.ttft_disaggregated_seconds is not None:
        changes.append(Change("ttft_ms", d.prefill_seconds_per_request * 1e3,
                              d.ttft_disaggregated_seconds * 1e3, "ms"))  # fmt: skip
    cannot = ""
    if d.alone_meets_tpot is False and d.tpot_target_seconds is not None:
        cannot = (f"even decode alone misses the {d.tpot_target_seconds * 1e3:g} ms TPOT target "
                  f"at batch {d.decode_batch}: separating the phases cannot fix that")  # fmt: skip
    caveats = [f"runs {d.prefill_workers + d.decode_workers} workers ({d.workers}) for your rate "
               f"of {d.request_rate_per_second:.2f} requests/s: more to operate"]  # fmt: skip
    if d.kv_transfer_seconds is not None:
        caveats.append(f"each request's KV cache ({size(d.kv_transfer_bytes_per_request)}) crosses "
                       f"{d.link}: +{ms(d.kv_transfer_seconds)} ms TTFT")  # fmt: skip
    return Recommendation(
        technique="disaggregation",
        setting=f"disaggregate with {d.workers}",
        expected_effect=ExpectedEffect(
            f"no prefill stalls decode: TPOT {ms(tpot)} → {ms(tpot / mean_ratio)} ms at your "
            f"workload; the worst step {ms(d.decode_mixed_tpot_seconds)} → "
            f"{ms(d.decode_alone_tpot_seconds)} ms (measured at batch {d.decode_batch})",
            changes,
        ),  # fmt: skip
        evidence=[
            Evidence(
                "#disaggregation",
                "disaggregation.tpot_spike",
                f"a prefill joining a decode step makes it {d.tpot_spike:.2f}× slower",
            )
        ],
        caveats=caveats,
        basis=basis,
        serves="generation",
        gain=gain,
        # Its own section says whether decode alone meets the TPOT target: where it does
        # not, separating the phases cannot meet it, and it ranks after what can.
        meets_targets=False if d.alone_meets_tpot is False else None,
        cannot=cannot,
        # Each prefill and each decode worker is an engine on the GPUs one engine has.
        devices=(d.prefill_workers + d.decode_workers) * max(1, facts.gpu_count),
        measured_at_batch=d.decode_batch,
    )


# -- where the experiment did not run: an estimate -------------------------------


def disaggregation_estimate(facts: Facts) -> list[Outcome]:
    """Only where the simulated engine shows it: with the same GPUs run as aggregated
    replicas, prefill chunks mixed into decode steps miss the TPOT target, and a
    prefill/decode split meets it (`profiling.parallel.split_serving.split`)."""
    work, key = facts.workload, "disaggregation"
    target = work.tpot_ms
    if work.concurrency == 1:
        why = "one request at a time: no prefill ever joins another request's decode"
        return [NotRecommended("disaggregation", why, key)]
    if target is None:
        why = ("no TPOT target given: a prefill/decode split pays only where prefill stalls "
               "would miss one")  # fmt: skip
        return [NotRecommended("disaggregation", why, key)]
    if facts.shapes is None or facts.calibration is None or (facts.fit and not facts.fit.fits):
        return []  # without shapes nothing to simulate; without room, capacity comes first
    dtype = facts.dtype if facts.dtype in DTYPE_BYTES or facts.dtype in PRECISIONS else "bfloat16"
    gpu, count = facts.gpu, max(1, facts.gpu_count)
    step = StepModel(facts.shapes, facts.calibration, dtype, "", count, gpu)
    capacity, rule = None, facts.engine_limits(count)
    if gpu is not None:
        usable = usable_bytes(gpu.memory_bytes, activation_bytes(facts.shapes, dtype, count),
                              rule, facts.weights_bytes / count)  # fmt: skip
        capacity = kv_capacity_tokens(facts.shapes, dtype, "", gpu, DeviceMemory(count, usable))
        if capacity < work.context_tokens:
            return []  # it does not fit: the capacity rules speak first
    p, o = work.prompt_tokens, work.output_tokens
    apart = split_serving.split(step, p, o, work.concurrency, link_bytes_per_second(gpu), capacity)
    engines = apart.prefill_workers + apart.decode_workers
    users = math.ceil(work.concurrency / engines)
    together = serving.simulate(step, serving.Requests(
        p, o, concurrency=users, kv_tokens=capacity, max_seqs=rule.max_seqs,
        max_batched_tokens=rule.max_batched_tokens,
    ))  # fmt: skip
    gpus = engines * count
    mixed, alone = together.tpot.p90 * 1e3, apart.tpot.p90 * 1e3
    same = (f"on the same {gpus} GPUs as {engines} aggregated replicas ({users} users each) "
            f"TPOT p90 is {mixed:.3g} ms; split {apart.prefill_workers} prefill : "
            f"{apart.decode_workers} decode it is {alone:.3g} ms")  # fmt: skip
    if mixed <= target or alone > target:
        verdict = "the replicas already meet" if mixed <= target else "the split misses too"
        why = f"simulated serving: {same}, against your {target:g} ms target ({verdict})"
        return [NotRecommended("disaggregation", why, key)]
    before = facts.tpot_seconds
    after = apart.tpot.p50
    return [Recommendation(
        technique="disaggregation",
        setting=(f"disaggregate: {apart.prefill_workers} prefill : {apart.decode_workers} decode "
                 f"workers of {count}× {gpu.key if gpu else 'your device'}"),
        expected_effect=ExpectedEffect(
            f"TPOT {ms(before)} → {ms(after)} ms at your workload ({same})",
            [Change("tpot_ms", before * 1e3, after * 1e3, "ms"),
             Change("ttft_ms", facts.ttft_seconds * 1e3, apart.ttft_seconds * 1e3, "ms"),
             Change("devices", facts.gpu_count, gpus, "GPUs")]),
        evidence=[Evidence("#verdict", f"{facts.timing_key}.tpot",
                           f"simulated: TPOT p90 {mixed:.3g} ms aggregated, {alone:.3g} ms split")],
        caveats=["estimated: both sides simulated on the calibration's step times, the split's "
                 f"prefill workers at {apart.prefill_utilisation:.0%} load",
                 f"{gpus}× the GPUs of one engine; each prompt's KV cache crosses the link "
                 f"(+{ms(apart.kv_transfer_seconds)} ms TTFT)"],
        basis=ESTIMATED,
        serves="generation",
        gain=together.tpot.p50 / after,
        devices=gpus,
    )]  # fmt: skip
