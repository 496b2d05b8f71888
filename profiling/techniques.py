"""The registry of techniques: what each one measures and how it is advised.

Each technique has a folder, `profiling/<name>/`: its experiment (plan → run →
typed result, `experiment.py`), its typed result (`results.py`), the text its
report draws (`report.py`) and its advice rule (`advice.py`). The runner runs
the experiments of this list that the config asks for, and the advice runs every
rule of it. Each technique's switch (its `run_<name>` checkbox, label and help) is
declared here, and the form's checkboxes and the job row's stored switches derive
from it; the API's request type names each switch with the label from here (a test
holds all three to this list). It is not yet the only place that names them: the
config's `EXPERIMENT_NAMES`, `Profile`'s experiments, the API's request type and
the site's report views, summary and templates name each technique too, so a new
technique is a folder, a line here and those places. A technique with no experiment of its own
(disaggregation, measured by the parallel experiment) has `run` None.

Import order: config → measurements → technique folders → this registry →
advice and runner → presentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from profiling.caching import advice as caching_advice
from profiling.caching import experiment as caching
from profiling.caching.results import CachingResult
from profiling.config import ConfigError
from profiling.parallel import advice as parallel_advice
from profiling.parallel import experiment as parallel
from profiling.parallel.results import DisaggregationResult, ParallelResult
from profiling.profile import Profile
from profiling.quantization import advice as quantization_advice
from profiling.quantization import experiment as quantization
from profiling.quantization.results import QuantizationResult
from profiling.speculative import advice as speculative_advice
from profiling.speculative import experiment as speculative
from profiling.speculative.results import SpeculativeResult
from profiling.technique_kit.advice_results import QualityTolerance
from profiling.technique_kit.context import ExperimentContext
from profiling.technique_kit.facts import Facts
from profiling.technique_kit.rule_kit import Outcome

# What a technique's experiment measures: its typed result, stored under its name.
Result = TypeVar("Result")
TechniqueResult = (
    QuantizationResult | SpeculativeResult | CachingResult | ParallelResult | DisaggregationResult
)
# The experiment: the context in, its typed result out.
Experiment = Callable[[ExperimentContext], TechniqueResult]


@dataclass(frozen=True)
class Switch:
    """How a job asks for a technique's experiment: a checkbox on the form, a boolean in
    the API and the job row (`run_<name>`), with its label and what it measures."""

    label: str
    help: str


@dataclass(frozen=True)
class Technique(Generic[Result]):
    name: str  # its key in Profile.experiments, the JSON and the config's experiments
    label: str
    run: Callable[[ExperimentContext], Result] | None
    # The rule: (facts, its result or None, the bottleneck, the quality tolerance) ->
    # recommendations and what is not recommended.
    advise: Callable[[Facts, Result | None, str, QualityTolerance], list[Outcome]]
    # Planned work, for the progress bar: seconds a quick demo run spends on it on two
    # CPU cores, against LOAD_WORK and BASELINE_WORK (profiling.runner); only the
    # ratios matter. Measured with a quick demo profile running every experiment.
    work: float = 0.0
    # It loads weights of its own (each variant) and never runs the reference: the
    # reference leaves the GPU while it runs (profiling.measure.resident). The parallel
    # experiment sets it aside itself, around its torchrun ranks only.
    own_weights: bool = False
    switch: Switch | None = None  # None: no switch of its own (measured with another)

    @property
    def switch_name(self) -> str:
        """Its switch's field on the form, in the API and in the job row."""
        return f"run_{self.name}"


def _run_speculative(context: ExperimentContext) -> SpeculativeResult:
    config = context.config
    return speculative.run_for_context(
        context, draft_name=config.draft, ks=config.spec_ks or None,
        prompt_lookup=config.prompt_lookup,
    )  # fmt: skip


def _run_parallel(context: ExperimentContext) -> ParallelResult:
    result = parallel.run_for_context(context)
    # Disaggregation is measured here and kept beside it (its own key in the JSON), in the
    # profile the runner gives every experiment.
    assert isinstance(context.profile, Profile)
    context.profile.experiments.disaggregation = result.disaggregation
    return result


TECHNIQUES: tuple[Technique, ...] = (  # each typed by its own result
    Technique("quantization", "Quantization", quantization.run_for_context,
              quantization_advice.quantization, work=2.0, own_weights=True,
              switch=Switch("Measure quantization",
                            "Memory, speed and quality per precision against the reference, "
                            "with greedy outputs side by side.")),
    Technique("speculative", "Speculative decoding", _run_speculative,
              speculative_advice.speculative, work=11.0,
              switch=Switch("Measure speculative decoding",
                            "Acceptance and speedup per draft length K, with a token trace.")),
    Technique("caching", "Prefix caching", caching.run_for_context, caching_advice.caching,
              work=2.0,
              switch=Switch("Measure prefix caching",
                            "Time to first token with a cached prefix against the whole prompt "
                            "cold, over prefix shares and conversation turns, outputs checked "
                            "equal.")),
    Technique("parallel", "Parallelism across devices", _run_parallel, parallel_advice.parallel,
              work=0.5,
              switch=Switch("Measure parallelism and disaggregation",
                            "Per-device memory of tensor × pipeline splits and the fewest "
                            "devices that fit; how much a prefill joining decode steps slows "
                            "them, and the prefill : decode worker ratio and KV transfer of a "
                            "split deployment.")),
    Technique("disaggregation", "Prefill/decode disaggregation", None,
              parallel_advice.disaggregation),
)  # fmt: skip
BY_NAME = {t.name: t for t in TECHNIQUES}


def experiment(name: str) -> Experiment:
    """The experiment `name` runs; a ConfigError if this version has none by that name."""
    technique = BY_NAME.get(name)
    if technique is None or technique.run is None:
        raise ConfigError(f"experiment {name} is not available in this version")
    return technique.run
