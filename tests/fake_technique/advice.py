"""The fake technique's rule: it recommends nothing."""

from __future__ import annotations

from typing import Any

from profiling.technique_kit.rule_kit import Outcome


def advise(facts: Any, result: Any, bottleneck: str, tolerance: Any) -> list[Outcome]:
    return []
