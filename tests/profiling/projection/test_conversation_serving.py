"""Conversations served at the KV capacity the deployment leaves: the cache's hits feed the
serving projection, fp8 KV widens them, and the host tier is recommended only where it
pays (and, where not, for the right one of three reasons)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from profiling.caching.conversation_estimate import engine_check
from profiling.caching.offload import host_tier_advice
from profiling.measure.bandwidth import host_to_device
from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.projection.calibration import assumed
from profiling.projection.conversation_serving import Setup, prepare, project_conversations
from profiling.projection.conversation_workloads import MAX_TURNS, SyntheticSpec, synthetic
from profiling.projection.estimate import Deployment, shipped_configs
from profiling.projection.host_tier import (
    host_bytes_of,
    host_link,
    offload_flags,
    project_host_tier,
    worker_memory_bytes,
)
from profiling.projection.step_time import StepModel
from profiling.technique_kit.advice_results import NotRecommended, Recommendation
from profiling.units import GIB
from tests.profiling.projection.test_conversations import turns_file

# 200 conversations of 5 turns after a 512-token system prompt: 32 users' histories need
# ~60k tokens of KV, about twice what an L4 holds beside Llama 3.1 8B's bf16 weights.
CHATS = SyntheticSpec(200, turns=5, user_tokens=200, output_tokens=100, system_tokens=512,
                      think_seconds=10.0)  # fmt: skip
HOST = 64 * GIB


def llama8b() -> Shapes:
    return Shapes.from_config(shipped_configs()["llama-3.1-8b"])


def served(gpu_kind: str, spec: SyntheticSpec, users: int, kv_dtype: str = ""):
    shapes, gpu = llama8b(), lookup(gpu_kind)
    rates = assumed(gpu, "bfloat16", shapes.num_layers)
    setup = Setup(users, Deployment(gpu, kv_dtype=kv_dtype))
    return project_conversations(shapes, rates, "bfloat16", synthetic(spec), setup)


def tier(gpu_kind: str, spec: SyntheticSpec, users: int, host: int = HOST,
         link: float | None = None):  # fmt: skip
    shapes, gpu = llama8b(), lookup(gpu_kind)
    rates = assumed(gpu, "bfloat16", shapes.num_layers)
    setup = Setup(users, Deployment(gpu, 1))
    prepared = prepare(shapes, rates, "bfloat16", synthetic(spec), setup)
    step = StepModel(shapes, rates, "bfloat16", "", 1, gpu)
    return project_host_tier(prepared, step, setup, host_bytes=host, measured_link=link)


def test_fp8_kv_doubles_the_capacity_and_the_hits_it_keeps_shorten_the_prefill():
    bf16 = served("L4", CHATS, users=32)
    fp8 = served("L4", CHATS, users=32, kv_dtype="float8")
    assert fp8.capacity_tokens == pytest.approx(2 * bf16.capacity_tokens, rel=0.01)
    assert bf16.hit_rate < fp8.hit_rate <= fp8.reusable_rate
    assert bf16.hit_rate < bf16.reusable_rate  # bf16 loses some of the reuse to eviction
    # The hits reach the serving projection: each turn prefills less than without them.
    for projection in (bf16, fp8):
        assert projection.warm.prefill_alone_seconds < projection.cold.prefill_alone_seconds
        assert projection.cached_tokens_per_request == pytest.approx(
            projection.prefill_tokens_saved / projection.summary.turns
        )
    assert fp8.warm.prefill_alone_seconds < bf16.warm.prefill_alone_seconds


def test_the_hit_rate_curve_marks_the_capacity_and_rises_with_it():
    result = served("L4", CHATS, users=32)
    capacities = [point.capacity_tokens for point in result.curve]
    assert result.capacity_tokens in capacities
    rates = [point.hit_rate for point in result.curve]
    assert rates == sorted(rates)
    at = rates[capacities.index(result.capacity_tokens)]
    assert at == pytest.approx(result.hit_rate)


def test_the_tier_is_recommended_with_vllms_flags_where_the_gpu_loses_reuse():
    projected = tier("L4", CHATS, users=32)
    advice = host_tier_advice(projected)
    assert isinstance(advice, Recommendation), advice
    assert projected.gpu_hit_rate < projected.tier_hit_rate
    assert projected.load_seconds < projected.recompute_seconds
    assert "--kv-offloading-backend native --kv-offloading-size" in advice.setting
    assert advice.gain >= 1.05
    # The size chosen is no larger than the host memory named, and holds the gain.
    chosen = int(advice.setting.rsplit(" ", 1)[-1]) * GIB
    assert chosen <= HOST
    assert projected.link.basis == "estimated"


@pytest.mark.parametrize("host", [HOST, GIB])
def test_it_is_not_recommended_when_everything_fits_already(host):
    # Whatever the host memory, even less than the GPU's cache: fitting is the reason.
    advice = host_tier_advice(tier("H100", CHATS, users=32, host=host))
    assert isinstance(advice, NotRecommended)
    assert advice.why.startswith("fits already")


def test_it_is_not_recommended_without_reuse():
    one_turn = SyntheticSpec(300, turns=1, user_tokens=200, output_tokens=100)
    advice = host_tier_advice(tier("L4", one_turn, users=32))
    assert isinstance(advice, NotRecommended)
    assert advice.why.startswith("no reuse")


# A 256-token turn's 160-token hit: 20 MiB of Llama 3.1 8B's bf16 KV, against ~37 ms of the
# L4's assumed arithmetic to recompute it. Over the datasheet's PCIe 4.0 the load takes
# under 1 ms; a host link measured at 0.25 GB/s (a shared or virtualised GPU) takes ~80 ms.
SLOW_LINK = 0.25e9


@pytest.mark.parametrize("link", [None, SLOW_LINK])
def test_a_256_token_prompt_is_loaded_only_where_the_load_beats_its_recompute(link):
    # Two turns: the second's prompt is 96 + 64 + 96 = 256 tokens, 160 of them a hit the
    # tier keeps (256 users overflow the L4's cache). Recomputing the hit costs its
    # arithmetic; loading it costs its bytes over the host link.
    short = SyntheticSpec(1000, turns=2, user_tokens=96, output_tokens=64, think_seconds=5.0)
    projected = tier("L4", short, users=256, link=link)
    assert projected.tier_hit_rate > projected.gpu_hit_rate
    advice = host_tier_advice(projected)
    if link is None:
        assert projected.load_seconds < projected.recompute_seconds
        assert isinstance(advice, Recommendation)
    else:
        assert projected.load_seconds > projected.recompute_seconds
        assert isinstance(advice, NotRecommended)
        assert advice.why.startswith("loads slower than recompute")


def test_a_tier_smaller_than_the_gpus_cache_adds_nothing():
    advice = host_tier_advice(tier("L4", CHATS, users=32, host=GIB))
    assert isinstance(advice, NotRecommended) and advice.why.startswith("too small")


def test_the_host_link_is_the_measured_one_where_there_is_one():
    assert host_link(lookup("H100"), 25e9).basis == "measured"
    assert host_link(lookup("GH200")).bytes_per_second == 450e9
    assert host_link(lookup("L4")).name.startswith("PCIe 4.0")
    assert offload_flags(int(7.5 * GIB)) == [
        "--kv-offloading-backend", "native", "--kv-offloading-size", "8"
    ]  # fmt: skip


def test_the_estimate_command_reports_the_conversations_and_the_tiers_advice(tmp_path):
    out = tmp_path / "e.json"
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", "llama-3.1-8b", "--gpu", "L4",
         "--prompt-tokens", "712", "--shared-prefix-tokens", "512", "--output-tokens", "100",
         "--concurrency", "32", "--conversation-turns", "5", "--think-seconds", "10",
         "--host-memory-gib", "64", "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    section = json.loads(out.read_text())["conversations"]
    tier, served = section["host_tier"], section["served"]
    assert tier["host_bytes"] == 64 * GIB
    assert served["hit_rate"] == pytest.approx(tier["gpu_hit_rate"])
    assert section["advice"]["recommended"]
    # The same tier is in the one ranked answer, not only in its own section.
    ranked = json.loads(out.read_text())["advice"]["recommendations"]
    assert section["advice"]["setting"] in [r["setting"] for r in ranked]
    flag = section["advice"]["setting"].rsplit(" ", 1)[-1]
    assert f"--kv-offloading-size {flag}" in done.stdout
    assert f"hit rate {served['hit_rate']:.0%} of prompt tokens" in done.stdout
    assert section["engine_check"].startswith("not measured: an estimate runs no engine")
    assert section["source"].startswith("synthetic: 5 turns per conversation")


def test_without_conversation_turns_the_estimate_has_no_conversation_section(tmp_path):
    out = tmp_path / "e.json"
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", "llama-3.1-8b", "--gpu", "L4",
         "--json", str(out)], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["conversations"] is None
    assert "Conversations (" not in done.stdout


def test_the_engine_check_is_not_applicable_on_cpu():
    assert engine_check("cpu").startswith("not applicable on CPU")
    assert host_to_device("cpu") is None


CHAT_FILE = "\n".join(
    json.dumps(line)
    for line in (
        {"conversation_id": "a", "messages": [
            {"role": "system", "content": "You are a helpful assistant. " * 8},
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "Paris is the capital of France."},
            {"role": "user", "content": "And of Germany?"}]},
        {"id": "b", "conversations": [
            {"from": "system", "value": "You are a helpful assistant. " * 8},
            {"from": "human", "value": "Name a prime number."},
            {"from": "gpt", "value": "Seven."}]},
    )
)  # fmt: skip


def estimate_file(model: str, chats: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "chats.jsonl"
    path.write_text(chats)
    return subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", model, "--gpu", "L4",
         "--concurrency", "1", "--conversations", str(path), "--json", str(tmp_path / "e.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_conversation_file_is_tokenized_by_the_models_tokenizer_and_replayed(
    demo_model_dir, tmp_path
):
    from transformers import AutoTokenizer

    done = estimate_file(str(demo_model_dir), CHAT_FILE, tmp_path)
    assert done.returncode == 0, done.stderr
    section = json.loads((tmp_path / "e.json").read_text())["conversations"]
    served = section["served"]
    assert (served["summary"]["conversations"], served["summary"]["turns"]) == (2, 3)
    assert section["source"] == "your file chats.jsonl"
    assert "  from your file chats.jsonl" in done.stdout
    # One user: a's first turn, a's second, then b. The second turn reuses a's whole first
    # turn and its reply; b reuses the system prompt a sent first, in full blocks of 16.
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)

    def ids(role: str, text: str) -> int:
        return len(tokenizer.encode(f"{role}: {text}\n", add_special_tokens=False))

    system = ids("system", "You are a helpful assistant. " * 8)
    first = system + ids("user", "What is the capital of France?")
    replied = first + ids("assistant", "Paris is the capital of France.")
    second = replied + ids("user", "And of Germany?")
    third = system + ids("user", "Name a prime number.")
    reused = min((second - 1) // 16, replied // 16) * 16 + min(system, third - 1) // 16 * 16
    assert reused > 0
    assert served["prefill_tokens_saved"] == reused
    assert served["hit_rate"] == pytest.approx(reused / (first + second + third))


def test_estimate_refuses_a_file_over_the_turn_cap_saying_how_many(demo_model_dir, tmp_path):
    done = estimate_file(str(demo_model_dir), turns_file(MAX_TURNS + 1), tmp_path)
    assert done.returncode == 2
    assert f"holds {MAX_TURNS + 1:,} turns, over the limit of {MAX_TURNS:,}" in done.stderr
    assert not (tmp_path / "e.json").exists()


def test_a_bad_conversation_file_is_refused_naming_its_line(demo_model_dir, tmp_path):
    bad = CHAT_FILE + '\n{"id": "c", "messages": [{"role": "user", "content": 5}]}'
    done = estimate_file(str(demo_model_dir), bad, tmp_path)
    assert done.returncode == 2
    assert "line 3, message 1" in done.stderr
    shipped = estimate_file("llama-3.1-8b", CHAT_FILE, tmp_path)
    assert shipped.returncode == 2 and "tokenizer" in shipped.stderr


def test_the_tier_takes_the_host_memory_named_else_the_workers():
    assert host_bytes_of(2.5) == int(2.5 * GIB)
    assert host_bytes_of(None) == worker_memory_bytes() > GIB
