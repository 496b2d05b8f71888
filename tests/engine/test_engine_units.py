"""The engine's pure parts: its counters, its log's reasons, the plan, coalesced requests."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from profiling.engine import ENGINES, bench, techniques, vllm, vllm_kernels
from profiling.engine.interface import MEMBERS
from profiling.engine.metrics import parse_metrics
from profiling.engine.plan import make_plan, sweep
from profiling.engine.results import ServerCounters, ServingPoint, Spread
from profiling.options import ENGINE_CHOICES

PROM = """\
# HELP vllm:prefix_cache_queries_total Prefix cache queries
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 5124.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 76.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3456.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 25.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 20.0
"""


def test_counters_are_summed_over_engines_and_kept_per_position():
    m = parse_metrics(PROM, vllm.METRICS.spec_accepted_per_position)
    assert m.get("vllm:prefix_cache_queries_total") == 5200.0
    assert m.get("vllm:prefix_cache_hits_total") == 3456.0
    assert m.by_position == {0: 40.0, 1: 25.0}
    assert m.get("vllm:absent") == 0.0


def test_a_run_reads_its_own_counters_only():
    per_position = vllm.METRICS.spec_accepted_per_position
    before = parse_metrics(PROM, per_position)
    after = parse_metrics(
        PROM.replace("5124.0", "6124.0").replace("3456.0", "4256.0").replace(" 40.0", " 70.0")
        .replace("0.5\n", "0.9\n").replace("20.0\n", "30.0\n"), per_position,
    )  # fmt: skip
    c = bench.counters(before, after, vllm.METRICS)
    assert (c.prefix_cache_queries, c.prefix_cache_hits) == (1000, 800)
    assert c.spec_accepted_by_position == [30, 0]
    assert abs(c.ttft_mean_ms - 40.0) < 1e-9  # 0.4 s over 10 requests


LOGS = Path(__file__).with_name("logs")  # excerpts of real vLLM 0.32 server logs
VALIDATION_LOG = (LOGS / "fp8_float32.log").read_text()
ROOT_CAUSE_LOG = (LOGS / "fp8_kv_head_size.log").read_text()
BARE_LOG = (LOGS / "gptq_repacked.log").read_text()  # a checkpoint saved after a repack


def test_the_reason_is_the_root_error_not_a_warning_or_a_wrapper():
    assert vllm.failure_reason(VALIDATION_LOG) == (
        "ValidationError: 1 validation error for VllmConfig: torch.float32 is not supported "
        "for quantization method fp8. Supported dtypes: [torch.bfloat16, torch.float16]"
    )
    assert vllm.failure_reason(ROOT_CAUSE_LOG) == (
        "NotImplementedError: FP8 KV cache requires head_size divisible by 32 on CPU."
    )
    assert vllm.failure_reason(BARE_LOG) == (
        "AssertionError at `assert self.data.shape == loaded_weight.shape`"
    )
    assert vllm.failure_reason("OSError: [Errno 98] Address already in use") == (
        "address already in use (port taken)"
    )
    assert vllm.failure_reason("") == "the engine exited without a message"


def test_the_sweep_brackets_the_users_concurrency():
    assert sweep(8) == [1, 8, 16]
    assert sweep(1) == [1, 2]
    plan = make_plan(8, quick=True, ks=None, ngram=True, draft=None, tensor_parallel=0)
    assert plan.concurrencies == [1, 8, 16] and plan.ks == [3]
    assert all(plan.requests[c] >= 2 * c for c in plan.concurrencies)
    assert make_plan(8, False, [2, 5], True, None, 0).ks == [2, 5]


def test_requests_read_in_one_burst_are_told_apart_from_streamed_ones():
    saved = {"itls": [[0.003, 0.0028, 0.0031], [1e-6, 2e-6, 1e-6], []]}
    assert bench.streamed(saved) == [True, False, True]


def _point(tpots: list[float], streamed: list[bool], server_tpot_ms: float) -> ServingPoint:
    nothing = Spread(0.0, 0.0, 0.0)
    return ServingPoint(
        concurrency=4, requests=len(tpots), failed=0, prompt_tokens=64, output_tokens=16,
        ttft_ms=nothing, tpot_ms=nothing, itl_ms=nothing, e2el_ms=nothing,
        output_tokens_per_s=1.0, requests_per_s=1.0, goodput=None, duration_s=1.0,
        server=ServerCounters(tpot_mean_ms=server_tpot_ms), tpot_s=tpots, streamed=streamed,
    )  # fmt: skip


def test_a_split_read_in_one_burst_is_compared_on_the_servers_own_tpot():
    one = _point([0.010, 0.011, 0.012, 0.010], [True] * 4, 10.5)
    streamed = _point([0.005, 0.006, 0.005, 0.0055], [True] * 4, 5.0)
    speedup, interval, basis = techniques.tpot_speedup(one, streamed)
    assert basis == "client" and interval[0] <= speedup <= interval[1] and speedup > 1.5
    burst = _point([0.0, 0.0, 0.0, 0.0], [False] * 4, 5.0)
    assert techniques.tpot_speedup(one, burst) == (2.1, None, "server")
    silent = _point([0.0] * 4, [False] * 4, 0.0)  # no server histogram either: no figure
    assert techniques.tpot_speedup(one, silent) == (None, None, "client")


def test_the_serve_command_is_what_a_user_types():
    flags = vllm.server_flags("/m", "bfloat16", 1024, ["--speculative-config", '{"k":1}'])
    assert vllm.serve_command("/m", flags) == (
        "vllm serve /m --dtype bfloat16 --max-model-len 1024 --seed 0 "
        "--speculative-config '{\"k\":1}'"
    )


def test_every_engine_has_every_member_of_the_interface():
    assert "speculative_flags" in MEMBERS and "METRICS" in MEMBERS and "NAME" in MEMBERS
    for name, engine in ENGINES.items():
        missing = [m for m in MEMBERS if not hasattr(engine, m)]
        assert not missing, f"{name} lacks {missing}"
        assert name == engine.NAME
    assert ("", *ENGINES) == ENGINE_CHOICES  # the option offers every engine there is


def test_each_technique_is_a_flag_set_of_the_engine():
    assert vllm.prefix_caching_flags(False) == ["--no-enable-prefix-caching"]
    flags = vllm.speculative_flags("ngram", 3, "", {"prompt_lookup_max": 4})
    assert flags[0] == "--speculative-config"
    assert json.loads(flags[1]) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 4,
    }
    draft = json.loads(vllm.speculative_flags("draft_model", 2, "/d", {"x": 1})[1])
    assert draft == {"method": "draft_model", "model": "/d", "num_speculative_tokens": 2}
    assert vllm.quantization_flags("fp8-kv") == ["--kv-cache-dtype", "fp8"]
    assert vllm.quantization_flags("gptq") is None  # served from our checkpoint instead
    served = vllm.checkpoint_flags("/ckpt", "/m")
    assert vllm.names_another_checkpoint(served) and not vllm.names_another_checkpoint(flags)
    assert vllm.tensor_parallel_flags(2) == ["--tensor-parallel-size", "2"]


def test_the_engine_log_gives_its_kv_room_weights_and_threads():
    log = (
        "INFO 12-04 10:00:01 [kv_cache_utils.py:1] CPU KV cache size: 349,440 tokens\n"
        "INFO 12-04 10:00:00 [gpu_model_runner.py:1] Model loading took 0.0737 GiB\n"
        "WARNING Reducing Torch threads from 2 to 1\n"
    )
    assert vllm.kv_cache_tokens(log) == 349_440
    assert vllm.weights_bytes(log) == int(0.0737 * 2**30)
    assert vllm.threads(log) == "1 of 2 torch threads"
    assert vllm.kv_cache_tokens("nothing") is None and vllm.threads("") == ""


def test_the_random_workload_keeps_the_users_shared_prefix():
    flags = vllm.prompt_flags(512, 32, 384, None, 3)
    at = {f: flags[i + 1] for i, f in enumerate(flags[:-1]) if f.startswith("--")}
    assert (at["--random-prefix-len"], at["--random-input-len"]) == ("384", "128")
    assert at["--random-output-len"] == "32" and at["--seed"] == "3"
    sample = vllm.prompt_flags(512, 32, 384, Path("/s.jsonl"), 3)
    assert "custom" in sample and "/s.jsonl" in sample


def test_a_format_the_engine_refuses_on_this_device_is_said_before_any_server_starts():
    refused = vllm.quantization_unsupported("fp8-kv", "cpu", 16)
    assert "divisible by 32" in refused and "16 wide" in refused
    assert vllm.quantization_unsupported("fp8-kv", "cpu", 64) == ""
    assert vllm.quantization_unsupported("fp8-kv", "cuda", 16) == ""  # a GPU takes any width
    assert vllm.quantization_unsupported("fp8", "cpu", 16) == ""
    lacking = vllm_kernels.missing('{"static_scaled_fp8_quant": false, "cpu_gemm_wna16": true}')
    assert lacking == {"fp8": "static_scaled_fp8_quant"}
    assert "no static_scaled_fp8_quant kernel" in vllm.quantization_unsupported(
        "fp8", "cpu", 64, lacking
    )
    assert vllm.quantization_unsupported("gptq", "cpu", 64, lacking) == ""
    assert vllm_kernels.missing(None) == {} and vllm_kernels.missing("not json") == {}


def test_the_kernel_probe_reads_the_build_this_cpu_loads():
    lacking = vllm.missing_kernels(device="cpu")
    if not vllm.python_path().exists():
        assert lacking == {}
        return
    # vLLM loads its AVX2 build where torch finds no AVX-512; that build lacks both.
    expected = {} if torch.cpu._is_avx512_supported() else dict(vllm_kernels.CPU_KERNELS)
    assert lacking == expected or (expected == {} and set(lacking) <= {"fp8", "gptq"})
    assert vllm.missing_kernels(device="cuda") == {}
