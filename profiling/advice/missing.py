"""What the advice could not judge from a measurement: the techniques no experiment ran for."""

from __future__ import annotations

from profiling.profile import Experiments
from profiling.technique_kit.advice_results import MissingExperiment, NotRecommended, Recommendation
from profiling.technique_kit.facts import Facts
from profiling.techniques import techniques


def missing(
    facts: Facts,
    ran: Experiments,
    recommendations: list[Recommendation],
    refused: list[NotRecommended],
    on_engine: set[str] | None = None,
) -> list[MissingExperiment]:
    judged = {r.technique for r in recommendations} | {r.technique for r in refused}
    out = []
    for technique, hint in ((t.name, t.missing_hint) for t in techniques()):
        if not hint or ran[technique] is not None or technique in (on_engine or set()):
            continue
        how = "estimated" if technique in judged else "not judged"
        lead = "not run in this job" if facts.measured else "no experiment runs in an estimate"
        then = "an estimate stands in (marked estimated)" if how == "estimated" else "not judged"
        note = f"{lead}: {then}; {hint}"
        out.append(MissingExperiment(technique, how, note))
    return out
