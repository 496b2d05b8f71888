"""The baseline's sweeps (`baseline.py`, `baseline_plan.py`), and what every optional
experiment is given.

The baseline (prefill and decode sweeps) always runs, called by the runner
directly. The optional experiments live in their technique's folder
(`profiling/<technique>/experiment.py`) and are listed in `profiling.techniques`:
a name the config asks for that has no experiment there is refused with a
`ConfigError`, so nothing ever reports results it did not measure. An
experiment is a function `(ExperimentContext) -> result`; its typed result is
stored under its name in `Profile.experiments`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profiling.config import ProfileConfig
from profiling.measure.progress import Progress
from profiling.measure.timing import Clock
from profiling.profile import Profile


@dataclass
class ExperimentContext:
    """What an optional experiment gets: the loaded model and the baseline."""

    config: ProfileConfig
    loaded: Any  # profiling.model.loading.Loaded
    device: str
    dtype: str
    clock: Clock
    progress: Progress  # fraction 0..1 of this experiment's own share
    profile: Profile  # the baseline profile measured so far
    # Where an experiment may leave files for a later step of the same run (the
    # quantization's GPTQ checkpoint for the engine), and what it left there by name;
    # None when no later step asked for any. Deleted when the run ends.
    artifacts_dir: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    # Seconds this experiment may take: its share of the profile's time budget (on CUDA;
    # None on CPU, where nothing is cut). See profiling.runner.PROFILE_BUDGET_S.
    budget_s: float | None = None
    # The baseline's compiled forward of the loaded model (profiling.measure.decode_path),
    # so an experiment timing decode steps on the same path reuses it, not compiles again.
    compiled: dict[str, Any] = field(default_factory=dict)


Experiment = Callable[[ExperimentContext], Any]  # a technique's typed result
