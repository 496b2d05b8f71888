"""The registry of optional experiments, and the contract they follow.

The baseline (prefill and decode sweeps) always runs; it lives in
`profiling.experiments.baseline` and is called by the runner directly.
Optional experiments are looked up by name in `REGISTRY`, an explicit dict:
a name listed in `profiling.config.EXPERIMENT_NAMES` but missing here is
refused with a `ConfigError`, so nothing ever reports results it did not
measure. An experiment is a function `(ExperimentContext) -> dict` whose
dict (JSON-able, usually a result dataclass's `to_dict()`) is stored under
its name in `Profile.experiments`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiling.config import ConfigError, ProfileConfig
from profiling.profile import Profile
from profiling.progress import Progress
from profiling.timing import Clock


@dataclass
class ExperimentContext:
    """What an optional experiment gets: the loaded model and the baseline."""

    config: ProfileConfig
    loaded: Any  # profiling.loading.Loaded
    device: str
    dtype: str
    clock: Clock
    progress: Progress  # fraction 0..1 of this experiment's own share
    profile: Profile  # the baseline profile measured so far


Experiment = Callable[[ExperimentContext], Any]  # a technique's typed result


def _speculative(context: ExperimentContext) -> Any:
    from profiling.experiments import speculative

    config = context.config
    return speculative.run_for_context(
        context,
        draft_name=config.draft,
        ks=config.spec_ks or None,
        prompt_lookup=config.prompt_lookup,
    )


def _quantization(context: ExperimentContext) -> Any:
    from profiling.experiments import quantization

    return quantization.run_for_context(context)


def _caching(context: ExperimentContext) -> Any:
    from profiling.experiments import caching

    return caching.run_for_context(context)


def _parallel(context: ExperimentContext) -> Any:
    from profiling.experiments import parallel

    result = parallel.run_for_context(context)
    # Disaggregation is reported beside it, at the top level of the profile JSON
    # (see profiling.experiments.parallel); the runner then stores "parallel".
    context.profile.experiments.disaggregation = result.disaggregation
    return result


REGISTRY: dict[str, Experiment] = {
    "caching": _caching,
    "parallel": _parallel,
    "quantization": _quantization,
    "speculative": _speculative,
}


def get_experiment(name: str) -> Experiment:
    """The registered experiment `name`; a ConfigError if it is not available."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"experiment {name} is not available in this version") from None
