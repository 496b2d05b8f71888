"""The fake technique's result."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FakeResult:
    parameters: int
    largest: list[tuple[str, int]] = field(default_factory=list)  # (tensor, its elements)
    finding: str = ""
