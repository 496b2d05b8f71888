"""The report's deployments section, rendered from the real search's `deployments` dict: the
first action with its headroom, cost and command (or, where the user's GPUs cannot meet the
targets, the nearest of theirs and the more-hardware line), the table, the chart; and the
report page of a stored real profile with the advice the library derives from it."""

from __future__ import annotations

import html
import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from advisor.jobs.models import Job
from advisor.reports import deployments as section
from profiling.units import count, ms, tok_s
from tests.advisor.deploymentsdata import MODEL, USERS, demo_with_search, meets, misses
from tests.advisor.reports.test_charts import stored_result


def text(fragment: str) -> str:
    """What a reader sees of `fragment`: tags dropped, entities read, spaces folded."""
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()
    return html.unescape(re.sub(r" ([,.;:])", r"\1", words))


def rendered(client, result: dict) -> str:
    """The job page of a succeeded job holding `result`, whitespace folded."""
    job = Job.objects.create(
        model_source="demo", model_name="demo", state=Job.State.SUCCEEDED, progress=1.0,
        result=result, stated_bottleneck=result["config"]["stated_bottleneck"],
    )  # fmt: skip
    page = client.get(reverse("jobs:detail", args=[job.share_token])).content.decode()
    return re.sub(r"\s+", " ", page)


def render(d: dict) -> str:
    context = {"deployments": section.section_context(d)}
    return re.sub(r"\s+", " ", render_to_string("reports/_deployments.html", context))


def part(page: str, element_id: str, end: str = "</div>") -> str:
    start = page.rindex("<", 0, page.index(f'id="{element_id}"'))
    return page[start : page.index(end, start)]


def figures(c: dict) -> list[str]:
    """A configuration's figures as the report writes them everywhere."""
    return [
        f"{tok_s(c['throughput_tokens_per_second'])} output in all",
        f"{tok_s(c['per_gpu_tokens_per_second'])} per GPU",
        f"{tok_s(c['per_user_tokens_per_second'])} per user",
        f"TTFT p90 {ms(c['ttft_p90_seconds'])}", f"TPOT p90 {ms(c['tpot_p90_seconds'])}",
    ]  # fmt: skip


def test_the_first_action_on_their_gpu_says_its_headroom_figures_cost_and_command():
    d = meets()
    pick = d["configurations"][d["pick"]]
    # The expected answer: the one GPU meets TPOT 8 ms at 16 users with one flag.
    assert pick["on_your_gpus"] and pick["meets"] is True and pick["gpus"] == 1
    page = render(d)
    first = text(part(page, "deployments-pick", "</pre>"))
    assert f"First action on your 1 × {d['gpu']}: {pick['name']}" in first
    assert f"meets your targets up to {pick['capacity']['users']} users; you asked for 16" in first
    assert pick["capacity"]["users"] > USERS
    for figure in figures(pick):
        assert figure in first
    cost, usd = pick["cost"], section.usd
    assert f"{usd(cost['usd_per_million_output_tokens'])} per million output tokens" in first
    assert f"{usd(cost['usd_per_million_at_capacity'])} at capacity" in first
    # At capacity the one GPU would serve their traffic in part of the day.
    needs = cost["gpu_hours_per_day_at_capacity"]
    assert 0 < needs < 24
    assert f"it holds 24 GPU-hours a day, and your traffic needs {needs:.1f}" in first
    command = text(part(page, "deployments-pick-command", "</pre>"))
    assert pick["command"]["text"] in command
    assert pick["command"]["text"].startswith(f"vllm serve {MODEL} --tensor-parallel-size 1")
    assert 'data-copy-target="deployments-pick-command"' in page
    assert 'id="deployments-more"' not in page and 'id="deployments-nearest"' not in page


def test_where_their_gpu_cannot_meet_the_targets_it_says_so_names_the_nearest_and_more_gpus():
    d = misses()
    assert d["pick"] is None and d["more_hardware"] is not None
    page = render(d)
    assert 'id="deployments-pick"' not in page
    nearest = d["configurations"][0]
    said = text(part(page, "deployments-nearest"))
    assert said.startswith(f"Nothing on your 1 × {d['gpu']} meets your targets at 16 users")
    assert f"The nearest: {nearest['name']} estimated, which {nearest['headroom']}." in said
    assert nearest["capacity"]["users"] < USERS  # it meets them, at fewer users
    for figure in figures(nearest):
        assert figure in said
    more = d["configurations"][d["more_hardware"]]
    line = text(part(page, "deployments-more"))
    assert line.startswith(f"With more hardware: {more['name']} on {more['gpus']} × {d['gpu']}")
    assert more["gpus"] > 1 and more["headroom"] in line
    for figure in figures(more):
        assert figure in line
    # A format vLLM cannot make as it loads says so instead of printing a failing command.
    for c, where in ((nearest, said), (more, line)):
        if c["command"]["unavailable"]:
            assert f"No command: {c['command']['unavailable']}" in where
        else:
            assert c["command"]["text"] in where


def test_the_table_has_every_configuration_and_its_command_or_why_none():
    for d in (meets(), misses()):
        table = part(render(d), "deployments-table", "</table>")
        rows = re.findall(r'<tr class="deployment[^"]*" id="deployment-(\d+)">(.*?)</tr>', table)
        assert [int(i) for i, _ in rows] == list(range(len(d["configurations"])))
        for i, row in rows:
            c, cells = d["configurations"][int(i)], text(row)
            assert c["name"] in cells
            assert f"{tok_s(c['per_gpu_tokens_per_second'])}" in cells
            assert ms(c["tpot_p90_seconds"]) in cells
            command = c["command"]
            assert (command["text"] or f"No command: {command['unavailable']}") in cells
            if c["capacity"]["users"] is not None:
                assert count(c["capacity"]["users"]) in cells
        kinds = {bool(c["command"]["text"]) for c in d["configurations"]}
        assert kinds == {True, False}  # both a command and a format vLLM cannot load


def test_the_chart_travels_through_json_script():
    page = render(meets())
    assert 'id="chart-deployments"' in page and 'data-figure="chart-deployments"' in page


def test_without_targets_or_price_the_section_says_so():
    d = meets()
    d["targets"] = {"ttft_ms": None, "tpot_ms": None}
    d["gpu_hourly_usd"] = None
    for c in d["configurations"]:
        c["meets"] = None
        c["headroom"] = ""
        c["cost"]["usd_per_million_output_tokens"] = None
        c["cost"]["usd_per_million_at_capacity"] = None
    page = render(d)
    assert "no targets (none were given)" in text(page)
    assert "No GPU price is known for this GPU, so no cost is given." in text(page)
    assert "— per million output tokens at your load;" in text(part(page, "deployments-pick"))


def test_no_search_no_section():
    assert section.section_context(None) is None
    assert section.section_context({"configurations": []}) is None


@pytest.mark.django_db
def test_the_report_of_a_real_profile_shows_the_search_its_advice_carries(client, demo_result):
    assert 'id="deployments"' not in rendered(client, demo_result)  # stored before the search
    result = demo_with_search()
    d = result["advice"]["deployments"]
    page = rendered(client, result)
    fold = page[page.index('id="fold-deployments"') :]
    pick = d["configurations"][d["pick"]]
    assert page.index('id="fold-advice"') < page.index('id="fold-deployments"')
    assert f"{pick['name']}: {pick['headroom']}" in text(fold[: fold.index("</summary>")])
    # Same GPU, same figures, same units as the rest of the report: the memory section's
    # target, the advice's line on the search.
    gpus = f"{d['gpu_count']} × {d['gpu']}"
    assert f"on {gpus}" in text(page[page.index('id="memory"') :])
    headline = next(n for n in result["advice"]["notes"] if n.startswith("Deployments searched"))
    first = text(part(page, "deployments-pick", "</pre>"))
    assert f"First action on your {gpus}: {pick['name']}" in first
    for figure in (f"TPOT p90 {ms(pick['tpot_p90_seconds'])}",
                   f"TTFT p90 {ms(pick['ttft_p90_seconds'])}",
                   tok_s(pick["throughput_tokens_per_second"])):  # fmt: skip
        assert figure in headline and figure in first
    assert f"vllm serve {result['config']['model']} --tensor-parallel-size 1" in first
    # The target reads as the verdict writes it.
    target = ms(result["config"]["workload"]["ttft_ms"], "ms")
    start = page.index('id="verdict"')
    assert target in text(page[start : page.index('id="fold-', start)])
    assert f"your targets: TTFT p90 ≤ {target}." in text(part(page, "deployments", "</p>"))


@pytest.mark.django_db
def test_a_configuration_the_engine_measured_shows_the_engine_sections_figures(client):
    """The stored engine run (vLLM on the CPU at 4 users, a shared prefix) with its device
    named as the deployment GPU, so the search takes the engine's runs as that GPU's: the
    report must then give the same figures for them in both sections."""
    stored = stored_result("cli_engine.json")
    stored["config"]["hardware"]["gpu_kind"] = stored["environment"]["gpu_kind"] = "H100-SXM"
    result = demo_with_search(stored)
    d = result["advice"]["deployments"]
    measured = [(i, c) for i, c in enumerate(d["configurations"]) if c["basis"] == "measured"]
    assert measured  # the reference server, and its draft-model run
    page = rendered(client, result)
    start = page.index('id="engine"')
    engine = text(page[start : page.index('id="fold-', start)])  # up to the next section
    users = d["concurrency"]
    point = next(p for p in result["engine"]["serving"] if p["concurrency"] == users)
    reference = next(c for _, c in measured if not c["configuration"]["draft"])
    for ours, theirs in ((ms(reference["ttft_p90_seconds"]), ms(point["ttft_ms"]["p90"], "ms")),
                         (ms(reference["tpot_p90_seconds"]), ms(point["tpot_ms"]["p90"], "ms")),
                         (tok_s(reference["throughput_tokens_per_second"]),
                          tok_s(point["output_tokens_per_s"]))):  # fmt: skip
        assert ours == theirs and theirs in engine
    table = part(page, "deployments-table", "</table>")
    for i, c in measured:
        row = text(part(table, f"deployment-{i}", "</tr>"))
        assert "measured" in row and f"measured on vllm {result['engine']['version']}" in row
        assert ms(c["tpot_p90_seconds"]) in row
