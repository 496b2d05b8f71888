"""The advice and the predictions of a profile, or of an analytic estimate
(`advise_profile`, `profile_predictions`; `estimate_report`, all "estimated").

Predictions of a profile: every measured prefill and decode point predicted
by a fit that left it out (`calibrated`); the weight and KV bytes from the
model's shapes against the measured bytes (`estimated`); the user's workload
projected with the fit to all points (`projected`) beside the verdict's
figures interpolated from the measured sweep; and, when the deployment GPU is
not this device, the workload on that GPU from its datasheet (`estimated`).
"""

from __future__ import annotations

from typing import Any

from profiling.advice import deployments
from profiling.advice.bottleneck import classify, label, prompt_reuse, smallest_weights
from profiling.advice.missing import missing
from profiling.advice.ranking import RANKING, rank, resampled, screen, uncertainty_note
from profiling.advice.stability import near_the_bar
from profiling.config import Hardware, Workload
from profiling.engine.advice import engine_outcomes
from profiling.engine.results import EngineResult
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.profile import Experiments, Profile
from profiling.projection.calibration import assumed, calibrate, leave_one_out, relative_error
from profiling.projection.engines import DEFAULT_ENGINE, NAMES, limits
from profiling.projection.estimate import Deployment, Projection, Traffic, project
from profiling.projection.validation import band, unchecked
from profiling.quantization.tolerance import DEFAULT_TOLERANCE
from profiling.technique_kit.advice_results import (
    CALIBRATED,
    ESTIMATED,
    MEASURED,
    PROJECTED,
    Advice,
    NotRecommended,
    PredictionPoint,
    QualityTolerance,
    Recommendation,
)
from profiling.technique_kit.facts import Facts, decode_peak, gpu_of, prefill_peak
from profiling.techniques import techniques
from profiling.units import size


def advise(
    facts: Facts,
    ran: Experiments | None = None,
    tolerance: QualityTolerance = DEFAULT_TOLERANCE,
    engine: EngineResult | None = None,
    deployment: Hardware | None = None,
    model: str = "",
    capacity_for: int | None = None,
) -> Advice:
    """The advice from the figures and what each technique's experiment found (`ran`;
    none for an estimate): every technique's rule in the registry, ranked. Where the
    serving engine measured a technique (`engine`), its figures decide it. The deployment
    search (`deployment`: the user's GPUs and how they serve now) ranks the configurations,
    each with its capacity (`capacity_for`: only the first that many, where an answer is
    wanted at once)."""
    ran = ran or Experiments()
    found = deployments.search(
        facts, model, deployment, ran.speculative, engine, ran.quantization, capacity_for
    )
    bottleneck, numbers = classify(facts, ran, tolerance)
    recommendations: list[Recommendation] = []
    refused: list[NotRecommended] = []
    by_engine = engine_outcomes(engine, facts, tolerance)
    for technique in techniques():
        rule = technique.advise
        if rule is None:
            continue
        outcomes = rule(facts, ran[technique.name], bottleneck, tolerance)
        if technique.name in by_engine:
            # The engine's figures win; quantization keeps the eager formats it has not run.
            kept = [o for o in outcomes if technique.name == "quantization"]
            outcomes = by_engine[technique.name] + kept
        for outcome in outcomes:
            bucket = recommendations if isinstance(outcome, Recommendation) else refused
            bucket.append(outcome)  # type: ignore[arg-type]
    # One rule screens and orders them (`profiling.advice.ranking`).
    recommendations, set_aside = screen(recommendations)
    refused += set_aside
    named = facts.gpu_count or None
    recommendations = rank(recommendations, bottleneck, facts.workload, named)
    shaky = resampled(recommendations, bottleneck, facts.workload, named)
    first = recommendations[0] if recommendations else None
    notes = [n for n in (uncertainty_note(shaky, first), near_the_bar(recommendations)) if n]
    notes += [deployments.headline(found)] if found and found.first else []
    reason = why(bottleneck, facts, ran, tolerance)
    agrees, note = agreement(facts, bottleneck, reason)
    if by_engine and engine is not None:
        notes.append(
            f"Serving figures are {engine.name} {engine.version}'s, measured at your workload; "
            f"{', '.join(sorted(by_engine))} are judged on the engine's measurements (the "
            "eager-mode experiments stay in their sections)."
        )
    return Advice(
        basis=facts.basis,
        bottleneck=bottleneck,
        bottleneck_label=label(bottleneck),
        summary=summary(bottleneck, reason, recommendations),
        deciding_numbers=numbers,
        stated_bottleneck=facts.stated_bottleneck,
        agrees=agrees,
        agreement_note=note,
        recommendations=recommendations,
        not_recommended=refused,
        experiments_missing=missing(facts, ran, recommendations, refused, set(by_engine)),
        quality_tolerance=tolerance,
        ranking=RANKING,
        notes=notes,
        deployments=found.to_dict() if found else None,
    )


def why(
    bottleneck: str,
    facts: Facts,
    ran: Experiments,
    tolerance: QualityTolerance = DEFAULT_TOLERANCE,
) -> str:
    """The deciding figures of `bottleneck` in one clause."""
    fit = facts.fit
    if bottleneck in ("memory", "devices") and fit is not None:
        where = f"{fit.gpu_count}× {fit.gpu_kind}"
        need, usable = size(fit.required_bytes), size(fit.available_bytes)
        text = f"weights + KV cache need {need} of {usable} usable on {where}"
        if bottleneck != "devices":
            return text
        small, how = smallest_weights(facts, ran, tolerance)
        if how.startswith("quantization.variants["):
            how = "the smallest measured variant within the quality tolerance"
        return text + f", even with {size(small)} of weights: {how}"
    if bottleneck == "prompt":
        reuse, _ = prompt_reuse(facts, ran)
        text = f"prefill is {facts.prefill_share:.0%} of a request's time"
        return text + (f" and {reuse:.0%} of prompt tokens are repeated" if reuse else "")
    text = f"decode is {facts.decode_share:.0%} of a request's time"
    intensity, ridge = facts.decode_intensity(), facts.ridge_point()
    if intensity is not None and ridge is not None and intensity < ridge:
        text += (f", at {intensity:.0f} FLOP/byte against the GPU's ridge point of {ridge:.0f}: "
                 "memory-bandwidth-bound")  # fmt: skip
    return text


def summary(bottleneck: str, reason: str, recommendations: list[Recommendation]) -> str:
    line = f"{label(bottleneck)}: {reason}."
    if not recommendations:
        return line + " No technique measured here would help."
    first = recommendations[0]
    return line + f" First: {first.setting} ({first.expected_effect.text}; {first.basis})."


def agreement(facts: Facts, bottleneck: str, reason: str) -> tuple[bool | None, str]:
    stated = facts.stated_bottleneck
    if stated == "unsure":
        return None, f"you were not sure; the figures point to: {label(bottleneck).lower()}"
    if stated == bottleneck:
        return True, f"the figures agree: {reason}"
    return False, f"the figures point elsewhere: {reason}; {_against(stated, facts)}"


def _against(stated: str, facts: Facts) -> str:
    fit = facts.fit
    if stated in ("memory", "devices"):
        if fit is None:
            return "no deployment GPU was named, so capacity could not be judged"
        where = f"{fit.gpu_count}× {fit.gpu_kind}"
        return f"weights + KV cache fit on {where} with {size(fit.headroom_bytes)} to spare"
    # "Only" where the stated phase is the smaller one; where it is the larger, the
    # sentence says so, and the measured bottleneck comes first for the reason given.
    phase, share = (
        ("prefill", facts.prefill_share) if stated == "prompt" else ("decode", facts.decode_share)
    )
    if share < 0.5:
        return f"{phase} is only {share:.0%} of a request's time"
    return (
        f"{phase} is {share:.0%} of a request's time, but the figures above make "
        "the measured bottleneck the one to act on first"
    )


# -- a profile ------------------------------------------------------------------


def advise_profile(
    profile: Profile,
    shapes: Shapes | None = None,
    tolerance: QualityTolerance = DEFAULT_TOLERANCE,
) -> Advice:
    """The advice for a profile; raises ValueError when it has no verdict."""
    facts = facts_of(profile, shapes)
    hardware, model = profile.config.hardware, profile.config.model
    return advise(facts, profile.experiments, tolerance, profile.engine, hardware, model)


def facts_of(profile: Profile, shapes: Shapes | None = None) -> Facts:
    """Facts of a measured profile; raises ValueError without a verdict."""
    verdict = profile.verdict
    if verdict is None:
        raise ValueError("the profile has no verdict (no prefill or decode points)")
    config, env, mem = profile.config, profile.environment, profile.memory
    workload, engine = config.workload, config.hardware.serving_engine
    calibration, served = None, None
    if shapes is not None and profile.prefill and profile.decode:
        calibration = calibrate(shapes, profile, env.device_name)
        # The workload served on the measured rates (projected): its queueing share.
        served = _project(shapes, calibration, env.dtype or "float32", workload, None, 1,
                          engine=engine).served  # fmt: skip
    return Facts(
        basis=MEASURED,
        workload=workload,
        stated_bottleneck=config.stated_bottleneck or "unsure",
        dtype=env.dtype or "float32",
        device=env.device,
        gpu=gpu_of(config.hardware.gpu_kind or env.gpu_kind),
        gpu_count=config.hardware.gpu_count,
        measured_gpu=env.gpu_kind,
        ttft_seconds=verdict.ttft_ms / 1e3,
        tpot_seconds=verdict.tpot_ms / 1e3,
        prefill_share=verdict.prefill_share,
        decode_share=verdict.decode_share,
        end_to_end_seconds=verdict.end_to_end_seconds,
        ttft_meets_target=verdict.ttft_meets_target,
        tpot_meets_target=verdict.tpot_meets_target,
        weights_bytes=mem.weights_bytes,
        kv_bytes_per_token=mem.kv_cache_bytes_per_token,
        fit=mem.fit,
        timing_key="verdict",
        decode_fraction_of_peak=decode_peak(profile.decode, workload.concurrency),
        prefill_fraction_of_peak=prefill_peak(profile.prefill, workload.prompt_tokens),
        shapes=shapes,
        calibration=calibration,
        queue_share=served.queue_share if served else 0.0,
        served=served,
        engine=engine,
    )


def profile_predictions(profile: Profile, shapes: Shapes) -> list[PredictionPoint]:
    env, mem = profile.environment, profile.memory
    dtype, device = env.dtype or "float32", env.device_name or env.device
    out = [
        PredictionPoint(p.metric, "s", {**p.at, "device": device}, p.predicted, p.measured,
                        p.error, CALIBRATED, "predicted by a fit to the other points of its phase")
        for p in leave_one_out(shapes, profile)
    ]  # fmt: skip
    for metric, predicted, measured in (
        ("weights_bytes", shapes.weights_bytes(dtype), mem.weights_bytes),
        ("kv_cache_bytes_per_token", shapes.kv_bytes_per_token(dtype),
         mem.kv_cache_bytes_per_token),
    ):  # fmt: skip
        out.append(
            PredictionPoint(metric, "bytes", {"dtype": dtype}, float(predicted), float(measured),
                            relative_error(predicted, measured), ESTIMATED,
                            "from the model's shapes, against the loaded tensors' bytes")
        )  # fmt: skip
    out += _workload_projection(profile, shapes, dtype, device)
    return out


def _workload_projection(
    profile: Profile, shapes: Shapes, dtype: str, device: str
) -> list[PredictionPoint]:
    config, verdict, mem = profile.config, profile.verdict, profile.memory
    workload = config.workload
    calibration = calibrate(shapes, profile, device)
    engine = config.hardware.serving_engine
    projection = _project(shapes, calibration, dtype, workload, None, 1, engine=engine)
    measured = None
    if verdict:
        kv = mem.kv_cache_bytes_per_token * workload.concurrency * workload.context_tokens
        measured = {
            "ttft_seconds": verdict.prefill_seconds,
            "tpot_seconds": verdict.tpot_ms / 1e3,
            "decode_tokens_per_second": workload.concurrency / (verdict.tpot_ms / 1e3),
            "memory_bytes": float(mem.weights_bytes + kv),
        }
    note = (
        f"your workload projected with rates fitted to every measured point on {device}; "
        "measured: the verdict's interpolation of the measured sweep at this workload"
    )
    out = projection_points(projection, workload, device, PROJECTED, measured, note)
    gpu = _target_gpu(config.hardware.gpu_kind, profile.environment.gpu_kind)
    if gpu is not None:
        deployment = config.hardware
        target_dtype = deployment.serving_dtype(
            dtype if dtype in ("bfloat16", "float16") else "bfloat16"
        )
        rates = assumed(gpu, target_dtype, shapes.num_layers)
        count = deployment.gpu_count
        target = _project(shapes, rates, target_dtype, workload, gpu, count, deployment)
        out += projection_points(target, workload, f"{count}× {gpu.key}", ESTIMATED, None,
                                 rates.note)  # fmt: skip
    return out


def _target_gpu(kind: str | None, profiled_kind: str | None) -> GPU | None:
    """The deployment GPU when it is not the device the profile ran on."""
    return None if kind == profiled_kind else gpu_of(kind)


def _project(
    shapes: Shapes,
    rates: Any,
    dtype: str,
    w: Workload,
    gpu: GPU | None,
    count: int,
    deployment: Hardware | None = None,
    engine: str | None = None,
) -> Projection:
    """The workload on `count` GPUs: in tensor parallel over all of them, or in the
    layout `deployment` fixes, with its KV-cache format and the workload's load, on the
    limits of `engine` (the deployment's serving engine by default)."""
    tp, pp, replicas = (deployment.layout() if deployment else None) or (count, 1, 1)
    engine = engine or (deployment.serving_engine if deployment else DEFAULT_ENGINE)
    traffic = Traffic(w.prompt_tokens, w.output_tokens, w.concurrency, w.ttft_ms, w.tpot_ms,
                      rate=w.request_rate or 0.0, requests=w.requests)  # fmt: skip
    served_by = Deployment(gpu, tp, kv_dtype=deployment.kv_dtype if deployment else "",
                           engine=limits(gpu, engine, tp=tp, pp=pp), replicas=replicas,
                           stages=pp)  # fmt: skip
    return project(shapes, rates, dtype, traffic, served_by)


def projection_points(
    projection: Projection,
    workload: Workload,
    device: str,
    basis: str,
    measured: dict[str, float] | None,
    note: str,
    shapes: Shapes | None = None,
) -> list[PredictionPoint]:
    """The workload's TTFT, TPOT, throughput and memory from one projection (an estimate
    carries its metric's published error band, unless `shapes`' model has a feature no
    published row had: then the note says which).

    Beside a measurement (the verdict's static figures: one request's prefill, one
    decode step at the concurrency) the projection's static figures are compared;
    alone, the served ones are given (the simulated engine's medians and p99s)."""
    at = {
        "prompt_tokens": workload.prompt_tokens,
        "output_tokens": workload.output_tokens,
        "concurrency": workload.concurrency,
        "dtype": projection.dtype,
        "device": device,
    }
    if workload.request_rate:  # open loop: the rate, not the users, is the load
        del at["concurrency"]
        at["request_rate"] = workload.request_rate
    memory = float(projection.weights_bytes + projection.kv_cache_bytes)
    served = projection.served
    if served is None and measured is None:  # its first note says why
        why = projection.notes[0] if projection.notes else "not served"
        note += f"; {why}, on {NAMES[projection.engine]}'s limits"
    if measured is not None or served is None:
        figures = [
            ("ttft_seconds", "s", projection.prefill_alone_seconds),
            ("tpot_seconds", "s", projection.step_seconds),
            ("decode_tokens_per_second", "tokens/s",
             workload.concurrency / projection.step_seconds),
            ("memory_bytes", "bytes", memory),
        ]  # fmt: skip
    else:
        figures = [
            ("ttft_seconds", "s", served.ttft.p50),
            ("ttft_p99_seconds", "s", served.ttft.p99),
            ("tpot_seconds", "s", served.tpot.p50),
            ("tpot_p99_seconds", "s", served.tpot.p99),
            ("itl_p99_seconds", "s", served.itl.p99),
            ("output_tokens_per_second", "tokens/s", projection.decode_tokens_per_second),
            ("memory_bytes", "bytes", memory),
        ]
        note += (
            f"; served by a simulated engine on {NAMES[projection.engine]}'s limits "
            f"(continuous batching, chunked prefill of {served.max_batched_tokens:,} tokens "
            "per step) "
            + (f"at {workload.request_rate:g} requests/s" if workload.request_rate
               else f"to {workload.concurrency} users")
            + f", {served.requests} requests"
        )  # fmt: skip
    out = []
    for metric, unit, predicted in figures:
        value = measured.get(metric) if measured else None
        error = relative_error(predicted, value)
        point = PredictionPoint(metric, unit, dict(at), predicted, value, error, basis, note)
        if basis == ESTIMATED and (found := band(metric, shapes)) is not None:
            point.published_error = found.to_dict()
        out.append(point)
    return out


# -- an estimate ----------------------------------------------------------------


def estimate_report(
    shapes: Shapes,
    gpu: GPU,
    gpu_count: int,
    dtype: str,
    workload: Workload,
    stated_bottleneck: str = "unsure",
    tolerance: QualityTolerance = DEFAULT_TOLERANCE,
    spec_acceptance: float | None = None,
    deployment: Hardware | None = None,
    model: str = "",
) -> tuple[Advice, list[PredictionPoint]]:
    """Advice and projected figures from shapes and the datasheet alone (no measurement);
    `spec_acceptance`: the draft's acceptance per token, where the user knows it;
    `deployment`: its KV-cache format and fixed layout, where given (`dtype` is
    already the precision it serves in)."""
    rates = assumed(gpu, dtype, shapes.num_layers)
    projection = _project(shapes, rates, dtype, workload, gpu, gpu_count, deployment)
    facts = Facts.from_projection(
        projection, shapes, rates, workload, gpu, stated_bottleneck, spec_acceptance
    )
    where = f"{gpu_count}× {gpu.key}"
    note = rates.note
    if missing := unchecked(shapes):
        note += (f"; no published serving row had {', '.join(missing)}: this model's "
                 "figures carry no measured error band")  # fmt: skip
    points = projection_points(projection, workload, where, ESTIMATED, None, note, shapes)
    return advise(facts, None, tolerance, deployment=deployment, model=model), points
