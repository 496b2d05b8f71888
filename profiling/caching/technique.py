"""Prefix caching and conversations, as the registry knows them (`profiling.techniques`).

Prefix caching has a switch; its one input beside the workload, the user's prompt sample, is
a file, not an option: the config's `prompt_sample`, read by `profiling.caching.sample`.
Conversations have none: a workload of several turns (its options are the workload's and
the deployment's: turns, think time, host memory) or a conversation file asks for them, and
the runner's conversation step replays them (`profiling.advice.job_conversations`)."""

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

CONVERSATIONS: Technique = Technique(
    "conversations", "Conversations and the KV cache's memory",
    result_path="profiling.caching.results:ConversationsResult",
    # Its outcome, the host tier, is ranked among the advice with its section.
    advise_path="",
)  # fmt: skip
