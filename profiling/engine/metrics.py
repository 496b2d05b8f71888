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

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')


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


def parse_metrics(text: str, per_position: str = "") -> Metrics:
    out = Metrics()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        name, labels, raw = match.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        if per_position and name == per_position:
            position = _POSITION.search(labels or "")
            if position:
                key = int(position.group(1))
                out.by_position[key] = out.by_position.get(key, 0.0) + value
            continue
        out.values[name] = out.values.get(name, 0.0) + value
    return out


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every series of metric `name`: its labels and its value."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        # Label values may hold braces (an info metric's values are repr()s): the labels
        # run to the last closing brace, and the value follows it.
        labels, value = "", line[len(name) :]
        if value.startswith("{"):
            end = value.rfind("}")
            labels, value = value[1:end], value[end + 1 :]
        try:
            out.append((dict(_LABEL.findall(labels)), float(value.split()[0])))
        except (ValueError, IndexError):
            continue
    return out


def by_label(text: str, name: str, label: str) -> dict[str, float]:
    """Metric `name` summed per value of one `label` (the other labels summed over)."""
    out: dict[str, float] = {}
    for labels, value in series(text, name):
        key = labels.get(label, "")
        out[key] = out.get(key, 0.0) + value
    return out
