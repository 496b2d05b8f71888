"""The deployment search for the advice: the scenario from the facts, the user's current
deployment and what the experiments measured; the launch command of each
configuration. (The recommendations' order is `profiling.advice.ranking`'s.)
"""

from __future__ import annotations

from functools import partial
from typing import Any

from profiling.config import Hardware, Workload
from profiling.engine import projected_commands
from profiling.engine.commands import launch_command
from profiling.engine.results import EngineResult, ServingPoint
from profiling.projection.configurations import Configuration
from profiling.projection.deployments import Deployments, deployments
from profiling.projection.engines import DEFAULT_ENGINE, STATIC, limits
from profiling.projection.precision import model_format
from profiling.projection.search import Measured, Scenario
from profiling.quantization.results import MEASURED as MEASURED_VARIANT
from profiling.quantization.results import QuantizationResult, QuantVariant
from profiling.speculative.results import SpeculativeResult
from profiling.technique_kit.facts import Facts
from profiling.units import ms, tok_s

# The engine's quantizations by the search's names: its fp8 weights, fp8 KV cache, and
# the GPTQ checkpoint (4-bit) it serves.
ENGINE_FORMATS = {"fp8": "fp8", "fp8-kv": "kv_fp8", "gptq": "int4"}
# The quantization experiment's precisions by the search's weight formats (8- and 4-bit
# weight-only, whatever library made them).
EAGER_FORMATS = {"fp8": "fp8", "int8": "int8", "bnb-int8": "int8", "int4": "int4",
                 "gptq-int4": "int4", "bnb-nf4": "int4"}  # fmt: skip


def scenario(
    facts: Facts,
    deployment: Hardware | None,
    speculative: SpeculativeResult | None = None,
    engine: EngineResult | None = None,
    quantization: QuantizationResult | None = None,
) -> Scenario | None:
    """The search's scenario, or None without the model's shapes or a deployment GPU."""
    if facts.shapes is None or facts.gpu is None:
        return None
    count = deployment.gpu_count if deployment else facts.gpu_count
    tp, pp, replicas = (deployment.layout() if deployment else None) or (count, 1, 1)
    current = Configuration(
        facts.gpu.key, tp, pp, replicas,
        weights=deployment.weights if deployment else "auto",
        kv_cache=deployment.kv_cache if deployment else "auto",
    )  # fmt: skip
    acceptance, basis, draft = measured_acceptance(speculative)
    if acceptance is None:
        acceptance, basis, draft = engine_acceptance(engine)
    if acceptance is None and facts.spec_acceptance is not None:
        acceptance, basis, draft = facts.spec_acceptance, "given", "draft head"
    # The model's own format: 16-bit, or the checkpoint's where it ships quantized (the
    # search then never quantizes it again).
    dtype = model_format(facts.dtype)
    hit_rate, hit_basis = prefix_hits(facts, engine)
    # The engine's serving figures stand in for the estimate only on the engine deployed on.
    served = measured(facts, engine) if engine is None or engine.name == facts.engine else {}
    return Scenario(facts.shapes, facts.gpu, count, dtype, facts.workload, current,
                    acceptance, basis, draft or "draft head", quality(engine, quantization),
                    served, hit_rate, hit_basis, facts.engine)  # fmt: skip


def prefix_hits(facts: Facts, engine: EngineResult | None) -> tuple[float | None, str]:
    """The prefix cache's hit rate the engine measured on the user's prompts (their
    length and shared prefix), with its basis."""
    run = engine.prefix_caching if engine else None
    w = facts.workload
    if run is None or engine is None:
        return None, ""
    if (run.prompt_tokens, run.shared_prefix_tokens) != (w.prompt_tokens, w.shared_prefix_tokens):
        return None, ""
    return run.hit_rate, f"{run.hit_rate:.0%} measured on {engine.name} {engine.version}"


def measured(facts: Facts, engine: EngineResult | None) -> dict[Configuration, Measured]:
    """The configurations the engine served at the user's workload, on GPUs of the
    deployment's kind: its reference server (one GPU, the model's own weights), each
    quantization it ran, its draft model, and its tensor-parallel split. None of them
    where the load is open-loop (the engine's sweep is closed-loop) or the GPU is
    another kind."""
    w = facts.workload
    if engine is None or facts.gpu is None or facts.measured_gpu != facts.gpu.key:
        return {}
    if w.request_rate:
        return {}
    # The engine's servers run with its default, prefix caching on: with a shared prefix
    # that is the searched configuration with prefix caching (the search has none without).
    at = partial(Configuration, facts.gpu.key, prefix_caching=bool(w.shared_prefix_tokens))
    runs: list[tuple[Configuration, list[ServingPoint]]] = [(at(), engine.serving)]
    for q in engine.quantization:
        key = ENGINE_FORMATS.get(q.method)
        if key is not None and q.status == "ran":
            c = at(kv_cache="fp8") if key == "kv_fp8" else at(weights=key)
            runs.append((c, q.points))
    for p in engine.speculative:
        if p.method == "draft_model" and p.status == "ran" and p.output_matches is not False:
            runs.append((at(draft=p.draft or "draft model", draft_tokens=p.k), p.points))
    split = engine.tensor_parallel
    if split is not None and split.status == "ran" and split.size > 1:
        runs.append((at(tp=split.size), split.points))
    out: dict[Configuration, Measured] = {}
    for c, points in runs:
        point = _point(points, w)
        if point is not None:
            out[c] = Measured(point.ttft_ms.p90 / 1e3, point.tpot_ms.p50 / 1e3,
                              point.tpot_ms.p90 / 1e3, point.output_tokens_per_s,
                              f"measured on {engine.name} {engine.version} at concurrency "
                              f"{point.concurrency}, {point.requests} requests")  # fmt: skip
    return out


def _point(points: list[ServingPoint], w: Workload) -> ServingPoint | None:
    """The run at the user's concurrency and request shape, if some request streamed."""
    for point in points:
        if (
            point.concurrency == w.concurrency
            and (point.prompt_tokens, point.output_tokens) == (w.prompt_tokens, w.output_tokens)
            and point.requests
            and (not point.streamed or any(point.streamed))
        ):
            return point
    return None


def quality(
    engine: EngineResult | None, quantization: QuantizationResult | None = None
) -> dict[str, str]:
    """The measured quality of each format, as its caveat: the engine's where it served
    the format, else the quantization experiment's (real weights only)."""
    out = eager_quality(quantization)
    if engine is None:
        return out
    for q in engine.quantization:
        key = ENGINE_FORMATS.get(q.method)
        if key is None or q.status != "ran" or not q.perplexity or not q.reference_perplexity:
            continue
        change = q.perplexity / q.reference_perplexity - 1
        text = (f"{q.method} measured on {engine.name}: perplexity "
                f"{q.reference_perplexity:.3g} → {q.perplexity:.3g} ({change:+.1%})")  # fmt: skip
        if q.greedy_agreement is not None:
            text += f", {q.greedy_agreement:.0%} of greedy output equal"
        out[key] = text
    return out


def eager_quality(result: QuantizationResult | None) -> dict[str, str]:
    """Each weight format's measured quality from the quantization experiment: its best
    measured variant (the smallest perplexity increase) against the reference."""
    reference = result.reference_variant if result else None
    if result is None or not result.quality_meaningful or reference is None:
        return {}
    best: dict[str, QuantVariant] = {}
    for v in result.variants:
        key = EAGER_FORMATS.get(v.precision)
        if key is None or v.status != MEASURED_VARIANT or v.is_reference or not v.perplexity:
            continue
        if key not in best or v.perplexity < (best[key].perplexity or float("inf")):
            best[key] = v
    out: dict[str, str] = {}
    for key, v in best.items():
        assert v.perplexity is not None
        text = f"{v.name} measured by the quantization experiment"
        if reference.perplexity:
            change = v.perplexity / reference.perplexity - 1
            text += (f": perplexity {reference.perplexity:.3g} → {v.perplexity:.3g} "
                     f"({change:+.1%}) against {reference.name}")  # fmt: skip
        if v.top1_agreement is not None:
            text += f", top-1 agreement {v.top1_agreement:.1%}"
        out[key] = text
    return out


def measured_acceptance(result: SpeculativeResult | None) -> tuple[float | None, str, str]:
    """(acceptance per drafted token, its basis, the draft) of the experiment's best
    point, where it measured a meaningful acceptance."""
    if result is None or not result.acceptance_meaningful or not result.sweeps:
        return None, "", ""
    best = max(result.sweeps, key=lambda p: p.speedup)
    return best.acceptance_rate, "measured by the speculative experiment", best.draft


def engine_acceptance(engine: EngineResult | None) -> tuple[float | None, str, str]:
    """(acceptance per drafted token, its basis, the draft) of the engine's draft model,
    where it ran with the plain server's greedy output."""
    points = [
        p for p in (engine.speculative if engine else [])
        if p.method == "draft_model" and p.status == "ran" and p.acceptance_rate is not None
        and p.output_matches is not False
    ]  # fmt: skip
    if engine is None or not points:
        return None, "", ""
    best = max(points, key=lambda p: p.speedup or 0.0)
    basis = f"measured on {engine.name} {engine.version} (k={best.k})"
    return best.acceptance_rate, basis, best.draft or "draft model"


def search(
    facts: Facts,
    model: str,
    deployment: Hardware | None,
    speculative: SpeculativeResult | None = None,
    engine: EngineResult | None = None,
    quantization: QuantizationResult | None = None,
    capacity_for: int | None = None,
) -> Deployments | None:
    """The ranked deployments with their launch commands (None where not searchable);
    `capacity_for`: as `profiling.projection.deployments.deployments`."""
    sc = scenario(facts, deployment, speculative, engine, quantization)
    if sc is None:
        return None
    hourly = deployment.gpu_hourly_usd if deployment else None
    found = deployments(sc, hourly, capacity_for)
    # The measured engine's version checks the flags only where it is the one deployed on.
    version = engine.version if engine and engine.name == sc.engine else None
    found.commands = [command(model, e.configuration, version, sc.engine) for e in found.ranked]
    at = limits(sc.gpu, sc.engine, tp=sc.current.tp, pp=sc.current.pp)
    share = ", that memory share at your layout's TP × PP" if at.memory == STATIC else ""
    found.notes.append(f"every configuration served on {at.note()}{share}")
    w = facts.workload
    if w.ttft_ms or w.tpot_ms:
        facts.meets_on_your_gpus = any(e.meets for e in found.ranked if e.on_your_gpus)
    return found


def command(
    model: str,
    configuration: Configuration,
    engine_version: str | None = None,
    serving_engine: str = DEFAULT_ENGINE,
) -> dict[str, Any]:
    """The serving engine's launch command for `configuration` (or why there is none),
    with the flags of the engine version the job's worker ran, where it ran one."""
    if serving_engine != DEFAULT_ENGINE:
        return projected_commands.launch_command(serving_engine, model, configuration).to_dict()
    return launch_command(model, configuration, engine_version=engine_version).to_dict()


def headline(found: Deployments) -> str:
    """The first configuration of the user's GPUs in one line, with its headroom."""
    first, sc = found.first, found.scenario
    if first is None:
        return ""
    assert found.pick is not None
    where = f"on your {sc.gpu_count}× {sc.gpu.key}"
    # The report's units, so the figures read the same here as in its deployments section.
    figures = (
        f"TPOT p90 {ms(first.tpot_p90)}, TTFT p90 {ms(first.ttft_p90)}, "
        f"{tok_s(first.throughput)} output"
    )
    text = f"Deployments searched: {where}, {first.configuration.name} ({first.basis}): {figures}"
    room = found.headroom(found.pick)
    return text + (f"; {room}" if room else "") + "."
