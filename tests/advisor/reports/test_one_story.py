"""One story per report: every scenario's JSON and rendered page agree with themselves.

Each scenario is a real stored demo result, with experiments' results put in
from the advice scenarios and the advice computed by the library. The checks
walk the result and the page:
- one name for the bottleneck: the summary, the verdict and the advice;
- each top action's before → after is the same text in the summary and in its
  recommendation, and a TPOT or TTFT "before" is the report's own figure at the
  user's workload (the verdict's), never one from another operating point (on an
  engine profile the verdict is the engine's, and so is every "before");
- nothing rejected is ranked, and nothing inside its noise is ranked;
- the measurements download holds every repeat the JSON holds.
"""

from __future__ import annotations

import copy
import csv
import html
import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from advisor.jobs.models import Job
from profiling.profile import Profile
from profiling.units import ms, pct
from tests.advisor.reports.test_charts import stored_result
from tests.advisor.reports.test_compare import with_advice
from tests.profiling.advice_scenarios import (
    add_experiment,
    caching_result,
    disaggregation_result,
    quant_variant,
    quantization_result,
    set_shares,
    speculative_result,
    sweep_point,
)

pytestmark = pytest.mark.django_db


def fast_int8(data: dict[str, Any]) -> None:
    add_experiment(data, "quantization", quantization_result(
        quant_variant("int8", 2_100_000, 0.006, top1=0.99, ppl=20.1)))  # fmt: skip


def noisy_speculation(data: dict[str, Any]) -> None:
    add_experiment(data, "speculative", speculative_result(sweep_point(1.3, spread=0.4)))


def clear_speculation(data: dict[str, Any]) -> None:
    add_experiment(data, "speculative", speculative_result(sweep_point(2.0), sweep_point(1.4, k=2)))


def prompt_reuse(data: dict[str, Any]) -> None:
    set_shares(data, prefill=0.4)
    add_experiment(data, "caching", caching_result(reuse=0.6))


def reuse_though_decode_is_most(data: dict[str, Any]) -> None:
    # Prefill 25 %, decode 75 %, 60 % of prompt tokens repeated; the user said "generation".
    set_shares(data, prefill=0.25)
    data["config"]["stated_bottleneck"] = "generation"
    add_experiment(data, "caching", caching_result(reuse=0.6))


def prefill_stalls(data: dict[str, Any]) -> None:
    data["config"]["workload"]["tpot_ms"] = 20.0
    add_experiment(data, "disaggregation", disaggregation_result(0.010, 0.050, target=0.020))


def everything(data: dict[str, Any]) -> None:
    for add in (fast_int8, clear_speculation, prompt_reuse, prefill_stalls):
        add(data)


SCENARIOS: dict[str, Callable[[dict[str, Any]], None] | None] = {
    "stored generation run": None,
    "measured int8": fast_int8,
    "speculation inside the noise": noisy_speculation,
    "clear speculation": clear_speculation,
    "prompt reuse": prompt_reuse,
    "reuse though decode is most": reuse_though_decode_is_most,
    "prefills stall decode": prefill_stalls,
    "every experiment": everything,
}
STORED = (
    "cli_demo_generation.json", "cli_speculative.json", "cli_caching_parallel.json",
    "cli_engine.json",
)  # fmt: skip


def scenario_results() -> list[tuple[str, dict[str, Any]]]:
    out = [(name, stored_result(name)) for name in STORED]
    base = stored_result("cli_demo_generation.json")
    for name, build in SCENARIOS.items():
        if build is None:
            continue
        data = copy.deepcopy(base)
        build(data)
        out.append((name, with_advice(data)))
    return out


def rendered(client: Client, result: dict[str, Any]) -> tuple[Job, str]:
    job = Job.objects.create(
        model_source="demo", model_name="demo", state=Job.State.SUCCEEDED, progress=1.0,
        result=result, stated_bottleneck=result["config"]["stated_bottleneck"],
    )  # fmt: skip
    page = client.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    return job, html.unescape(re.sub(r"\s+", " ", page))


def section(page: str, section_id: str) -> str:
    start = page.index(f'id="{section_id}"')
    return page[start : page.index("</section>", start)]


def text(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()


@pytest.mark.parametrize(
    ("name", "result"), scenario_results(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_report_tells_one_story(browser, name, result):
    profile = Profile.from_dict(result)
    advice, verdict = profile.advice, profile.verdict
    job, page = rendered(browser, result)
    summary, advice_part, verdict_part = (
        section(page, "summary"),
        section(page, "advice"),
        section(page, "verdict"),
    )

    # One name for the bottleneck.
    label = advice.bottleneck_label
    assert f'id="summary-bottleneck">{label}<' in summary
    assert f"Measured bottleneck: {label}" in advice_part
    assert f'<div class="big">{label}</div>' in verdict_part

    # Each top action: the same before → after in the summary and the recommendation,
    # and the report's own TTFT and TPOT as the "before" of those figures.
    actions = summary.split('id="summary-actions"')[1] if advice.recommendations else ""
    recommendations = advice_part.split('id="advice-recommendations"')[-1]
    own = {"TPOT": ms(verdict.tpot_ms, "ms"), "TTFT": ms(verdict.ttft_ms, "ms")}
    for rec in advice.recommendations[:3]:
        change = next(iter(rec.expected_effect.changes), None)
        found = re.search(
            re.escape(rec.setting) + r" — (.+?) (\S+ \S+) → (\S+ \S+) ", text(actions)
        )
        assert found, (name, rec.setting)
        metric, before, after = found.groups()
        assert f"{metric}: {before} → {after}" in text(recommendations), (name, metric)
        if metric in own:
            # A default the figures already include (the engine's prefix caching) has the
            # report's figure as its "after"; every other action starts from it.
            mine = after if rec.already_on else before
            assert mine == own[metric], (name, rec.technique, metric, mine, own[metric])
        assert change is not None

    # The decomposition's queueing share, simulated on the measured rates, is the deciding
    # number's own figure in the summary.
    queue = next(n for n in advice.deciding_numbers if n.name == "queue_share")
    assert 0.0 <= queue.value < 1.0 and "simulated on the measured rates" in queue.note
    shown = text(summary.split('id="summary-queueing">')[1].split("</span>")[0])
    assert shown.startswith(f"waiting to be scheduled: {pct(queue.value)} of a request's time")

    # No sentence calls a majority share "only".
    for sentence in (advice.summary, advice.agreement_note, *(n.why for n in
                     advice.not_recommended)):  # fmt: skip
        for share in re.findall(r"only (\d+)\s?%", sentence):
            assert int(share) < 50, (name, sentence)

    # Nothing rejected or inside its noise is ranked.
    ranked = {r.technique for r in advice.recommendations}
    rejected = {n.technique for n in advice.not_recommended if n.inconclusive}
    assert not ranked & rejected, name
    for rec in advice.recommendations:
        if rec.gain_low is not None:
            assert rec.gain_low > 1.0, (name, rec.technique)

    # The CSV holds every repeat of the JSON.
    response = browser.get(reverse("reports:measurements-csv", args=[job.share_token]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sum(int(r["repeats"]) for r in rows) == count_repeats(result)


def count_repeats(value: Any) -> int:
    if isinstance(value, dict):
        if isinstance(value.get("samples"), list) and "median" in value:
            return len(value["samples"])
        return sum(count_repeats(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_repeats(v) for v in value)
    return 0


def test_the_csv_of_a_missing_or_unfinished_job_is_a_404(browser):
    job = Job.objects.create(model_name="demo")
    assert (
        browser.get(reverse("reports:measurements-csv", args=[job.share_token])).status_code == 404
    )
    assert browser.get(reverse("reports:measurements-csv", args=["x" * 22])).status_code == 404
