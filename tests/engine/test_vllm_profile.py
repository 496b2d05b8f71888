"""One engine profile of the demo model on vLLM, end to end, on this machine's CPU.

The real engine, from its own environment (`scripts/engine-env`): skipped where
there is none, and a failure instead when ADVISOR_REQUIRE_ENGINE is set (CI).
One profile serves every assertion: each engine configuration is a server
start of about a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from profiling.engine import vllm
from tests.engine.engine_env import require_engine
from tests.processes import alive_with_tag, tagged_environment

ROOT = Path(__file__).resolve().parents[2]
SHARED, PROMPT = 384, 512  # a 75 % shared prefix
# A backstop against a hang, not a speed check: the profile takes about 6 minutes on a
# 2-core CPU with AVX-512 and over 10 on one with AVX2 alone (the first test's set-up).
TIMEOUT_S = 2700
pytestmark = [pytest.mark.engine, pytest.mark.timeout(TIMEOUT_S + 300)]
# Which kernels vLLM's CPU build loads here (its own test, asked of torch, not of our probe).
WITH_AVX512 = torch.cpu._is_avx512_supported()


@pytest.fixture(scope="module")
def engine_profile(tmp_path_factory) -> dict:
    require_engine()
    out = tmp_path_factory.mktemp("engine") / "out.json"
    argv = [
        sys.executable, "-m", "profiling", "profile", "demo", "--device", "cpu", "--quick",
        "--engine", "vllm", "--prompt-tokens", str(PROMPT), "--shared-prefix-tokens",
        str(SHARED), "--output-tokens", "32", "--concurrency", "4", "--tpot-ms", "200",
        # The quantization experiment's GPTQ checkpoint is handed to the engine.
        "--experiments", "quantization", "--precisions", "fp32,gptq-int4",
        # Two CPU ranks: the engine's tensor-parallel path, as on two GPUs.
        "--tp-measure", "2", "--json", str(out),
    ]  # fmt: skip
    tag, env = tagged_environment()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(out.read_text()), "_tag": tag}


def test_the_engine_section_names_the_engine_and_its_launch(engine_profile):
    engine = engine_profile["engine"]
    assert engine["name"] == "vllm" and engine["version"] == vllm.version()
    assert "vllm.entrypoints.openai.api_server" in engine["command"]
    assert engine["serve_command"].startswith("vllm serve ")


def test_the_sweep_has_a_point_per_concurrency_with_percentiles(engine_profile):
    points = engine_profile["engine"]["serving"]
    assert [p["concurrency"] for p in points] == [1, 4, 8]
    for p in points:
        assert p["failed"] == 0 and p["requests"] >= 2 * p["concurrency"]
        for metric in ("ttft_ms", "tpot_ms", "itl_ms"):
            spread = p[metric]
            assert 0 <= spread["p50"] <= spread["p90"] <= spread["p99"], (metric, spread)
        assert p["output_tokens_per_s"] > 0
        assert p["goodput"] is not None and 0 <= p["goodput"] <= p["requests_per_s"] + 1e-9
        assert len(p["ttft_s"]) == p["requests"]


def test_prefix_caching_hits_about_the_shared_share_and_nothing_when_off(engine_profile):
    # The engine's own counters, not which TTFT came out smaller (bench/engine.py times it).
    caching = engine_profile["engine"]["prefix_caching"]
    assert caching["shared_prefix_tokens"] == SHARED
    assert abs(caching["hit_rate"] - SHARED / PROMPT) < 0.15, caching["hit_rate"]
    assert caching["off_hit_rate"] in (None, 0.0), caching
    launches = engine_profile["engine"]["launches"]
    (off,) = [x for x in launches if x["purpose"] == "prefix caching off"]
    assert "--no-enable-prefix-caching" in off["command"] and off["status"] == "ran"


def test_speculation_is_accepted_and_changes_no_greedy_token(engine_profile):
    points = engine_profile["engine"]["speculative"]
    assert {p["method"] for p in points} == {"ngram", "draft_model"}
    for p in points:
        assert p["status"] == "ran", p["error"]
        assert p["acceptance_rate"] > 0 and p["mean_accepted_length"] > 1
        assert len(p["acceptance_by_position"]) == p["k"]
        assert p["output_matches"] is True
        assert p["speedup"] is not None
        plain = next(q for q in engine_profile["engine"]["serving"] if q["concurrency"] == 1)
        spec = next(q for q in p["points"] if q["concurrency"] == 1)
        if p["speedup_basis"] == "server":  # no request of one side streamed to the client
            assert not any(plain["streamed"]) or not any(spec["streamed"])
            server = plain["server"]["tpot_mean_ms"] / spec["server"]["tpot_mean_ms"]
            assert p["speedup"] == pytest.approx(server, 1e-3) and p["interval"] is None
        else:
            low, high = p["interval"]
            assert low <= p["speedup"] <= high


def test_a_configuration_the_engine_cannot_start_is_reported_with_its_reason(engine_profile):
    engine = engine_profile["engine"]
    by_method = {q["method"]: q for q in engine["quantization"]}
    # The demo's heads are 48 wide; the CPU build's fp8 KV cache needs a multiple of 32, a
    # rule known before a server starts (vLLM's own start-up error says it).
    kv = by_method["fp8-kv"]
    assert kv["status"] == "not available" and "48 wide" in kv["error"], kv
    assert not any(f.startswith("quantization fp8-kv") for f in engine["failures"])
    if not WITH_AVX512:  # vLLM loads its AVX2 kernels, which hold no fp8 quantization
        fp8 = by_method["fp8"]
        assert fp8["status"] == "not available" and "static_scaled_fp8_quant" in fp8["error"]
    # A start the engine itself gives up (fp8 weights on a CPU build without its fp8
    # kernels: every machine without AVX-512 so far) carries the reason from its log.
    for q in engine["quantization"]:
        if q["status"] == "failed":
            assert q["error"] and "exited without a message" not in q["error"], q
            started = f"quantization {q['method']}: engine failed: "
            assert any(f.startswith(started) for f in engine["failures"]), engine["failures"]
            assert any("engine failed" in w for w in engine_profile["warnings"])
    # The rest of the profile stands.
    assert engine_profile["verdict"] and engine["serving"]


def test_the_gptq_checkpoint_the_quantization_experiment_made_is_served_by_the_engine(
    engine_profile,
):
    eager = {v["name"]: v for v in engine_profile["quantization"]["variants"]}
    assert eager["gptq-int4"]["status"] == "measured"
    gptq = {q["method"]: q for q in engine_profile["engine"]["quantization"]}["gptq"]
    if not WITH_AVX512:  # vLLM's AVX2 kernels hold no int4 GEMM: said, not started
        assert gptq["status"] == "not available" and "cpu_gemm_wna16" in gptq["error"], gptq
        failures = engine_profile["engine"]["failures"]
        assert not any(f.startswith("quantization gptq") for f in failures)
        return
    assert gptq["status"] == "ran", gptq["error"]
    assert "--served-model-name" in gptq["flags"]
    at = gptq["points"][0]
    if any(at["streamed"]):
        assert gptq["tpot_ms"]["p50"] > 0
    else:  # no request streamed to the client on a busy machine: no client TPOT
        assert gptq["tpot_ms"] is None
    if gptq["speedup_basis"] == "server":  # one side never streamed: the server's timing
        assert at["server"]["tpot_mean_ms"] > 0
    assert gptq["speedup"] is None or gptq["speedup"] > 0
    # Quality through the engine, on our evaluation text and the plain server's greedy text.
    assert gptq["perplexity"] > 1 and gptq["reference_perplexity"] > 1
    assert 0 < gptq["greedy_agreement"] <= 1


def test_the_model_split_over_two_ranks_serves_the_same_text(engine_profile):
    tp = engine_profile["engine"]["tensor_parallel"]
    assert tp["size"] == 2 and tp["status"] == "ran", tp["error"]
    assert tp["flags"] == ["--tensor-parallel-size", "2"]
    assert tp["points"][0]["concurrency"] == 4 and tp["points"][0]["failed"] == 0
    split, one = (
        tp["points"][0],
        next(p for p in engine_profile["engine"]["serving"] if p["concurrency"] == 4),
    )
    assert tp["speedup"] is not None
    if tp["speedup_basis"] == "client":  # requests streamed on both sides: their medians
        assert tp["tpot_ms"]["p50"] > 0
        low, high = tp["interval"]
        assert low <= tp["speedup"] <= high
    else:  # every request of one side read in one burst (a busy machine): the server's TPOT
        assert split["coalesced"] == split["requests"] or one["coalesced"] == one["requests"]
        server = one["server"]["tpot_mean_ms"] / split["server"]["tpot_mean_ms"]
        assert tp["speedup_basis"] == "server" and tp["speedup"] == pytest.approx(server, 1e-3)
    assert tp["output_matches"] is True  # float32 on CPU: the split changes no token


def test_no_engine_process_is_left_afterwards(engine_profile):
    # Every process the profile started (servers, ranks, clients) carries its tag.
    assert alive_with_tag(engine_profile["_tag"]) == []
