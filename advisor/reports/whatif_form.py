"""The what-if form on the report page: GET parameters prefixed `whatif-`, validated here.

Bound only when the query holds one of its parameters, so a plain visit to the
report shows the form with the job's own values and no projection.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django import forms
from django.http import QueryDict

from advisor.reports import whatif
from profiling.measure import hardware
from profiling.options import OPTIONS, SERVING_ENGINES
from profiling.profile import Profile

PREFIX = "whatif"


def _count(name: str) -> forms.IntegerField:
    """A count as the new-job form declares it (label and range), without its help."""
    option = OPTIONS[name]
    return forms.IntegerField(label=option.label, min_value=option.low, max_value=option.high)


class WhatIfForm(forms.Form):
    gpu_kind = forms.ChoiceField(label="GPU", required=False)
    gpu_count = _count("gpu_count")
    concurrency = _count("concurrency")
    prompt_tokens = _count("prompt_tokens")
    output_tokens = _count("output_tokens")
    dtype = forms.ChoiceField(label="precision", choices=[(d, d) for d in whatif.DTYPES])
    kv_dtype = forms.ChoiceField(label="KV cache", choices=whatif.KV_FORMATS, required=False)
    spec_acceptance = forms.FloatField(
        label="draft acceptance", required=False, min_value=0.0, max_value=0.99,
        help_text="per drafted token, for the speculative estimate; blank: 0.5–0.8 assumed",
    )  # fmt: skip
    # Left out (a link from before it existed): the job's own engine.
    serving_engine = forms.ChoiceField(
        label="engine", choices=list(SERVING_ENGINES.items()), required=False
    )

    def __init__(self, profile: Profile, query: QueryDict | None = None) -> None:
        bound = query is not None and any(k.startswith(f"{PREFIX}-") for k in query)
        start = whatif.initial(profile)
        initial = None if bound else dataclasses.asdict(start)
        super().__init__(query if bound else None, prefix=PREFIX, initial=initial)
        choices = [(whatif.WORKER, whatif.worker_label(profile))]
        choices += [(key, gpu.label) for key, gpu in hardware.catalog().items()]
        self.fields["gpu_kind"].choices = choices
        self.start = start

    def scenario(self) -> whatif.Scenario:
        data: dict[str, Any] = dict(self.cleaned_data)
        data["serving_engine"] = data["serving_engine"] or self.start.serving_engine
        return whatif.Scenario(**{name: data[name] for name in self.fields})


# The computation may meet a result it cannot project (no measured points, a GPU
# without a compute peak): the panel says so instead of failing the page.
PROJECTION_ERRORS = (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError)


def section_context(profile: Profile, query: QueryDict | None) -> dict[str, Any]:
    """The what-if section: the form and, when it was sent and is valid, the projection."""
    form = WhatIfForm(profile, query)
    context: dict[str, Any] = {"form": form}
    if not form.is_bound or not form.is_valid():
        return context
    try:
        after = whatif.run(profile, form.scenario())
    except PROJECTION_ERRORS as exc:
        context["error"] = f"This result cannot be projected: {exc}"
        return context
    try:
        before = whatif.run(profile, form.start)
    except PROJECTION_ERRORS:
        before = None  # the what-if stands alone; the submitted column shows "—"
    context.update({
        "outcome": after,
        "before": before,
        "rows": whatif.figure_rows(before, after),
        "rates": whatif.rate_rows(after.calibration),
        "advice": whatif.advice_change(profile.advice, before, after),
    })  # fmt: skip
    return context
