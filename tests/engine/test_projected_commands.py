"""Launch commands on the engines a projection may stand for but this project does not run
(SGLang, TensorRT-LLM): each configuration's flags as the engine's source declares them,
and in words what the engine cannot be told on its command line.

(SGLang 0.5.23's own argument parser accepted every command here when the flags were
written; it is not installed for the suite.)"""

from __future__ import annotations

import shlex

import pytest

from profiling.advice.build import estimate_report
from profiling.config import Hardware, Workload
from profiling.engine.projected_commands import launch_command
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.projection import search
from profiling.projection.configurations import Configuration
from profiling.projection.estimate import shipped_configs

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", MODEL]


def argv(engine: str, **given) -> list[str]:
    command = launch_command(engine, MODEL, Configuration("H100-SXM", **given))
    assert command.text == shlex.join(command.argv) and not command.unavailable
    return command.argv


def test_sglang_takes_the_layout_formats_and_a_draft_as_its_flags():
    assert argv("sglang") == SGLANG
    assert argv("sglang", tp=2, replicas=2, weights="bf16", kv_cache="fp8") == [
        *SGLANG, "--tp-size", "2", "--dp-size", "2", "--dtype", "bfloat16",
        "--kv-cache-dtype", "fp8_e4m3",
    ]  # fmt: skip
    assert argv("sglang", pp=2, weights="fp8") == [*SGLANG, "--pp-size", "2",
                                                   "--quantization", "fp8"]  # fmt: skip
    assert argv("sglang", ep=4) == [*SGLANG, "--tp-size", "4", "--ep-size", "4",
                                    "--attn-dp-size", "4"]  # fmt: skip
    # A chain of k drafted tokens: k steps at top-k 1, k + 1 tokens verified.
    assert argv("sglang", draft=DRAFT, draft_tokens=3)[len(SGLANG):] == [
        "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", DRAFT,
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip
    drafting = launch_command("sglang", MODEL, Configuration("H100-SXM", draft=DRAFT,
                                                             draft_tokens=3))  # fmt: skip
    assert "at most 48 requests" in drafting.note


def test_sglang_replicas_with_pipeline_stages_run_as_separate_servers():
    command = launch_command("sglang", MODEL, Configuration("H100-SXM", pp=2, replicas=2))
    assert "--dp-size" not in command.argv
    assert "Run this once per replica, 2 servers of 2 GPUs each" in command.note


def test_trtllm_takes_its_layout_flags_and_the_rest_in_its_config_file():
    assert argv("trtllm") == ["trtllm-serve", MODEL]
    command = launch_command(
        "trtllm", MODEL, Configuration("H100-SXM", tp=2, replicas=2, weights="fp16", kv_cache="fp8")
    )
    assert command.argv == ["trtllm-serve", MODEL, "--tp_size", "2", "--config", "config.yaml"]
    assert "config.yaml holds {dtype: float16, kv_cache_config: {dtype: fp8}}." in command.note
    assert "Run this once per replica" in command.note
    experts = launch_command("trtllm", MODEL, Configuration("H100-SXM", ep=4))
    assert experts.argv[2:] == ["--tp_size", "4", "--ep_size", "4", "--config", "config.yaml"]
    assert "enable_attention_dp: true" in experts.note


@pytest.mark.parametrize(
    ("engine", "given", "said"),
    [("sglang", {"weights": "int4"}, "GPTQ or AWQ 4-bit"),
     ("sglang", {"draft": "ngram", "draft_tokens": 3}, "drafts a tree of tokens"),
     ("sglang", {"draft": search.DRAFT, "draft_tokens": 3}, "EAGLE head trained for"),
     ("trtllm", {"weights": "fp8"}, "ModelOpt"),
     ("trtllm", {"weights": "int8"}, "no int8 weight-only recipe"),
     ("trtllm", {"draft": DRAFT, "draft_tokens": 4}, "speculative_config")],
)  # fmt: skip
def test_what_the_engine_cannot_be_told_on_its_command_line_is_said_not_printed(
    engine, given, said
):
    command = launch_command(engine, MODEL, Configuration("H100-SXM", **given))
    assert (command.argv, command.text) == ([], "")
    assert said in command.unavailable


@pytest.mark.parametrize(
    ("engine", "start"),
    [("vllm", "vllm serve "), ("sglang", "python -m sglang.launch_server "),
     ("trtllm", "trtllm-serve ")],
)  # fmt: skip
def test_the_deployment_search_launches_every_configuration_on_the_engine_named(engine, start):
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    work = Workload(concurrency=64, tpot_ms=40)
    deployment = Hardware(gpu_kind="H100-SXM", gpu_count=2, serving_engine=engine)
    advice, _ = estimate_report(shapes, hardware.lookup("H100"), 2, "bfloat16", work,
                                deployment=deployment, model=MODEL)  # fmt: skip
    found = advice.deployments
    assert found is not None and found["engine"] == engine
    commands = [row["command"] for row in found["configurations"]]
    assert any(c["text"] for c in commands)
    assert all(c["text"].startswith(start) or c["unavailable"] for c in commands)
