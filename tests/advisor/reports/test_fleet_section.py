"""The report's fleet section, rendered from a real `fleet` dict in a stored job result
through the job page (Django's test client, SQLite): the fold's finding names the cheapest
kind, the table holds every kind that carries the load with the result's own figures and
its launch command, and the kinds that cannot carry it say why."""

from __future__ import annotations

import html
import json
import re

import pytest

from profiling.units import significant
from tests.advisor.fleetdata import sized
from tests.advisor.pages import report_html
from tests.advisor.reports.test_charts import real_demo_profile

pytestmark = pytest.mark.django_db


def text(fragment: str) -> str:
    """What a reader sees of `fragment`: tags dropped, entities read, spaces folded."""
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()
    return html.unescape(re.sub(r" ([,.;:])", r"\1", words))


def element(page: str, element_id: str, tag: str) -> str:
    start = page.rindex("<", 0, page.index(f'id="{element_id}"'))
    return page[start : page.index(f"</{tag}>", start)]


def cells(row_html: str) -> list[str]:
    return [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)]


def page_with(client, fleet: dict | None) -> str:
    result = real_demo_profile()
    result["fleet"] = fleet
    return report_html(client, result)


def test_every_kind_that_carries_the_load_is_a_row_with_the_results_figures(client):
    fleet = sized()
    page = page_with(client, fleet)
    carried = [r for r in fleet["rows"] if r["carries"]]
    assert len(carried) == 3
    for rank, row in enumerate(fleet["rows"], start=1):
        if not row["carries"]:
            continue
        got = cells(element(page, f"fleet-{row['gpu']}", "tr"))
        name = row["layout"].split(" × ", 1)[1]
        hourly = f"${row['usd_per_hour']:,.2f}" if row["usd_per_hour"] is not None else "no price"
        per_million = (f"${significant(row['usd_per_million_output_tokens'])}"
                       if row["usd_per_million_output_tokens"] is not None else "—")  # fmt: skip
        assert got[0] == str(rank)
        assert got[1] == f"{row['gpu']} {row['gpu_label']}"
        assert got[2] == f"{row['gpus']} {row['replicas']} × {row['gpus_per_replica']}"
        assert got[3].startswith(name)
        assert got[4:7] == [hourly, per_million, row["headroom_text"]]
        if row["watts"] is None:
            assert got[7] == "—"
        else:
            tok_j = significant(row["output_tokens_per_joule"])
            assert got[7] == f"{row['watts'] / 1e3:,.3g} kW {tok_j} tok/J"
        assert got[8] == row["basis"]
        assert row["command"]["text"] and row["command"]["text"] in got[9]
        if row["replicas"] > 1:
            assert f"{row['replicas']} servers" in got[9]


def chart(page: str, chart_id: str) -> dict:
    """The figure a chart's json_script carries, as the page's script reads it."""
    start = page.index(f'id="{chart_id}"')
    return json.loads(
        html.unescape(page[page.index(">", start) + 1 : page.index("</script>", start)])
    )


def test_the_chart_draws_each_kinds_front_and_its_operating_point_at_the_load(client):
    fleet = sized()
    figure = chart(page_with(client, fleet), "chart-fleet")
    carried = [r for r in fleet["rows"] if r["carries"]]
    lines = [t for t in figure["data"] if t["mode"] == "lines+markers"]
    stars = [t for t in figure["data"] if t["marker"]["symbol"] == "star"]
    assert [t["name"] for t in lines] == [r["gpu"] for r in carried]
    for row, line, star in zip(carried, lines, stars, strict=True):
        assert line["x"] == [p["per_user_tokens_per_second"] for p in row["front"]]
        assert line["y"] == [p["per_gpu_tokens_per_second"] for p in row["front"]]
        assert star["x"] == [1 / row["at_load"]["tpot_p50_seconds"]]
        assert star["y"] == [row["per_gpu_at_load"]] and row["layout"] in star["text"][0]
        assert star["marker"]["color"] == line["line"]["color"]
    assert figure["layout"]["shapes"][0]["x0"] == 1000 / fleet["tpot_ms"]


def test_the_fold_names_the_cheapest_kind_its_count_and_price(client):
    fleet = sized()
    page = page_with(client, fleet)
    first = fleet["rows"][0]
    fold = text(element(page, "fold-fleet", "summary"))
    assert fold == (
        "Fleet: the fewest GPUs per kind for your load cheapest: "
        f"{first['gpus']} × {first['gpu']} ({first['layout']}) "
        f"at ${first['usd_per_hour']:,.2f}/hour"
    )
    assert "20 requests/s of 2,000 prompt + 300 output tokens" in text(
        element(page, "fleet-basis", "p")
    )


def test_a_kind_that_cannot_carry_the_load_says_why_and_the_notes_follow(client):
    fleet = sized()
    page = page_with(client, fleet)
    refused = next(r for r in fleet["rows"] if not r["carries"])
    assert text(element(page, f"fleet-{refused['gpu']}", "li")) == (
        f"{refused['gpu']}: {refused['reason']}"
    )
    notes = text(element(page, "fleet-notes", "ul"))
    assert all(note in notes for note in fleet["notes"])
    assert 'class="scroll"' in element(page, "fold-fleet", "section")


def test_a_users_load_is_said_in_users(client):
    page = page_with(client, sized("--load-users", "200"))
    assert "200 users of 2,000 prompt" in text(element(page, "fleet-basis", "p"))


def test_where_no_kind_carries_it_the_section_says_so(client):
    fleet = sized()
    for row in fleet["rows"]:
        row.update(replicas=0, carries=False, reason="cannot carry it", command=None)
    page = page_with(client, fleet)
    assert "no kind carries 20 requests/s" in text(element(page, "fold-fleet", "summary"))
    assert "No GPU kind searched carries 20 requests/s" in page
    assert 'id="fleet-table"' not in page


def test_without_a_load_there_is_no_fleet_section(client):
    assert 'id="fold-fleet"' not in page_with(client, None)
