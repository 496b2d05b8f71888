"""What a technique is: `Technique`, declared once in its own folder (`technique.py`).

A declaration names everything the rest of the project derives from it: its name and label,
the switch a job turns it on with, its options (`profiling.option_type.Option`: name, type,
range, default, help), the experiment it runs, the rule that advises on it, its result's type
and the report section its folder draws. The experiment, the rule, the result and the section
are named by dotted path ("package.module:attribute") and imported on first use, so reading
the declarations (the site's form, its API schema, the command lines) imports no torch-side
module.

A folder's `technique.py` imports only this module, `profiling.option_type` and
`profiling.options`' vocabularies: the options are read while `profiling.config` is still
being imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from profiling.option_type import Option

if TYPE_CHECKING:  # the types only: importing them here would circle through the config
    from profiling.technique_kit.advice_results import QualityTolerance
    from profiling.technique_kit.context import ExperimentContext
    from profiling.technique_kit.facts import Facts
    from profiling.technique_kit.report_section import ReportSection
    from profiling.technique_kit.rule_kit import Outcome

# What a technique's experiment measures: its typed result, stored under its name.
Result = TypeVar("Result")


def resolve(path: str) -> Any:
    """The attribute a dotted path names: "profiling.caching.experiment:run_for_context"."""
    module, _, attribute = path.partition(":")
    if not module or not attribute:
        raise ValueError(f"{path!r} is not a path of the form package.module:attribute")
    return getattr(importlib.import_module(module), attribute)


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
    # "module:Class" of its typed result (a dataclass of `profiling.serde`'s kinds; the
    # module imports no torch: the site reads it).
    result_path: str
    # "module:function": the rule, (facts, its result or None, the bottleneck, the
    # quality tolerance) -> recommendations and what is not recommended; "" where the
    # technique's outcome joins the advice another way (conversations: the host tier, from
    # its section, `profiling.advice.job_conversations`).
    advise_path: str
    # "module:function": the experiment, (ExperimentContext) -> its result; "" for a
    # technique measured by another one's experiment (disaggregation, by parallel's).
    run_path: str = ""
    switch: Switch | None = None  # None: no switch of its own (measured with another)
    # The heading of its group on the new-job form, in the words of the problem it solves;
    # its label where empty.
    heading: str = ""
    # Its options, in the order the form, the API and the command line show them; each
    # Option's `family` is the technique's name.
    options: tuple[Option, ...] = ()
    # "module:function": (its result) -> ReportSection, the section a report draws for it
    # where the site has no page part of its own for this technique; "" for none.
    section_path: str = ""
    # Planned work, for the progress bar: seconds a quick demo run spends on it on two
    # CPU cores, against LOAD_WORK and BASELINE_WORK (profiling.runner); only the
    # ratios matter. Measured with a quick demo profile running every experiment.
    work: float = 0.0
    # It loads weights of its own (each variant) and never runs the reference: the
    # reference leaves the GPU while it runs (profiling.measure.resident). The parallel
    # experiment sets it aside itself, around its torchrun ranks only.
    own_weights: bool = False
    # Where another technique's experiment measures it: that technique's name, whose result
    # carries this one's as its attribute of this name (disaggregation: "parallel").
    measured_by: str = ""
    # What the advice says where it did not run: how a job would measure it ("": it is not
    # listed as missing, as a technique the workload asks for, not the job).
    missing_hint: str = ""

    @property
    def switch_name(self) -> str:
        """Its switch's field on the form, in the API and in the job row."""
        return f"run_{self.name}"

    @property
    def run(self) -> Callable[[ExperimentContext], Result] | None:
        """Its experiment, or None where another technique's measures it."""
        return resolve(self.run_path) if self.run_path else None

    @property
    def advise(
        self,
    ) -> Callable[[Facts, Result | None, str, QualityTolerance], list[Outcome]] | None:
        """Its rule, or None where it has none the advice runs."""
        return resolve(self.advise_path) if self.advise_path else None

    @property
    def result_type(self) -> type[Result]:
        return resolve(self.result_path)

    def section(self, result: Result) -> ReportSection | None:
        """The report section its folder draws for `result`, or None where it has none."""
        return resolve(self.section_path)(result) if self.section_path else None
