"""Pages that fit, in a real Chromium: the form short by default with the hunch before the
experiments, and every page no wider than the window at 1,280 and 390 px with every
section open (wide tables scroll inside their section)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.jobs.models import Job, Worker
from tests.advisor.fleetdata import sized
from tests.advisor.pages import make_job
from tests.e2e.test_browser import chromium, drawn  # noqa: F401  (the module-scoped browser)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "advisor" / "fixtures"
REPORTS = sorted(FIXTURES.glob("cli_*.json"))
WIDTHS = (1280, 390)
# The visible part of the form at first load, at 1,280 px (#40's goal).
FORM_HEIGHT_PX = 1400
MEASURE = """() => ({width: document.documentElement.scrollWidth, window: window.innerWidth,
                     height: document.documentElement.scrollHeight})"""
OPEN_ALL = "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"
# What sticks out past the window's right edge, for the failure message.
WIDE = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => !e.closest('.scroll'))
  .slice(0, 5).map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`)"""


def too_wide(page) -> str:
    m = page.evaluate(MEASURE)
    if m["width"] <= m["window"]:
        return ""
    return f"{m['width']} px wide in a {m['window']} px window: {page.evaluate(WIDE)}"


def test_the_form_is_short_and_asks_for_the_hunch_before_the_experiments(live_server, chromium):  # noqa: F811
    Worker.objects.create(name="local@host", host="host", queues=",cpu,default,")
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(live_server.url + "/")
    height = page.evaluate(MEASURE)["height"]
    assert height <= FORM_HEIGHT_PX, f"the form is {height} px tall at first load"
    hunch = page.locator("#field-stated_bottleneck").bounding_box()
    experiments = page.locator("#experiments").bounding_box()
    assert hunch is not None and experiments is not None
    assert hunch["y"] < experiments["y"]
    # The deployment's details are folded, their summary saying nothing is set.
    assert not page.locator("#field-tp").is_visible()
    assert "nothing set" in page.locator("#deployment-summary").inner_text()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate(OPEN_ALL)
        assert too_wide(page) == "", f"the form at {width} px"
    context.close()


def fits(live_server, chromium, result: dict, name: str) -> None:  # noqa: F811
    """The report of `result` is no wider than the window at each width, every section open."""
    job = make_job(state=Job.State.SUCCEEDED, progress=1.0, result=result)
    for width in WIDTHS:
        context = chromium.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(f"{live_server.url}/jobs/{job.share_token}/")
        page.wait_for_selector("#report")
        page.evaluate(OPEN_ALL)
        page.wait_for_timeout(300)  # charts drawn as their section opens
        assert too_wide(page) == "", f"{name} at {width} px"
        context.close()


@pytest.mark.parametrize("fixture", REPORTS, ids=lambda p: p.stem)
def test_every_report_fits_its_window_with_every_section_open(live_server, chromium, fixture):  # noqa: F811
    fits(live_server, chromium, json.loads(fixture.read_text()), fixture.name)


def test_the_fleet_section_fits_its_window_and_draws_every_kinds_front(live_server, chromium):  # noqa: F811
    result = json.loads((FIXTURES / "cli_demo_generation.json").read_text())
    result["fleet"] = sized()  # every kind carried, unpriced and refused, with commands
    fits(live_server, chromium, result, "the fleet section")
    job = make_job(state=Job.State.SUCCEEDED, progress=1.0, result=result)
    page = chromium.new_page()
    page.goto(f"{live_server.url}/jobs/{job.share_token}/")
    drawn(page, "chart-fleet")
    traces = page.locator("#chart-fleet-plot .scatterlayer .trace").count()
    carried = [r for r in result["fleet"]["rows"] if r["carries"]]
    assert traces == 2 * len(carried)  # each kind's front and its star at the load
    page.close()
