"""The engine's Prometheus `/metrics` text, parsed to sums per metric name.

Counters are read before and after a run and subtracted (`delta`), so figures
belong to that run alone, not to the warm-up or an earlier run on the same
server. Series of one name are summed over their labels (several engine cores),
except the per-position acceptance counter (the engine names it), kept per
`position`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Metrics:
    values: dict[str, float] = field(default_factory=dict)
    by_position: dict[int, float] = field(default_factory=dict)

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)

    def delta(self, before: Metrics) -> Metrics:
        return Metrics(
            {k: v - before.get(k) for k, v in self.values.items()},
            {k: v - before.by_position.get(k, 0.0) for k, v in self.by_position.items()},
        )


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample line of the text: its metric name, labels and value. Label values
    may hold braces (an info metric's values are repr()s): the labels run to the line's
    last closing brace, and the value follows it."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, brace, rest = line.partition("{")
        end = rest.rfind("}")
        if brace and " " not in head and end >= 0:
            name, labels, tail = head, rest[:end], rest[end + 1 :]
        else:
            name, _, tail = line.partition(" ")
            labels = ""
        if not _NAME.fullmatch(name):
            continue
        try:
            value = float(tail.split()[0])
        except (ValueError, IndexError):
            continue
        out.append((name, dict(_LABEL.findall(labels)), value))
    return out


def parse_metrics(text: str, per_position: str = "") -> Metrics:
    out = Metrics()
    for name, labels, value in samples(text):
        if per_position and name == per_position:
            position = labels.get("position", "")
            if position.isdigit():
                key = int(position)
                out.by_position[key] = out.by_position.get(key, 0.0) + value
            continue
        out.values[name] = out.values.get(name, 0.0) + value
    return out


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every series of metric `name`: its labels and its value."""
    return [(labels, value) for n, labels, value in samples(text) if n == name]


def by_label(text: str, name: str, label: str) -> dict[str, float]:
    """Metric `name` summed per value of one `label` (the other labels summed over)."""
    out: dict[str, float] = {}
    for labels, value in series(text, name):
        key = labels.get(label, "")
        out[key] = out.get(key, 0.0) + value
    return out
