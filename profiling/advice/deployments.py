"""The deployment search for the advice: the scenario from the facts, the user's current
deployment and what the experiments measured; the launch command of each
configuration; the ranking rule the recommendations follow.

The ranking: what needs no GPUs beyond the user's first; then what acts on the
bottleneck; then what meets the user's targets (a recommendation's own figures, or
its technique's section saying it cannot); measured before estimated; then the gain.
"""

from __future__ import annotations

from typing import Any

from profiling.advice_kit.advice_results import MEASURED, Recommendation
from profiling.advice_kit.facts import Facts
from profiling.config import Hardware, Workload
from profiling.projection.configurations import Configuration
from profiling.projection.deployments import Deployments, deployments
from profiling.projection.search import Scenario
from profiling.speculative.results import SpeculativeResult


def scenario(
    facts: Facts, deployment: Hardware | None, speculative: SpeculativeResult | None = None
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
    if acceptance is None and facts.spec_acceptance is not None:
        acceptance, basis, draft = facts.spec_acceptance, "given", "draft head"
    dtype = facts.dtype if facts.dtype in ("bfloat16", "float16") else "bfloat16"
    return Scenario(facts.shapes, facts.gpu, count, dtype, facts.workload, current,
                    acceptance, basis, draft or "draft head")  # fmt: skip


def measured_acceptance(result: SpeculativeResult | None) -> tuple[float | None, str, str]:
    """(acceptance per drafted token, its basis, the draft) of the experiment's best
    point, where it measured a meaningful acceptance."""
    if result is None or not result.acceptance_meaningful or not result.sweeps:
        return None, "", ""
    best = max(result.sweeps, key=lambda p: p.speedup)
    return best.acceptance_rate, "measured by the speculative experiment", best.draft


def search(
    facts: Facts,
    model: str,
    deployment: Hardware | None,
    speculative: SpeculativeResult | None = None,
) -> Deployments | None:
    """The ranked deployments with their launch commands (None where not searchable)."""
    sc = scenario(facts, deployment, speculative)
    if sc is None:
        return None
    found = deployments(sc, deployment.gpu_hourly_usd if deployment else None)
    found.commands = [command(model, e.configuration) for e in found.ranked]
    w = facts.workload
    if w.ttft_ms or w.tpot_ms:
        facts.meets_on_your_gpus = any(e.meets for e in found.ranked if e.on_your_gpus)
    return found


def command(model: str, configuration: Configuration) -> dict[str, Any] | None:
    """The engine's launch command for `configuration`, where the command builder exists."""
    try:
        from profiling.engine.commands import launch_command  # type: ignore[import-not-found]
    except ImportError:
        return None
    return launch_command(model, configuration).to_dict()


def headline(found: Deployments) -> str:
    """The first configuration of the user's GPUs in one line, with its headroom."""
    first, sc = found.first, found.scenario
    if first is None:
        return ""
    assert found.pick is not None
    where = f"on your {sc.gpu_count}× {sc.gpu.key}"
    figures = (
        f"TPOT p90 {first.tpot_p90 * 1e3:.3g} ms, TTFT p90 {first.ttft_p90 * 1e3:.3g} ms, "
        f"{first.throughput:,.0f} output tok/s"
    )
    text = f"Deployments searched: {where}, {first.configuration.name} ({first.basis}): {figures}"
    room = found.headroom(found.pick)
    return text + (f"; {room}" if room else "") + "."


def meets(r: Recommendation, w: Workload) -> bool | None:
    """Whether `r` meets the targets: its own flag, else its expected TPOT and TTFT."""
    if r.meets_targets is not None or not (w.tpot_ms or w.ttft_ms):
        return r.meets_targets
    after = {c.metric: c.after for c in r.expected_effect.changes}
    verdicts = [after["tpot_ms"] <= w.tpot_ms for _ in [0] if w.tpot_ms and "tpot_ms" in after]
    verdicts += [after["ttft_ms"] <= w.ttft_ms for _ in [0] if w.ttft_ms and "ttft_ms" in after]
    if not verdicts:
        return None
    return all(verdicts)


def rank(
    recommendations: list[Recommendation], bottleneck: str, w: Workload | None = None
) -> list[Recommendation]:
    """The ranking the module's docstring states; a recommendation that meets the
    targets before one of unknown effect on them, before one that misses them."""
    order = {True: 0, None: 1, False: 2}

    def key(r: Recommendation) -> tuple:
        met = order[meets(r, w)] if w is not None else 1
        return (r.more_hardware, r.serves != bottleneck, met, r.basis != MEASURED, -r.gain)

    return sorted(recommendations, key=key)
