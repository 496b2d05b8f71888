"""The advice and the predictions in plain text, for the command line."""

from __future__ import annotations

from profiling.technique_kit.advice_results import Advice, PredictionPoint
from profiling.technique_kit.rule_kit import ms
from profiling.units import size


def render_advice(advice: Advice) -> list[str]:
    """Lines of the advice: bottleneck, ranked recommendations, refusals."""
    lines = ["", f"Advice ({advice.basis})", f"  {advice.summary}"]
    if advice.stated_bottleneck != "unsure":
        lines.append(f"  you said: {advice.stated_bottleneck}; {advice.agreement_note}")
    for i, rec in enumerate(advice.recommendations, 1):
        lines.append(f"  {i}. {rec.technique}: {rec.setting} [{rec.basis}]")
        lines.append(f"     {rec.expected_effect.text}")
        lines += [f"     evidence {e.key}: {e.figure}" for e in rec.evidence]
        lines += [f"     caveat: {c}" for c in rec.caveats]
    for item in advice.not_recommended:
        lines.append(f"  not {item.technique}: {item.why}")
    for item in advice.experiments_missing:
        lines.append(f"  {item.technique}: {item.note}")
    return lines


def render_predictions(predictions: list[PredictionPoint]) -> list[str]:
    lines = ["", "Predictions"]
    for p in predictions:
        at = ", ".join(f"{k} {v}" for k, v in p.at.items() if k != "device")
        value = _value(p.predicted, p.unit)
        if p.measured is None or p.error is None:
            band = f" {p.published_error_text}" if p.published_error else ""
            lines.append(f"  {p.metric} at {at}: {value} [{p.basis}{band}]")
            continue
        lines.append(
            f"  {p.metric} at {at}: {value}, measured {_value(p.measured, p.unit)}, "
            f"error {p.error:+.1%} [{p.basis}]"
        )
    return lines


def _value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{ms(value)} ms"
    if unit == "bytes":
        return size(value)
    return f"{value:,.1f} {unit}"
