"""Goals: a report's first view transfers <= 1.5 MB; repeated demo jobs give one answer.

One run, fresh state (as bench/load.py: a temporary database, an embedded Redis,
a stored demo result, the site under gunicorn), then a real Chromium opens the
report the way a teammate opens a share link:
- first view: what the page fetched before any scrolling (bytes on the wire,
  from the browser's own resource timing), first contentful paint, page height;
- everything drawn: the same page with every section opened and every chart
  scrolled into view, which is what a page that loads its chart library up front
  fetches at once.
The two are measured side by side on the same page, in the same run.

Then `--runs` quick demo profiles (speculative decoding measured, the rest
estimated) go through the library, and the stability rate is the share that
give the usual first measured answer or say why they cannot tell
(profiling.advice.stability).

    python bench/report.py [--runs 5] [--result tests/advisor/fixtures/cli_speculative.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import load  # noqa: E402  (bench/load.py: the same fresh site)

ROOT = Path(__file__).resolve().parent.parent
FIRST_VIEW_GOAL = 1_500_000
CHROMIUM = os.environ.get("ADVISOR_CHROMIUM", "/usr/bin/chromium")
VIEW = """() => {
  const entries = [performance.getEntriesByType('navigation')[0],
                   ...performance.getEntriesByType('resource')];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {bytes: entries.reduce((sum, e) => sum + (e.transferSize || 0), 0),
          files: entries.length,
          plotly: entries.some(e => e.name.includes('plotly')),
          fcp_ms: paint ? paint.startTime : null,
          height_px: document.documentElement.scrollHeight,
          words: document.body.innerText.split(/\\s+/).filter(Boolean).length};
}"""


def measure_page(url: str) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url)
        page.wait_for_load_state("networkidle")
        first = page.evaluate(VIEW)
        if page.locator("#open-all").count():  # sections folded under their findings
            page.click("#open-all")
        charts = page.locator("[data-figure]")
        for i in range(charts.count()):
            charts.nth(i).scroll_into_view_if_needed()
            page.wait_for_selector(f"#{charts.nth(i).get_attribute('id')} svg.main-svg")
        page.wait_for_load_state("networkidle")
        everything = page.evaluate(VIEW)
        everything["charts"] = charts.count()
        browser.close()
    return {"first_view": first, "everything": everything}


def measure_report(result: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="advisor-report-", dir="/tmp") as tmp:
        var_dir = Path(tmp)
        env = load.environment(var_dir, None)
        env.pop("ADVISOR_PRODUCTION", None)  # the laptop setting: static from the finders
        saved, load.RESULT, load.JOBS = (load.RESULT, load.JOBS), result, 1
        try:
            seeded = load.prepare(env)
        finally:
            load.RESULT, load.JOBS = saved
        port = load.free_port()
        server = load.start_server(env, port, 2, var_dir / "access.log")
        try:
            return measure_page(f"http://127.0.0.1:{port}/jobs/{seeded['token']}/")
        finally:
            server.terminate()
            server.wait(10)
            subprocess.run(
                [sys.executable, "-c", "from advisor import embedded_redis as e; "
                 f"e.stop({str(var_dir / 'redis.sock')!r})"],
                cwd=ROOT, env=env, check=False,
            )  # fmt: skip


def stability(runs: int) -> dict:
    import torch

    from profiling.advice.stability import answers, stability_rate
    from profiling.config import ProfileConfig
    from profiling.runner import run_profile

    torch.set_num_threads(1)
    config = ProfileConfig(
        model="demo", device="cpu", quick=True, experiments=["speculative"], spec_ks=[1, 2]
    )
    started = time.monotonic()
    advices = [run_profile(config).advice for _ in range(runs)]
    return {
        "runs": runs,
        "rate": stability_rate(advices),
        "answers": [(a.top or "no measured win", a.stable) for a in answers(advices)],
        "first_actions": [a.first.technique if a.first else "" for a in advices],
        "seconds": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="demo jobs for the stability rate")
    parser.add_argument(
        "--result", type=Path, default=ROOT / "tests/advisor/fixtures/cli_speculative.json"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = {"page": measure_report(args.result), "stability": stability(args.runs)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    first, every = out["page"]["first_view"], out["page"]["everything"]
    print(f"report of {args.result.name}, Chromium 1200×900, gzip on, static from the finders")
    print(f"{'':<22}{'bytes':>12}{'files':>7}{'plotly':>8}{'FCP ms':>9}{'height px':>11}")
    for name, view in (("first view", first), ("every chart drawn", every)):
        fcp = f"{view['fcp_ms']:.0f}" if view["fcp_ms"] is not None else "—"
        print(f"{name:<22}{view['bytes']:>12,}{view['files']:>7}{str(view['plotly']):>8}"
              f"{fcp:>9}{view['height_px']:>11,}")  # fmt: skip
    ratio = every["bytes"] / first["bytes"] if first["bytes"] else float("nan")
    met = "met" if first["bytes"] <= FIRST_VIEW_GOAL else "NOT met"
    print(f"first view is 1/{ratio:.1f} of everything; goal <= {FIRST_VIEW_GOAL:,} B: {met}")
    print(f"words on the page: {every['words']:,}; charts: {every['charts']}")
    s = out["stability"]
    print(f"stability over {s['runs']} demo jobs: {s['rate']:.0%} "
          f"({s['seconds']:.0f} s); answers: {s['answers']}; "
          f"first actions: {s['first_actions']}")  # fmt: skip


if __name__ == "__main__":
    main()
