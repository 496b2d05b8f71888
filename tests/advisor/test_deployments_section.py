"""The report's deployments section, rendered from a hand-built `deployments` dict: the first
action with its headroom, cost and command, the more-hardware line, the table, the chart;
and the report page with and without the search."""

from __future__ import annotations

import html
import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from advisor.jobs.models import Job
from advisor.reports import deployments as section
from profiling.units import ms, tok_s
from tests.advisor.deploymentsdata import MODEL, deployments


def text(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()


def rendered(client, result: dict) -> tuple[Job, str]:
    """The job page of a succeeded job holding `result`, whitespace folded."""
    job = Job.objects.create(
        model_source="demo", model_name="demo", state=Job.State.SUCCEEDED, progress=1.0,
        result=result, stated_bottleneck=result["config"]["stated_bottleneck"],
    )  # fmt: skip
    page = client.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    return job, html.unescape(re.sub(r"\s+", " ", page))


def render(d: dict) -> str:
    context = {"deployments": section.section_context(d)}
    page = render_to_string("reports/_deployments.html", context)
    return html.unescape(re.sub(r"\s+", " ", page))


def part(page: str, element_id: str, end: str = "</div>") -> str:
    start = page.rindex("<", 0, page.index(f'id="{element_id}"'))
    return page[start : page.index(end, start)]


def test_the_first_action_says_its_headroom_figures_cost_and_command():
    d = deployments()
    pick = d["configurations"][0]
    page = render(d)
    first = text(part(page, "deployments-pick", "</pre>"))
    assert "First action on your 1 × H100: TP=1, fp8 weights, draft ngram k=3" in first
    assert "estimated meets your targets up to 37 users; you asked for 16." in first
    # The report's units: tok/s and ms through the same formatters as every other section.
    for figure in (tok_s(2400.0), tok_s(320.0), ms(0.12), ms(0.0034)):
        assert figure in first
    assert "2,400 tok/s per GPU" in first and "TTFT p90 120 ms" in first
    assert "$0.672 per million output tokens at your load, $0.300 at capacity" in first
    assert "24 GPU-hours a day" in first
    assert "Quality: fp8 weights" in first
    command = part(page, "deployments-pick-command", "</pre>")
    assert html.unescape(pick["command"]["text"]) in command
    assert pick["command"]["text"].startswith(f"vllm serve {MODEL} --tensor-parallel-size 1")
    assert 'data-copy-target="deployments-pick-command"' in page


def test_the_more_hardware_line_is_separate_and_says_its_gpus():
    page = render(deployments())
    more = text(part(page, "deployments-more"))
    assert more.startswith("With more hardware: TP=4 on 4 × H100 estimated meets your targets")
    assert "meets your targets up to 90 users; you asked for 16:" in more
    assert "per million" not in more  # no cost known for it
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 4" in more


def test_the_table_has_every_configuration_and_why_one_has_no_command():
    d = deployments()
    table = part(render(d), "deployments-table", "</table>")
    rows = re.findall(r'<tr class="deployment[^"]*" id="deployment-(\d+)">(.*?)</tr>', table)
    assert [int(i) for i, _ in rows] == list(range(len(d["configurations"])))
    cells = {int(i): text(row) for i, row in rows}
    assert "first action" in cells[0] and "$0.672" in cells[0] and "37" in cells[0]
    assert "No command: vLLM does not quantize weights to int4 as it loads them" in cells[1]
    assert "int4 weights: a measurable quality loss" in cells[1]
    assert "misses" in cells[2] and "6.60 ms" in cells[2]
    assert "with more hardware" in cells[3]
    assert "does not fit" in cells[4] and "—" in cells[4]


def test_the_chart_travels_through_json_script():
    page = render(deployments())
    assert 'id="chart-deployments"' in page and 'data-figure="chart-deployments"' in page


def test_without_targets_or_price_the_section_says_so():
    d = deployments()
    d["targets"] = {"ttft_ms": None, "tpot_ms": None}
    d["gpu_hourly_usd"] = None
    for c in d["configurations"]:
        c["meets"] = None
        c["capacity"]["users"] = None
        c["cost"]["usd_per_million_output_tokens"] = None
        c["cost"]["usd_per_million_at_capacity"] = None
    page = render(d)
    assert "no targets (none were given)" in page
    assert "No GPU price is known for this GPU, so no cost is given." in page
    assert "— per million output tokens at your load;" in text(part(page, "deployments-pick"))


def test_no_search_no_section():
    assert section.section_context(None) is None
    assert section.section_context({"configurations": []}) is None


@pytest.mark.django_db
def test_the_report_page_has_the_section_only_where_the_search_ran(
    client, monkeypatch, demo_result
):
    result = demo_result
    _, page = rendered(client, result)
    assert 'id="deployments"' not in page
    found = section.section_context(deployments())
    monkeypatch.setattr(section, "section_context", lambda raw: found)
    _, page = rendered(client, result)
    fold = page[page.index('id="fold-deployments"') :]
    assert "TP=1, fp8 weights, draft ngram k=3: meets your targets up to 37 users" in fold
    assert page.index('id="fold-advice"') < page.index('id="fold-deployments"')
