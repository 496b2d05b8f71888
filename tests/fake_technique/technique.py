"""The fake technique's declaration: its switch, one option, and the paths of the rest."""

from __future__ import annotations

from profiling.option_type import INT, Option
from profiling.technique_type import Switch, Technique

FAKE: Technique = Technique(
    "fake", "Parameter count",
    result_path="tests.fake_technique.results:FakeResult",
    advise_path="tests.fake_technique.advice:advise",
    run_path="tests.fake_technique.experiment:run",
    switch=Switch("Count the parameters", "Counts the loaded model's parameters, by tensor."),
    heading="Count parameters (a test's technique)",
    options=(
        Option("fake_largest", "fake", INT, 3, "Largest tensors to list",
               "How many of the largest tensors the section lists.", "--fake-largest",
               low=1, high=20, unit="tensors"),
    ),
    section_path="tests.fake_technique.report:section",
    work=0.1,
    missing_hint="tick it to count them",
)  # fmt: skip
