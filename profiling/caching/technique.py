"""Prefix caching, as the registry knows it (`profiling.techniques`): its switch. Its one
input beside the workload, the user's prompt sample, is a file, not an option: the config's
`prompt_sample`, read by `profiling.caching.sample`."""

from __future__ import annotations

from profiling.technique_type import Switch, Technique

CACHING: Technique = Technique(
    "caching", "Prefix caching",
    result_path="profiling.caching.results:CachingResult",
    advise_path="profiling.caching.advice:caching",
    run_path="profiling.caching.experiment:run_for_context",
    switch=Switch("Measure prefix caching",
                  "Time to first token with a cached prefix against the whole prompt cold, "
                  "over prefix shares and conversation turns, outputs checked equal."),
    heading="Reuse prompt work (prefix caching)",
    work=2.0,
    missing_hint="send a prompt sample or a shared prefix to measure the reuse",
)  # fmt: skip
