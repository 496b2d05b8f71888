"""Progress callbacks: how a measurement tells its caller how far it got.

`progress(phase, fraction, message)`, with `fraction` 0..1 of the whole run
when the runner passes it on, or of the callee's own share (see `span`).
Below every technique, so loading, timing and experiments can all report.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, float, str], None]


def span(progress: Progress, start: float, end: float) -> Progress:
    """A progress callback whose 0..1 maps onto `start`..`end` of `progress`."""

    def scaled(phase: str, fraction: float, message: str) -> None:
        clamped = min(1.0, max(0.0, fraction))
        progress(phase, start + (end - start) * clamped, message)

    return scaled


def ticker(progress: Progress | None, phase: str, total: int) -> Callable[[str], None]:
    """`tick(message)` reports one more of `total` equal steps of `phase` as done."""
    done = [0]

    def tick(message: str) -> None:
        done[0] += 1
        if progress is not None:
            progress(phase, min(1.0, done[0] / max(1, total)), message)

    return tick


def no_progress(phase: str, fraction: float, message: str) -> None:
    """A progress callback that ignores everything."""
