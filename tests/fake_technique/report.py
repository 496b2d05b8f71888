"""The fake technique's report section."""

from __future__ import annotations

from profiling.technique_kit.report_section import ReportSection
from tests.fake_technique.results import FakeResult


def section(result: FakeResult) -> ReportSection:
    return ReportSection(
        result.finding,
        [("Parameters", f"{result.parameters:,}")]
        + [(f"Tensor {name}", f"{count:,} elements") for name, count in result.largest],
        ["Counted from the loaded model's tensors."],
    )
