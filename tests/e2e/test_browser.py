"""A real Chromium: fill the form, watch the progress bar, read the report, copy a launch
command, share it.

Uses Debian's chromium (never a downloaded browser). Skipped when it is
missing, unless ADVISOR_REQUIRE_BROWSER=1 (CI), where that is a failure.
Screenshots the finished report into the test's own folder; with
ADVISOR_SCREENSHOT=docs/screenshot.png it refreshes the README's picture instead
(nothing tracked is written otherwise).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from advisor.jobs.models import Job
from tests.conftest import JOB_TIMEOUT_S, wait_for_job
from tests.e2e.test_submit_to_report import TOKEN_URL, wait_for_live_worker
from tests.gate import Gate

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("ADVISOR_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
SCREENSHOT_ENV = "ADVISOR_SCREENSHOT"
JOB_TIMEOUT_MS = JOB_TIMEOUT_S * 1000
# The queue of this module's gated worker; the form's "run on" offers every live one.
GATED_QUEUE = "test-browser"
# What the page has fetched so far: its URLs and the bytes that crossed the wire.
FIRST_VIEW = """() => {
  const entries = [performance.getEntriesByType('navigation')[0],
                   ...performance.getEntriesByType('resource')];
  return {urls: entries.map(e => e.name),
          bytes: entries.reduce((sum, e) => sum + (e.transferSize || 0), 0)};
}"""
BAR_VALUE = (
    "() => document.querySelector('[role=progressbar]')?.getAttribute('aria-valuenow') ?? null"
)


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    if not CHROMIUM.exists():
        message = f"no browser at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("ADVISOR_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the
    # ORM calls the database fixtures make here are still plain synchronous ones.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def gate(worker_factory, transactional_db, tmp_path) -> Iterator[Gate]:
    """A worker on GATED_QUEUE whose jobs stop mid-run at this gate until the test opens it."""
    gate = Gate(tmp_path / "gate")
    gated = worker_factory([GATED_QUEUE], gate.env())
    yield gate
    gate.open()
    gated.stop()


def job_at(url: str) -> Job:
    token = TOKEN_URL.search(url)
    assert token, url
    return Job.objects.get(share_token=token.group(1))


def percent(progress: float) -> int:
    """The bar's value for `progress`, rounded as the page's script rounds it."""
    return math.floor(progress * 100 + 0.5)


def bar_values(page, done: Callable[[list[int]], bool], what: str) -> list[int]:
    """aria-valuenow of the bar, each change once, sampled until `done(values)`."""
    values: list[int] = []
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if done(values):
                return values
            # One read of the bar: the page reloads itself when the job ends, so a
            # locator found a moment ago may be gone before its attribute is read.
            value = page.evaluate(BAR_VALUE)
        except PlaywrightError:  # the page was navigating: read again
            value = None
        if value is not None and (not values or values[-1] != int(value)):
            values.append(int(value))
        page.wait_for_timeout(100)
    pytest.fail(f"no {what} after {JOB_TIMEOUT_S} s; progress seen: {values}")


def bar_shows(page, progress: float) -> list[int]:
    target = percent(progress)
    return bar_values(page, lambda values: values[-1:] == [target], f"bar at {target} %")


def bar_until_report(page) -> list[int]:
    return bar_values(page, lambda _: page.locator("#report").count() > 0, "report")


def drawn(page, chart: str) -> None:
    """Open the section a chart is folded in, as a reader does, scroll the chart into view
    (charts are drawn as they come near the screen) and wait for plotly's SVG."""
    fold = page.locator(f"details.fold:has(#{chart}-plot)")
    if fold.count() and fold.get_attribute("open") is None:
        fold.locator("> summary").click()
    page.locator(f"#{chart}-plot").scroll_into_view_if_needed()
    page.wait_for_selector(f"#{chart}-plot svg.main-svg")


def unfold(page, fold: str) -> None:
    """Open a folded part of the form as a user does, by its summary (once: a second click
    would close it; the page's script opens "Which worker" itself for an unserved GPU)."""
    if page.get_attribute(fold, "open") is None:
        page.click(f"{fold} > summary")


def copied(page, command: str) -> str:
    """Click the button of the launch command `#command` as a reader does; once the
    confirmation beside that button says so, what reached the clipboard."""
    page.click(f"#{command}-copy")
    page.wait_for_selector(f"#{command}-copy ~ [data-copy-done]:has-text('Copied')")
    return page.evaluate("navigator.clipboard.readText()")


def test_fill_submit_watch_report_and_share(live_server, gate, demo_model_dir, chromium, tmp_path):
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(live_server.url + "/")
    page.check("input[name=model_source][value=demo]")
    page.fill("input[name=model_name]", "demo")
    page.select_option("select[name=gpu_kind]", "H100-SXM")
    assert page.locator("#unserved-note").is_visible()  # no worker for H100 here
    unfold(page, "#run-on-details")
    page.select_option("select[name=run_on]", GATED_QUEUE)
    page.fill("input[name=prompt_tokens]", "512")
    page.fill("input[name=ttft_ms]", "800")
    page.check("input[name=stated_bottleneck][value=generation]")
    unfold(page, "#notes-details")
    page.fill("textarea[name=notes]", "Does decode dominate on the demo model?")
    page.click("button[type=submit]")

    page.wait_for_url(re.compile(r"/jobs/[A-Za-z0-9_-]{16,}/$"))
    share_url = page.url
    # The job stops mid-run at the gate and the bar shows where; the row then moves on
    # (written here as the worker writes it) and the bar follows, before any report.
    held = wait_for_job(job_at(share_url).pk, until=gate.holds)
    values = bar_shows(page, held.progress)
    moved = held.progress + 0.01  # within the child's phase: its next report is further on
    assert Job.objects.beat(held.pk, held.lease, progress=moved, message="a step further")
    values += bar_shows(page, moved)
    gate.open()
    values += bar_until_report(page)
    assert values == sorted(values), f"the bar went back: {values}"
    assert {percent(held.progress), percent(moved)} <= set(values), values

    # The first view: the answer, without the charts' library; the summary says what
    # the stored JSON says.
    page.wait_for_load_state("networkidle")
    first_view = page.evaluate(FIRST_VIEW)
    assert not [r for r in first_view["urls"] if "plotly" in r], first_view["urls"]
    assert first_view["bytes"] <= 1_500_000, first_view
    result = page.request.get(share_url + "result.json").json()
    advice = result["advice"]
    assert page.inner_text("#summary-bottleneck") == advice["bottleneck_label"]
    shown = page.locator("#summary-actions > li").count()
    assert shown == min(3, len(advice["recommendations"]))
    for i, rec in enumerate(advice["recommendations"][:3]):
        assert rec["setting"] in page.locator("#summary-actions > li").nth(i).inner_text()

    # the report as a reader first sees it
    screenshot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "screenshot.png")
    page.screenshot(
        path=str(screenshot), full_page=True, clip={"x": 0, "y": 0, "width": 1200, "height": 2000}
    )

    # Below it, every section folded under its one-line finding; opened, plotly's SVG is
    # drawn for each chart as it comes into view.
    assert page.locator("details.fold[open]").count() == 0
    assert page.locator("#fold-decode > summary").inner_text().startswith("Decode")
    for chart in ("memory", "prefill", "decode", "latency", "roofline"):
        drawn(page, f"chart-{chart}")
    page.click("#open-all")
    assert page.locator("details.fold:not([open])").count() == 0
    assert "Speed up token generation" in page.inner_text("#verdict")
    assert " ms" in page.inner_text("#prefill table")
    assert "tok/s" in page.inner_text("#decode table")
    assert not errors, errors

    page.click("#copy-link")
    page.wait_for_selector("[data-copy-done]:has-text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == share_url

    # Each launch command's button copies what its <pre> shows: the first action's, then
    # (its row opened) one in the table that differs from it.
    d = result["advice"]["deployments"]
    assert d["pick"] is not None, d
    pick = d["configurations"][d["pick"]]["command"]["text"]
    assert pick and page.inner_text("#deployments-pick-command") == pick
    assert copied(page, "deployments-pick-command") == pick
    texts = [c["command"]["text"] for c in d["configurations"]]
    other = next(i for i, text in enumerate(texts) if text not in ("", pick))
    row = f"deployment-command-{other}"
    assert page.text_content(f"#{row}-copy ~ [data-copy-done]") == ""
    page.click(f"#deployment-{other} summary")
    assert page.inner_text(f"#{row}") == texts[other]
    assert copied(page, row) == texts[other]
    assert not errors, errors

    stranger = chromium.new_context()
    try:
        shared = stranger.new_page()
        shared.goto(share_url + "#memory")  # a link to a folded section opens it
        shared.wait_for_selector("#fold-memory[open]")
        drawn(shared, "chart-memory")
        assert shared.locator("#report").is_visible()
        assert shared.locator("#cancel-job").count() == 0
        assert "(read-only)" in shared.inner_text(".share")
    finally:
        stranger.close()
        context.close()


def test_the_submitter_sees_a_cancel_button_and_can_cancel(
    live_server, gate, demo_model_dir, chromium
):
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(live_server.url + "/")
        unfold(page, "#run-on-details")
        page.select_option("select[name=run_on]", GATED_QUEUE)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/jobs/[A-Za-z0-9_-]{16,}/$"))
        wait_for_job(job_at(page.url).pk, until=gate.holds)  # running until cancelled
        page.click("#cancel-job")
        page.wait_for_selector(".ended", timeout=JOB_TIMEOUT_MS)
        assert "Cancel" in page.inner_text(".ended")
    finally:
        context.close()


def submit_demo_in(page, base_url: str, prompt_tokens: str) -> str:
    """Fill the form for a quick demo run on the CPU worker; the finished report's URL."""
    page.goto(base_url + "/")
    page.check("input[name=model_source][value=demo]")
    page.fill("input[name=model_name]", "demo")
    page.select_option("select[name=gpu_kind]", "H100-SXM")
    unfold(page, "#run-on-details")
    page.select_option("select[name=run_on]", "cpu")
    page.fill("input[name=prompt_tokens]", prompt_tokens)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/[A-Za-z0-9_-]{16,}/$"))
    page.wait_for_selector("#report", timeout=JOB_TIMEOUT_MS)
    return page.url


def test_advice_what_if_and_compare_two_reports(live_server, worker, demo_model_dir, chromium):
    wait_for_live_worker()
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        first = submit_demo_in(page, live_server.url, "256")
        second = submit_demo_in(page, live_server.url, "512")

        # The summary, then the advice and the predictions chart, opened and drawn.
        assert page.locator("#summary").is_visible()
        page.click("#fold-advice > summary")
        assert page.locator("#advice").is_visible()
        drawn(page, "chart-predictions")
        # What if: twice the GPUs, projected on the same page, nothing submitted.
        page.click("#fold-what-if > summary")
        page.fill("#what-if input[name=whatif-gpu_count]", "2")
        page.click("#what-if button[type=submit]")
        page.wait_for_selector("#what-if-panel")
        assert "2" in page.inner_text("#what-if-figures")
        assert page.url.startswith(second)

        # Compare with the first report, pasted as a share link, in a fresh context.
        stranger = chromium.new_context()
        shared = stranger.new_page()
        shared.goto(second)
        shared.fill("#compare-with-b", first)
        shared.click("#compare-with button[type=submit]")
        shared.wait_for_selector("#compare-table")
        drawn(shared, "chart-compare-decode")
        table = shared.inner_text("#compare-table")
        assert "512" in table and "256" in table
        stranger.close()
        assert not errors, errors
    finally:
        context.close()
