"""A deployment as users describe it: its serving precision, its KV-cache format, a fixed
layout, open-loop load, and the engine whose limits it stands for."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from profiling.config import ConfigError, Hardware
from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.projection import engines
from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs

H100, A100, L4 = lookup("H100"), lookup("A100-80GB"), lookup("L4")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def serve(name: str, dtype: str, gpu=H100, tp: int = 1, **load) -> object:
    s = shapes(name)
    settings = {f.name for f in dataclasses.fields(Deployment)}
    deployment = Deployment(gpu, tp, **{k: v for k, v in load.items() if k in settings})
    work = {"prompt_tokens": 1000, "output_tokens": 1000, "concurrency": 0,
            **{k: v for k, v in load.items() if k not in settings}}  # fmt: skip
    return project(s, assumed(gpu, dtype, s.num_layers), dtype, Traffic(**work), deployment)


def test_the_engine_limits_are_vllms_own_by_gpu_and_tensorrt_llms_everywhere():
    assert (engines.vllm(H100).max_seqs, engines.vllm(H100).max_batched_tokens) == (1024, 8192)
    assert engines.vllm(H100, offline=True).max_batched_tokens == 16384
    assert (engines.vllm(A100).max_seqs, engines.vllm(A100).max_batched_tokens) == (256, 2048)
    assert (engines.vllm(L4).max_seqs, engines.vllm(lookup("B200")).max_batched_tokens) == (
        256, 16384,
    )  # fmt: skip
    trt = engines.tensorrt_llm(H100)
    assert (trt.max_seqs, trt.max_batched_tokens) == (2048, 8192)
    # vLLM: 92 % of the device in all; TensorRT-LLM: 90 % of what the weights leave free.
    gib = 2**30
    assert (
        engines.vllm(H100).usable_bytes(80 * gib, 0, 10 * gib)
        == 80 * gib - int(0.08 * 80 * gib) - gib
    )
    assert trt.usable_bytes(80 * gib, 0, 10 * gib) == int(10 * gib + 0.9 * 69 * gib)


def test_fp8_serves_a_70b_on_two_h100s_that_bf16_barely_holds():
    # The case: Llama-3.x-70B, fp8, TP=2 on 2x H100, at saturation.
    bf16 = serve("llama-3.1-70b", "bfloat16", tp=2, concurrency=256)
    fp8 = serve("llama-3.1-70b", "fp8", tp=2, concurrency=256)
    fp8_kv = serve("llama-3.1-70b", "fp8", tp=2, concurrency=256, kv_dtype="float8")
    assert fp8.served.max_running > 4 * bf16.served.max_running
    assert fp8.decode_tokens_per_second > 4 * bf16.decode_tokens_per_second
    # An fp8 cache holds twice the tokens: more requests run at once, and faster.
    assert fp8_kv.served.max_running > 1.8 * fp8.served.max_running
    assert fp8_kv.decode_tokens_per_second > fp8.decode_tokens_per_second
    assert any("vLLM's defaults" in n for n in fp8.notes)


def test_replicas_multiply_the_throughput_of_one_copy_at_its_share_of_the_load():
    one = serve("llama-3.1-8b", "bfloat16", concurrency=32)
    four = serve("llama-3.1-8b", "bfloat16", concurrency=128, replicas=4)
    assert four.gpu_count == 1 and four.served.concurrency == 32
    assert four.decode_tokens_per_second == pytest.approx(4 * one.decode_tokens_per_second)
    assert any("4 copies of the engine" in n for n in four.notes)


def test_pipeline_stages_hold_the_weights_over_more_gpus_and_pass_every_token_through():
    tp2 = serve("llama-3.1-70b", "bfloat16", tp=2, concurrency=1)
    staged = serve("llama-3.1-70b", "bfloat16", tp=2, concurrency=1, stages=2)
    assert staged.gpu_count == 4
    assert staged.served.max_running > tp2.served.max_running  # twice the memory for KV
    assert staged.tpot_seconds > tp2.tpot_seconds  # one token crosses both stages


def test_open_loop_latency_grows_without_bound_past_capacity_while_throughput_flattens():
    # 70B bf16 on two H100s: the KV cache holds only a few requests at once.
    runs = [serve("llama-3.1-70b", "bfloat16", tp=2, prompt_tokens=2000, output_tokens=200,
                  rate=rate, requests=240) for rate in (0.2, 2.0, 8.0, 32.0)]  # fmt: skip
    ttfts = [r.served.ttft.p50 for r in runs]
    tputs = [r.decode_tokens_per_second for r in runs]
    assert all(r.served.mode == "open" for r in runs)
    assert ttfts == sorted(ttfts) and ttfts[-1] > 20 * ttfts[0]
    # Past saturation, four times the arrivals buy (almost) no more tokens per second.
    assert tputs[3] < 1.15 * tputs[2]
    assert runs[-1].served.queue_share > 0.5


@pytest.mark.parametrize(
    ("given", "layout"),
    [({"tp": 2}, (2, 1, 4)), ({"tp": 2, "pp": 2}, (2, 2, 2)), ({"replicas": 8}, (1, 1, 8)),
     ({"tp": 8}, (8, 1, 1)), ({}, None)],
)  # fmt: skip
def test_a_fixed_layout_fills_in_its_missing_parts(given, layout):
    assert Hardware(gpu_kind="H100-SXM", gpu_count=8, **given).layout() == layout


def test_a_layout_that_does_not_add_up_is_refused_in_words():
    with pytest.raises(ConfigError, match="does not use the 8 GPUs"):
        Hardware(gpu_kind="H100-SXM", gpu_count=8, tp=3).validate()
    with pytest.raises(ConfigError, match="kv_cache"):
        Hardware(gpu_kind="H100-SXM", kv_cache="int4").validate()


def estimate(out, *flags: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", "llama-3.1-70b", "--gpu", "H100",
         "--prompt-tokens", "1000", "--output-tokens", "1000", "--json", str(out), *flags],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_the_estimate_projects_the_deployment_as_described(tmp_path):
    report = estimate(tmp_path / "e.json", "--gpus", "2", "--weights", "fp8", "--kv-cache",
                      "fp8", "--tp", "2", "--request-rate", "2", "--requests", "120")  # fmt: skip
    assert report["dtype"] == "fp8"
    assert report["hardware"]["layout"] == {"tp": 2, "pp": 1, "replicas": 1}
    assert report["hardware"]["kv_cache"] == "fp8"
    assert report["workload"]["request_rate"] == 2.0
    names = {p["metric"] for p in report["predictions"]}
    assert {"ttft_seconds", "tpot_seconds", "output_tokens_per_second"} <= names


def test_a_shipped_configs_launch_commands_name_its_hub_repository(tmp_path):
    report = estimate(tmp_path / "e.json", "--gpus", "8")
    texts = [row["command"]["text"] for row in report["deployments"]["configurations"]
             if row["command"] and row["command"].get("text")]  # fmt: skip
    assert texts and all(
        t.startswith("vllm serve meta-llama/Meta-Llama-3.1-70B ") for t in texts
    ), texts
