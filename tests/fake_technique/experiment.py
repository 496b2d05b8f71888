"""The fake technique's experiment: counts the loaded model's parameters."""

from __future__ import annotations

from profiling.technique_kit.context import ExperimentContext
from tests.fake_technique.results import FakeResult


def run(context: ExperimentContext) -> FakeResult:
    sizes = [(name, p.numel()) for name, p in context.loaded.model.named_parameters()]
    largest = sorted(sizes, key=lambda s: (-s[1], s[0]))[: context.config.fake_largest]
    total = sum(n for _, n in sizes)
    return FakeResult(total, [list(s) for s in largest], f"{total:,} parameters")
