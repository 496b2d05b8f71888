"""A report with an engine section: a real stored engine profile of demo on vLLM (CPU).

`fixtures/cli_engine.json` is made by `scripts/make-fixtures` on a machine with the
engine (`scripts/engine-env`); the page is rendered by the site from it.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor.reports.engine import recommended_command
from profiling.profile import Profile
from profiling.units import ms
from tests.advisor.reports.test_charts import stored_result
from tests.advisor.reports.test_one_story import rendered, section, text

pytestmark = pytest.mark.django_db
RESULT = "cli_engine.json"


@pytest.fixture
def engine_page(client):
    result = stored_result(RESULT)
    _, page = rendered(client, result)
    return Profile.from_dict(result), page


def test_the_verdict_is_the_engines_measurement_at_the_users_concurrency(engine_page):
    profile, page = engine_page
    engine, work = profile.engine, profile.config.workload
    point = next(p for p in engine.serving if p.concurrency == work.concurrency)
    assert profile.verdict.ttft_ms == point.ttft_ms.p50
    assert profile.verdict.tpot_ms == point.tpot_ms.p50
    assert profile.eager_verdict is not None and profile.eager_verdict.tpot_ms != point.tpot_ms.p50
    verdict = text(section(page, "verdict"))
    assert ms(point.tpot_ms.p50, "ms") in verdict and "measured on vllm" in verdict
    assert any("vllm" in note and "measured at your workload" in note
               for note in profile.advice.notes)  # fmt: skip


def test_the_engine_section_shows_the_sweep_with_units_and_the_command(engine_page):
    profile, page = engine_page
    part = section(page, "engine")
    assert recommended_command(profile.engine, profile.advice) in text(part)
    assert text(part).count("vllm serve ") == 1
    table = part[part.index('id="engine-sweep"') :]
    table = table[: table.index("</table>")]
    headers = re.findall(r"<th[^>]*>(.*?)</th>", table.split("</thead>")[0])
    units = {i: m.group(1) for i, h in enumerate(headers) if (m := re.search(r"\(([^)]+)\)$", h))}
    assert len(units) >= 9
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    assert len(rows) == len(profile.engine.serving)
    for row in rows:
        cells = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for i, unit in units.items():
            assert cells[i].endswith(unit), (headers[i], cells[i])


def test_failed_configurations_are_listed_with_the_engines_reason(engine_page):
    profile, page = engine_page
    part = text(section(page, "engine"))
    for failure in profile.engine.failures:
        assert failure in part
    assert "head_size divisible by 32" in part


def test_speculation_and_caching_are_judged_on_the_engine(engine_page):
    profile, _ = engine_page
    advice = profile.advice
    judged = [*advice.recommendations, *advice.not_recommended]
    for technique in ("speculative", "caching"):
        mine = [o for o in judged if o.technique == technique]
        assert mine, technique
        for outcome in mine:
            words = getattr(outcome, "why", "") or outcome.setting
            assert "vllm" in words, (technique, words)
    assert not any(m.technique in ("speculative", "caching") for m in advice.experiments_missing)


def test_the_split_over_two_ranks_is_shown_with_its_interval(engine_page):
    profile, page = engine_page
    tp = profile.engine.tensor_parallel
    assert tp is not None and tp.status == "ran"
    part = text(section(page, "engine"))
    table = part[part.index("Tensor parallelism on the engine") :]
    assert f"{tp.speedup:.2f}× ({tp.interval[0]:.2f}–{tp.interval[1]:.2f}×)" in table
    assert ms(tp.tpot_ms.p50, "ms") in table
    assert ("identical" if tp.output_matches else "differs") in table


def test_a_split_read_in_one_burst_shows_the_servers_tpot_and_says_why(client):
    result = stored_result(RESULT)
    tp = result["engine"]["tensor_parallel"]
    point = tp["points"][0]
    point["coalesced"], point["streamed"] = point["requests"], [False] * point["requests"]
    tp.update(speedup=1.2345, interval=None, speedup_basis="server")
    _, page = rendered(client, result)
    part = text(section(page, "engine"))
    table = part[part.index("Tensor parallelism on the engine") :]
    assert ms(point["server"]["tpot_mean_ms"], "ms") + " (server mean)" in table
    assert "1.23× (of the server's mean TPOT: no request reached the client" in table


def test_a_speculative_speedup_of_the_servers_tpot_says_so(client):
    result = stored_result(RESULT)
    spec = result["engine"]["speculative"][0]
    spec.update(speedup=0.7904, interval=None, speedup_basis="server")
    _, page = rendered(client, result)
    part = text(section(page, "engine"))
    assert "0.79× (of the server's mean TPOT: no request reached the client" in part


def test_a_failed_launch_shows_its_logs_last_lines_folded(client):
    result = stored_result(RESULT)
    failed = next(launch for launch in result["engine"]["launches"] if launch["status"] != "ran")
    failed["error"] = (
        "benchmark: killed by SIGILL (illegal instruction: a binary built for a "
        "CPU feature this machine lacks); no output"
    )
    failed["logs"] = {"server": ["INFO loading weights", "INFO ready"], "client": []}
    _, page = rendered(client, result)
    part = section(page, "engine")
    assert "killed by SIGILL (illegal instruction" in text(part)
    folds = re.findall(r'<details class="engine-log">(.*?)</details>', part)
    assert len(folds) == 2
    assert "the server's log, last 2 lines" in folds[0] and "INFO ready" in folds[0]
    assert "the client's log, last 0 lines" in text(folds[1]) and "no output" in text(folds[1])


def test_estimated_figures_carry_the_published_error_and_its_scatter(client):
    from profiling.advice.build import estimate_report
    from profiling.config import Workload
    from profiling.measure.hardware import lookup
    from profiling.model.shapes import Shapes
    from profiling.projection import validation
    from profiling.projection.estimate import shipped_configs

    # The stored run projected to no datasheet GPU: add the projection the library
    # makes for one (as a report with a deployment GPU holds), bands attached.
    result = stored_result(RESULT)
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    _, points = estimate_report(shapes, lookup("H100"), 1, "bfloat16", Workload())
    result["predictions"] += [p.to_dict() for p in points]
    _, page = rendered(client, result)
    part = section(page, "predictions")
    tput = validation.band("output_tokens_per_second", shapes)  # the band of dense models
    assert tput is not None and tput.kind == "dense"
    assert (f"± {tput.median_error:.0%} against {tput.rows} published serving rows of dense "
            "models") in part  # fmt: skip
    assert 'id="chart-published-plot"' in part and 'id="published-validation"' in part
    figure = re.search(r'<script id="chart-published"[^>]*>(.*?)</script>', part, re.S)
    assert figure is not None, "the scatter's data travels with the page"
    data = json.loads(figure.group(1))["data"]
    markers = [t for t in data if t["mode"] == "markers"]
    assert sum(len(t["x"]) for t in markers) == len(validation.points())
    assert {t["name"] for t in data if t["mode"] == "lines"} == {"y = x", "+20 %", "−20 %"}
