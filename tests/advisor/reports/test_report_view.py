"""The report on the job page: every section from a stored result, escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.utils.html import escape

from profiling import units
from profiling.parallel.results import MeasuredTP
from tests.advisor.cachedata import (
    SKIPPED_REASON,
    caching_result,
    measured_tp,
    parallel_result,
    point,
    with_caching,
    with_parallel,
)
from tests.advisor.pages import (
    caching_report,
    parallel_report,
    quant_report,
    report_html,
    table_rows,
)
from tests.advisor.quantdata import INT4_REASON, quantization_result, with_quantization

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_a_succeeded_job_is_its_report(browser, demo_result):
    html = report_html(browser, demo_result, stated_bottleneck="generation", ttft_ms=500)
    for part in ("verdict", "memory", "prefill", "decode", "environment"):
        assert f'id="{part}"' in html
    for chart in ("chart-memory", "chart-prefill", "chart-decode"):
        assert f'<script id="{chart}" type="application/json">' in html
    assert "/static/plotly/plotly.min.js" in html
    assert "Speed up token generation" in html  # what the user wrote down
    assert "dominates" in html  # what was measured
    assert "Time to first token" in html and "500 ms" in html
    assert " ms<" in html and " tok/s<" in html and " GiB<" in html and " GB/s<" in html
    assert "config only" not in html.lower()
    assert "Download result.json" in html


def test_noisy_points_are_flagged(browser, demo_result):
    # One real measurement made noisy: its slowest sample doubled.
    samples = demo_result["prefill"][0]["seconds"]["samples"]
    samples[samples.index(max(samples))] *= 3
    html = report_html(browser, demo_result)
    from profiling.profile import Profile

    profile = Profile.from_dict(demo_result)
    noisy = sum(p.seconds.noisy for p in profile.prefill) + sum(
        p.seconds_per_token.noisy for p in profile.decode
    )
    assert noisy >= 1
    assert html.count('<tr class="noisy">') == noisy


def test_a_config_only_result_carries_the_banner(browser, demo_result):
    demo_result["model"]["config_only"] = True
    html = report_html(browser, demo_result)
    assert "Config only — random weights:" in html
    assert "valid for memory and time, not quality" in html


def test_a_report_without_speculative_has_no_such_section(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="speculative"' not in html and "chart-speculative" not in html


def test_a_speculative_result_shows_the_finding_chart_table_and_trace(browser, spec_result):
    speculative = spec_result["speculative"]
    html = report_html(browser, spec_result)
    assert 'id="speculative"' in html
    assert '<script id="chart-speculative" type="application/json">' in html
    assert escape(speculative["finding"]) in html
    assert html.count('class="best"') == len(speculative["best_k"])
    for draft in speculative["draft_memory"]:
        assert f"<td>{draft['name']}</td>" in html
    trace = html.split('id="spec-trace"')[1].split("</ol>")[0]
    assert trace.count('<li class="step">') == len(speculative["trace"])
    rejected = [s for s in speculative["trace"] if s["accepted_count"] < len(s["proposed"])]
    assert rejected, "a real demo-draft trace has rejections"
    assert trace.count('<del class="tok rej">') == len(rejected)
    assert trace.count('<span class="tok acc">') == sum(
        s["accepted_count"] for s in speculative["trace"]
    )
    assert ('id="spec-random-banner"' in html) is (not speculative["acceptance_meaningful"])


def test_token_text_in_the_trace_is_escaped(browser, spec_result):
    step = spec_result["speculative"]["trace"][0]
    step["proposed_text"][0] = "<script>alert(1)</script>"
    step["target_text"] = "<b>x</b>"
    html = report_html(browser, spec_result)
    assert "<script>alert(1)</script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_random_weights_show_the_verify_cost_banner(browser, spec_result):
    spec_result["speculative"]["acceptance_meaningful"] = False
    html = report_html(browser, spec_result)
    assert 'id="spec-random-banner"' in html
    assert "only the verify-cost curve" in html


def test_the_page_says_which_path_the_speculative_timings_ran_on(browser, spec_result):
    # A result stored before the verify cost ran on the baseline's path has no note.
    assert "timing_note" not in spec_result["speculative"]
    assert 'id="spec-timing-note"' not in report_html(browser, spec_result)
    spec_result["speculative"]["timing_note"] = "The verify cost runs on the <static> path."
    html = report_html(browser, spec_result)
    assert 'id="spec-timing-note"' in html
    assert escape("The verify cost runs on the <static> path.") in html


def test_a_report_without_quantization_has_no_such_section(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="quantization"' not in html and "chart-quantization" not in html


def test_a_quantization_result_shows_the_finding_chart_and_a_row_per_variant(browser, demo_result):
    result = quantization_result()
    html = quant_report(browser, demo_result)
    assert 'id="quantization"' in html
    assert '<script id="chart-quantization" type="application/json">' in html
    assert escape(result.finding) in html
    table = html.split('id="quant-variants"')[1].split("</table>")[0]
    rows = table.split("<tbody>")[1].split("</tr>")[:-1]
    assert [re.search(r"<td>([^<]+)", row).group(1).strip() for row in rows] == [
        "fp32", "int8", "int4",
    ]  # fmt: skip
    reference, int8, int4 = rows
    assert 'class="variant measured reference"' in reference and "×" not in reference
    for cell in ("1.91 MiB", "4.0× smaller", "2.86 MiB", "3.0× smaller", "56.0 ms", "14.0 ms",
                 "71.4 tok/s", "286 tok/s", "1.4× slower", "12.9", "1.03× higher", "96.0 %",
                 "0.0123 nats"):  # fmt: skip
        assert cell in int8, cell
    assert "not available here" in int4 and escape(INT4_REASON) in int4
    assert "Decode, batch 8" in table
    assert 'id="quant-random-banner"' not in html
    settings = html.split('id="quant-settings"')[1].split("</details>")[0]
    assert "torchao 0.18.0" in settings and "<td>lm_head</td>" in settings
    assert 'title="on a CPU, compiling costs more than it saves"><code>static</code>' in settings
    assert "<code>eager</code>" in settings  # the reference, as results written before read


def test_a_variant_that_does_not_fit_says_so_with_its_reason(browser, demo_result):
    result = quantization_result()
    int4 = result.variants[2]
    int4.status, int4.reason = "does_not_fit", "CUDA out of memory while loading"
    html = report_html(browser, with_quantization(demo_result, result))
    row = html.split('class="variant does_not_fit"')[1].split("</tr>")[0]
    assert "does not fit" in row and "CUDA out of memory while loading" in row


def test_greedy_outputs_mark_the_first_divergence_on_both_sides(browser, demo_result):
    html = quant_report(browser, demo_result)
    greedy = html.split('<table class="data greedy">')[1].split("</table>")[0]
    diverging, identical = greedy.split("<tbody>")[1].split("</tr>")[:2]
    reference, variant = diverging.split('<td class="tokens">')[1:]
    assert reference.startswith(
        '<span class="gtok same">·the</span><span class="gtok same">·cat</span>'
        '<span class="gtok same">·sat</span><mark class="gtok diverge">·on</mark>'
        '<span class="gtok after">·the</span><span class="gtok after">·mat</span>'
    )
    assert '<mark class="gtok diverge">·in</mark><span class="gtok after">·a</span>' in variant
    assert "differs from token 4" in diverging
    assert "identical" in identical and "diverge" not in identical


def test_model_text_and_reasons_in_the_quantization_section_are_escaped(browser, demo_result):
    result = quantization_result()
    int8, int4 = result.variants[1], result.variants[2]
    int8.samples[0].text[3] = "<script>alert(1)</script>"
    int8.samples[0].prompt = "<img src=x onerror=alert(2)>"
    int4.reason = "<script>alert(3)</script>"
    html = report_html(browser, with_quantization(demo_result, result))
    for raw in ("<script>alert(1)</script>", "<img src=x", "<script>alert(3)</script>"):
        assert raw not in html
    assert '<mark class="gtok diverge">&lt;script&gt;alert(1)&lt;/script&gt;</mark>' in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in html


def test_random_weights_show_the_quality_banner(browser, demo_result):
    html = quant_report(browser, demo_result, quality_meaningful=False)
    banner = html.split('id="quant-random-banner"')[1].split("</div>")[0]
    assert "quality is not meaningful" in banner and "memory and speed are real" in banner


def test_an_unreadable_result_is_a_message_not_a_500(browser):
    html = report_html(browser, {"schema_version": 99, "something": "else"})
    assert "could not be read" in html


def test_a_report_without_caching_or_parallel_has_no_such_sections(browser, demo_result):
    html = report_html(browser, demo_result)
    assert 'id="caching"' not in html and 'id="parallel"' not in html
    assert "chart-caching" not in html and "chart-interference" not in html


def test_the_caching_section_shows_the_finding_chart_and_sweep(browser, demo_result):
    html = caching_report(browser, demo_result)
    section = html.split('<section id="caching">')[1].split("</section>")[0]
    assert "Your prompts share 61 % of their tokens" in section  # capitalised finding
    assert '<script id="chart-caching" type="application/json">' in section
    rows = table_rows(section, "cache-sweep")
    assert len(rows) == 5
    half = rows[2]
    for cell in ("256", "50.0 %", "200 ms", "110 ms", "0.55×", "45.0 % less", "768 KiB", "✓"):
        assert cell in half, cell
    assert ">within noise<" in rows[0]  # nothing cached: warm/cold 1.00, inside its repeats
    assert "✗" not in section and 'id="cache-mismatch-banner"' not in section
    shared = table_rows(section, "cache-shared")
    assert len(shared) == 1 and "180 ms" in shared[0] and "12.5 %" in shared[0]
    turns = table_rows(section, "cache-turns")
    assert len(turns) == 3 and "408" in turns[2] and "150 ms" in turns[2]
    assert "prefix 0 tokens cold is noisy" in section


def test_the_users_prompts_show_reuse_hit_rate_histogram_and_saving(browser, demo_result):
    html = caching_report(browser, demo_result)
    sample = html.split('id="cache-sample"')[1].split("</dl>")[0]
    for text in ("12", "736", "452", "61.4 %", "91.7 % of prompts", "852 KiB"):
        assert text in sample, text
    saving = sample.split('id="cache-sample-saving"')[1]
    assert "200 ms cold" in saving and "90.0 ms" in saving and "55.0 % less" in saving
    assert '<script id="chart-caching-sample" type="application/json">' in html
    assert 'id="cache-sample-empty"' not in html


def test_without_a_sample_the_section_says_how_to_add_one(browser, demo_result):
    html = caching_report(browser, demo_result, prompt_sample=None, finding="")
    empty = html.split('id="cache-sample-empty"')[1].split("</div>")[0]
    assert "No prompt sample was given" in empty and "--prompts FILE" in empty
    assert 'href="/"' in empty
    assert "chart-caching-sample" not in html


def test_without_a_shared_prefix_it_says_how_to_set_one(browser, demo_result):
    html = caching_report(
        browser, demo_result, shared_prefix=None, shared_prefix_requested_tokens=0
    )
    assert 'id="cache-shared"' not in html
    assert "Shared-prefix tokens" in html.split('id="cache-no-shared"')[1]


def test_a_point_whose_outputs_differ_is_flagged_on_its_row_and_in_a_banner(browser, demo_result):
    sweep = caching_result().prefix_sweep
    sweep[3] = point(384, 0.070, match=False)
    html = caching_report(browser, demo_result, prefix_sweep=sweep)
    banner = html.split('id="cache-mismatch-banner"')[1].split("</div>")[0]
    assert "Outputs differ with a reused cache at 1 point:" in banner
    rows = table_rows(html, "cache-sweep")
    assert 'class="cache-point mismatch' in rows[3] and "✗ outputs differ" in rows[3]
    assert all("✗" not in row for i, row in enumerate(rows) if i != 3)


def test_the_parallel_section_shows_plans_with_the_fewest_that_fit(browser, demo_result):
    html = parallel_report(browser, demo_result)
    section = html.split('<section id="parallel">')[1].split("</section>")[0]
    assert "The fewest L4 GPUs that hold 8 requests × 4096 tokens: 2" in section
    assert "A prefill of 256 tokens joining" not in section.split("<h3>")[0]  # shown below
    basis = section.split('id="parallel-basis"')[1].split("</p>")[0]
    assert "measured" in basis and "checked them against the real split" in basis
    rows = table_rows(section, "parallel-plans")
    assert [re.findall(r'<td class="num">(\d+)</td>', r)[:3] for r in rows] == [
        ["1", "1", "1"], ["2", "1", "2"], ["1", "2", "2"], ["4", "1", "4"],
    ]  # fmt: skip
    assert "✗" in rows[0] and "weights alone exceed the device" in rows[0]
    assert 'class="plan fewest"' in rows[1] and "fewest devices that fit" in rows[1]
    assert "3.73 GiB" in rows[1] and "1.86 GiB" in rows[1] and "5.59 GiB" in rows[1]
    assert "fewest" not in rows[2]  # as few devices, but not the one the library chose


def test_the_measured_tp_run_shows_per_rank_weights_ratios_and_outputs(browser, demo_result):
    html = parallel_report(browser, demo_result)
    measured = html.split('id="tp-measured"')[1].split("</table>")[0]
    assert measured.count("Weights, rank") == 2 and "1.9× smaller" in measured
    assert "4.01 MiB" in measured and "7.69 MiB" in measured
    assert "30.0 ms" in measured and "20.0 ms" in measured and "1.50×" in measured
    assert "1.5× slower" in measured
    assert "✓" in measured and "0.00000200" in measured


def test_a_tp_run_that_was_skipped_or_failed_gives_its_reason(browser, demo_result):
    skipped = MeasuredTP(status="skipped", reason=SKIPPED_REASON)
    html = parallel_report(browser, demo_result, measured=skipped)
    note = html.split('id="tp-not-measured"')[1].split("</p>")[0]
    assert "not run" in note and escape(SKIPPED_REASON) in note
    assert "estimated from shapes" in html.split('id="parallel-basis"')[1].split("</p>")[0]
    failed = MeasuredTP(status="failed", reason="torchrun failed: exit 1")
    html = parallel_report(browser, demo_result, measured=failed)
    assert 'class="note warn" id="tp-not-measured"' in html
    assert "torchrun failed: exit 1" in html


def test_tp_outputs_that_differ_are_flagged(browser, demo_result):
    html = parallel_report(browser, demo_result, measured=measured_tp(greedy_tokens_match=False))
    measured = html.split('id="tp-measured"')[1].split("</table>")[0]
    assert "✗ outputs differ" in measured and "greedy tokens differ" in measured


def test_disaggregation_shows_interference_ratio_and_kv_transfer(browser, demo_result):
    html = parallel_report(browser, demo_result)
    assert '<script id="chart-interference" type="application/json">' in html
    split = html.split('id="disaggregation"')[1].split("</dl>")[0]
    assert "20.0 ms alone → 80.0 ms" in split and "(4.0×)" in split
    assert '<strong class="big" id="pd-ratio">1 prefill : 3 decode</strong>' in split
    transfer = split.split('id="kv-transfer"')[1].split("</dd>")[0]
    assert "1.50 MiB" in transfer and "0.00870 ms" in transfer and "NVLink 4" in transfer
    assert "180 GB/s" in transfer
    assert 'mixed <span class="bad">missed</span>' in split


def test_kv_transfer_without_a_link_says_how_to_get_one(browser, demo_result):
    result = parallel_result()
    result.disaggregation.kv_transfer_seconds = result.disaggregation.link = None
    html = report_html(browser, with_parallel(demo_result, result))
    transfer = html.split('id="kv-transfer"')[1].split("</dd>")[0]
    assert "1.50 MiB" in transfer and "choose a target GPU" in transfer


def test_script_in_warnings_notes_and_reasons_is_escaped(browser, demo_result):
    attack = "<script>alert(1)</script>"
    caching = caching_result(warnings=[attack], finding=f"finding {attack}")
    parallel = parallel_result(
        measured=MeasuredTP(status="failed", reason=attack),
        notes=[f"note {attack}"], warnings=[f"warning {attack}"],
    )  # fmt: skip
    parallel.plans[0].note = attack
    parallel.disaggregation.link = attack
    result = with_parallel(with_caching(demo_result, caching), parallel)
    html = report_html(browser, result)
    assert attack not in html
    escaped = escape(attack)
    assert html.count(escaped) >= 6
    for where in ('id="caching"', 'id="parallel-plans"', 'id="tp-not-measured"'):
        assert escaped in html.split(where)[1]


def test_a_real_cli_result_renders_both_sections(browser):
    result = json.loads((FIXTURES / "cli_caching_parallel.json").read_text())
    html = report_html(browser, result)
    for part in ('id="caching"', 'id="parallel"', 'id="cache-sweep"', 'id="parallel-plans"',
                 'id="cache-sample"', 'id="disaggregation"', 'id="tp-not-measured"'):  # fmt: skip
        assert part in html, part
    assert len(table_rows(html, "cache-sweep")) == len(result["caching"]["prefix_sweep"])
    assert len(table_rows(html, "parallel-plans")) == len(result["parallel"]["plans"])
    assert escape(result["disaggregation"]["workers"]) in html
    for chart in ("chart-caching", "chart-caching-sample", "chart-interference"):
        assert f'<script id="{chart}" type="application/json">' in html


def test_below_the_answer_each_section_is_folded_under_its_finding(browser, demo_result):
    html = report_html(browser, demo_result)
    assert html.index('id="summary"') < html.index('id="fold-verdict"')
    folds = re.findall(r'<details class="fold" id="fold-([a-z-]+)"( open)?>', html)
    names = [name for name, _ in folds]
    assert names[:2] == ["verdict", "advice"] and "environment" in names and "what-if" in names
    assert not any(opened for _, opened in folds)
    decode = html.split('id="fold-decode"')[1].split("</summary>")[0]
    fastest = max(p["tokens_per_second"] for p in demo_result["decode"])
    assert f"fastest {units.tok_s(fastest)} of output" in decode
    verdict = html.split('id="fold-verdict"')[1].split("</summary>")[0]
    assert escape(demo_result["verdict"]["summary"]) in verdict


def test_a_what_if_that_was_sent_opens_its_section(browser, demo_result):
    job_html = report_html(browser, demo_result)
    token = re.search(r"/jobs/([A-Za-z0-9_-]+)/result.json", job_html).group(1)
    html = browser.get(f"/jobs/{token}/", {"whatif-gpu_count": "2"}).content.decode()
    assert '<details class="fold" id="fold-what-if" open>' in html
    assert '<details class="fold" id="fold-memory">' in html


def test_measured_tables_name_their_units_in_the_headers_and_the_cells_agree(browser, demo_result):
    import re

    html = report_html(browser, demo_result)
    for part in ("prefill", "decode"):
        start = html.index(f'id="{part}"')
        table = html[start : html.index("</table>", start)]
        headers = re.findall(r"<th[^>]*>(.*?)</th>", table.split("</thead>")[0])
        named = {i: re.search(r"\(([^)]+)\)$", h) for i, h in enumerate(headers)}
        assert sum(m is not None for m in named.values()) >= 4, (part, headers)
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>")[1], re.S):
            cells = [
                re.sub(r"<[^>]+>", "", c).strip()
                for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            ]
            for i, unit in named.items():
                if unit is not None:
                    assert cells[i].endswith(unit.group(1)), (part, headers[i], cells[i])
