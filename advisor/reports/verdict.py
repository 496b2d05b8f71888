"""Plain-language lines for the measured verdict.

The profiler decides (`Profile.verdict`); these helpers only say it in words,
with the report's units, so the template stays free of branching.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.config import BOTTLENECK_LABELS
from profiling.results import FitCheck, PhaseVerdict
from profiling.units import ms, pct, size

# What each measured finding points at, in the words of the form's choices.
DOMINANT_LABELS = {
    "prefill": "Prompt processing (prefill) dominates",
    "decode": "Token generation (decode) dominates",
}


@dataclass(frozen=True)
class TargetLine:
    """One latency figure against the user's target; `meets` None = no target."""

    name: str
    measured: str
    target: str
    meets: bool | None

    @property
    def status(self) -> str:
        if self.meets is None:
            return "no target set"
        return "meets the target" if self.meets else "misses the target"


def phase_split(verdict: PhaseVerdict) -> str:
    return (
        f"Prefill is {pct(verdict.prefill_share)} and decode {pct(verdict.decode_share)} of one "
        f"request's {ms(verdict.end_to_end_seconds)} end to end "
        f"({verdict.prompt_tokens} prompt → {verdict.output_tokens} output tokens, "
        f"{verdict.concurrency} concurrent)."
    )


def targets(
    verdict: PhaseVerdict, ttft_target_ms: float | None, tpot_target_ms: float | None
) -> list[TargetLine]:
    return [
        TargetLine("Time to first token", ms(verdict.ttft_ms, "ms"), ms(ttft_target_ms, "ms"),
                   verdict.ttft_meets_target),
        TargetLine("Time per output token", ms(verdict.tpot_ms, "ms"), ms(tpot_target_ms, "ms"),
                   verdict.tpot_meets_target),
    ]  # fmt: skip


def fit_line(fit: FitCheck | None) -> str:
    if fit is None:
        return "No target GPU was chosen, so no fit check was made."
    where = f"{fit.gpu_count} × {fit.gpu_kind}"
    need = f"needs {size(fit.required_bytes)} of {size(fit.available_bytes)} usable"
    if fit.fits:
        return (
            f"Fits on {where}: {need}, {size(fit.headroom_bytes)} to spare; "
            f"up to {fit.max_concurrency:,} concurrent requests of {fit.context_tokens:,} tokens."
        )
    return (
        f"Does not fit on {where}: {need}. At most {fit.max_concurrency:,} concurrent requests "
        f"of {fit.context_tokens:,} tokens fit."
    )


def stated_label(stated_bottleneck: str) -> str:
    return BOTTLENECK_LABELS.get(stated_bottleneck, BOTTLENECK_LABELS["unsure"])


def measured_label(verdict: PhaseVerdict, fit: FitCheck | None) -> str:
    parts = [DOMINANT_LABELS.get(verdict.dominant, verdict.dominant)]
    if fit is not None and not fit.fits:
        parts.append("and the workload does not fit in memory")
    return " ".join(parts)
