"""The conversations section of a report: a stored profile of the demo model whose job
asked for conversations, projected as the worker projects them (`attach_conversations`),
then rendered by the site. The chart's marks and points are the figures the table says,
the offload advice reaches the answer when it is the fix, and a section this version
cannot read is left off the page, never a server error."""

from __future__ import annotations

import json
import re

import pytest

from advisor.jobs.profile_config import config_for
from advisor.jobs.submission import check
from profiling.advice.job_conversations import attach_conversations
from profiling.advice.summary import render_summary
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.projection.estimate import shipped_configs
from profiling.units import GIB, pct, size
from tests.advisor.reports.test_charts import real_demo_profile
from tests.advisor.reports.test_one_story import rendered, section, text

pytestmark = pytest.mark.django_db


def conversation_profile(turns: int = 4, **hardware) -> Profile:
    profile = Profile.from_dict(real_demo_profile())
    work = profile.config.workload
    work.conversation_turns, work.conversation_think_s = turns, 5.0
    for name, value in hardware.items():
        setattr(profile.config.hardware, name, value)
    attach_conversations(profile, None)  # measured on CPU: no GPU of its own
    return profile


def chart(page: str) -> dict:
    found = re.search(r'<script id="chart-conversations" type="application/json">(.*?)</script>',
                      page)  # fmt: skip
    assert found, "no conversations chart on the page"
    return json.loads(found.group(1))


def trace(figure: dict, name: str) -> dict:
    return next(t for t in figure["data"] if t["name"] == name)


def test_the_chart_marks_the_gpus_capacity_and_the_host_tier_at_the_tables_figures(client):
    profile = conversation_profile(host_memory_gib=512.0)
    section_json = profile.conversations
    served, tier = section_json["served"], section_json["host_tier"]
    _, page = rendered(client, profile.to_dict())
    part = section(page, "conversations")
    figure = chart(page)
    gib = served["kv_bytes_per_token"] / GIB
    lines = {s["label"]["text"]: s["x0"] for s in figure["layout"]["shapes"]}
    assert lines["your GPUs' KV cache"] == pytest.approx(served["capacity_tokens"] * gib)
    host = lines[f"host tier {size(tier['host_bytes'])}"]
    assert host == pytest.approx(tier["host_tokens"] * gib)
    # The GPUs' point is the replay at their capacity, the very hit rate the table states.
    gpus = trace(figure, "your GPUs")
    assert gpus["y"] == [pytest.approx(served["hit_rate"] * 100)]
    assert f"Prefix-cache hit rate {pct(served['hit_rate'])} of prompt tokens" in text(part)
    assert trace(figure, "with the host tier")["y"] == [pytest.approx(tier["tier_hit_rate"] * 100)]
    # The curve is replayed: it rises with capacity, and passes through the GPUs' point.
    curve = trace(figure, "hit rate (replayed)")
    assert curve["y"] == sorted(curve["y"]) and curve["x"] == sorted(curve["x"])
    assert served["capacity_tokens"] in curve["customdata"]
    assert 0 < served["hit_rate"] <= served["reusable_rate"]
    # The capacity names the precision it is counted in: the deployment's bfloat16 on the
    # H100, where the memory section's fit counts this CPU run's float32.
    kv = served["kv_bytes_per_token"]
    assert f"{served['capacity_tokens']:,} tokens (" in text(part)
    assert f"of bfloat16 KV, {kv:,} bytes a token" in text(part)
    assert kv * 2 == profile.memory.kv_cache_bytes_per_token  # float32 measured
    # The demo's conversations fit an H100's KV many times over: no tier, and why.
    assert "No host-memory tier: fits already" in text(part)
    assert "not applicable on CPU" in text(part)


def test_the_profile_command_prints_the_same_section():
    profile = conversation_profile(host_memory_gib=512.0)
    served = profile.conversations["served"]
    printed = render_summary(profile)
    assert f"hit rate {served['hit_rate']:.0%} of prompt tokens" in printed
    assert "offload: not recommended, fits already" in printed


def l4_chats(bottleneck: str | None = None) -> Profile:
    """The same stored run, deployed as Llama 3.1 8B (its shipped shapes) on one L4 with
    32 users of 5-turn chats: their histories need about twice the KV the L4 keeps."""
    profile = Profile.from_dict(real_demo_profile())
    if bottleneck:
        profile.advice.bottleneck = bottleneck
    profile.model.shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    work, hardware = profile.config.workload, profile.config.hardware
    work.prompt_tokens, work.shared_prefix_tokens, work.output_tokens = 712, 512, 100
    work.concurrency, work.conversation_turns, work.conversation_think_s = 32, 5, 10.0
    work.ttft_ms = None
    hardware.gpu_kind, hardware.host_memory_gib = "L4", 64.0
    attach_conversations(profile, None)
    return profile


def test_the_tier_is_in_the_answer_where_it_is_the_fix(client):
    profile = l4_chats()
    advice = profile.conversations["advice"]
    assert advice["recommended"], advice
    assert "--kv-offloading-backend native --kv-offloading-size" in advice["setting"]
    assert any(r.setting == advice["setting"] for r in profile.advice.recommendations)
    _, page = rendered(client, profile.to_dict())
    said = text(section(page, "conversations"))
    assert "Offload KV to host memory:" in said and advice["expected_effect"]["text"] in said
    answer = text(section(page, "advice"))
    assert "--kv-offloading-size" in answer and 'href="#conversations"' in section(page, "advice")


def test_where_the_prompt_is_the_bottleneck_the_tier_is_the_first_action_and_the_line_says_so():
    profile = l4_chats(bottleneck="prompt")
    first = profile.advice.first
    assert first.setting == profile.conversations["advice"]["setting"]
    said = f"First: {first.setting} ({first.expected_effect.text}; estimated)."
    assert profile.advice.summary.endswith(said)


def test_without_a_gpu_the_conversations_are_a_warning_not_a_section(client):
    profile = conversation_profile(gpu_kind=None)
    assert profile.conversations is None
    assert "no GPU was named" in profile.warnings[-1]
    _, page = rendered(client, profile.to_dict())
    assert 'id="conversations"' not in page


def test_without_a_gpu_the_hit_check_measured_on_the_worker_is_on_the_page(client):
    # What a CPU worker keeps of a conversation file when no GPU is named: the warm TTFT
    # measured at the replay's hit positions against the projection fitted on the worker.
    from profiling.caching.conversation_estimate import hit_check_line
    from profiling.caching.hit_check import AGREES, HitCheck, HitPoint, Projected
    from profiling.results import Samples

    point = HitPoint(conversation="c1", turn=3, replayed_cached_tokens=192,
                     replayed_new_tokens=19, cached_tokens=192, new_tokens=19,
                     warm_ttft_seconds=Samples([2.1e-3, 2.2e-3, 2.3e-3]),
                     cold_ttft_seconds=Samples([9.0e-3, 9.1e-3, 9.2e-3]),
                     projected=Projected(2.2e-3, 1.0e-3, 4.0e-3, 9.5e-3),
                     verdict=AGREES, ratio=1.0)  # fmt: skip
    check = HitCheck(device="cpu", capacity_tokens=None, interval="×/÷ 2.2 (leave-one-out)",
                     points=[point], note="replayed at an unlimited cache")  # fmt: skip
    section = {"source": "your file chats.jsonl", "engine_check": "not applicable on CPU: …",
               "hit_check": check.to_dict()}  # fmt: skip
    result = real_demo_profile()
    result["conversations"] = section
    _, page = rendered(client, result)
    part = page.split('id="conversations"')[1].split("</section>")[0]
    assert hit_check_line(section) in part
    assert "×/÷ 2.2 (leave-one-out)" in part and "replayed at an unlimited cache" in part
    assert "no GPU was named" in part and 'id="chart-conversations"' not in part


BROKEN = [{"served": 3}, {"served": {}, "host_tier": []}, {"served": {"curve": "x"}}]


@pytest.mark.parametrize("broken", BROKEN)
def test_a_section_this_version_cannot_read_is_left_off_the_page(client, broken):
    result = real_demo_profile()
    result["conversations"] = broken
    job, page = rendered(client, result)
    assert 'id="summary"' in page and 'id="conversations"' not in page


def test_a_conversation_workload_goes_from_the_api_to_the_workers_config(cpu_worker):
    values = {"model_source": "demo", "model_name": "demo", "gpu_kind": "L4", "run_on": "cpu",
              "conversation_turns": 5, "conversation_think_s": 10.0,
              "host_memory_gib": 64.0}  # fmt: skip
    form, errors = check(values)
    assert not errors, errors
    job = form.save()
    config = config_for(job)
    assert (config.workload.conversation_turns, config.workload.conversation_think_s) == (5, 10.0)
    assert config.hardware.host_memory_gib == 64.0


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("conversation_turns", 0, "greater than or equal to 1"), ("conversation_turns", 2.5, "whole"),
     ("conversation_think_s", -1.0, "greater than or equal to 0"),
     ("host_memory_gib", 0.5, "greater than or equal to 1")],
)  # fmt: skip
def test_bad_conversation_values_are_refused_on_their_field(cpu_worker, field, value, words):
    form, errors = check({"model_source": "demo", "model_name": "demo", field: value})
    assert form is None and list(errors) == [field]
    assert words in errors[field][0]


def test_the_engines_replay_is_a_row_beside_the_projection_and_its_offload_another(client):
    from profiling.advice.job_conversations import attach_engine_replay
    from profiling.engine.results import EngineResult
    from profiling.projection.host_tier import OFFLOAD_CPU_REASON
    from tests.engine.test_chat_replay import sample_result

    profile = conversation_profile()
    profile.engine = EngineResult("vllm", "0.32.0", "", "", "float32", 1024,
                                  conversations=sample_result())  # fmt: skip
    attach_engine_replay(profile, "cpu")
    stored = profile.conversations
    assert stored["engine_replay"]["reference"]["hits"] == 128
    assert stored["engine_check"].startswith("vllm 0.32.0, 2 turns")
    _, page = rendered(client, profile.to_dict())
    said = text(section(page, "conversations"))
    assert "hit rate 50.0% measured, 50.0% projected at the engine's 39,040 tokens" in said
    assert f"Offload on the engine {OFFLOAD_CPU_REASON}" in said
