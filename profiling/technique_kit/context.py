"""What every optional experiment is given: `ExperimentContext`.

Here, below the technique folders, so that each technique's `experiment.py` names the type
it is called with. The baseline profile it reads is `Baseline`: the measured figures a
technique's plan is costed from and sized by, which `profiling.profile.Profile` has (the
technique folders never import the profile itself). The loaded model's type is named for
the checker only: importing `profiling.model.loading` imports torch, and this module is
imported where torch is not wanted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from profiling.config import ProfileConfig
from profiling.measure.progress import Progress
from profiling.measure.timing import Clock
from profiling.model.info import ModelInfo
from profiling.results import DecodePoint, Environment, MemoryResult, PrefillPoint

if TYPE_CHECKING:  # torch: profiling.model.loading imports it
    from profiling.model.loading import Loaded


class Baseline(Protocol):
    """The baseline an experiment reads: what was loaded, where, its memory and its sweeps."""

    model: ModelInfo
    environment: Environment
    memory: MemoryResult
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]


@dataclass
class ExperimentContext:
    """What an optional experiment gets: the loaded model and the baseline."""

    config: ProfileConfig
    loaded: Loaded
    device: str
    dtype: str
    clock: Clock
    progress: Progress  # fraction 0..1 of this experiment's own share
    profile: Baseline  # the baseline profile measured so far
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
