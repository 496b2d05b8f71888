"""The serving engine a projection stands for (`--serving-engine vllm|sglang|trtllm`):
each engine's limits as its source sets them, vLLM's unchanged as the default, and every
projection saying whose limits it used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from profiling.cli import build_parser, config_from_args
from profiling.config import ConfigError, Hardware
from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.options import OPTIONS, SERVING_ENGINES
from profiling.projection import engines
from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs
from profiling.projection.fit import Footprint, fit_check

GIB = 2**30
H100, A100, L4 = lookup("H100"), lookup("A100-80GB"), lookup("L4")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def test_every_engine_a_job_may_name_has_limits_and_a_name():
    assert tuple(engines.ENGINES) == tuple(SERVING_ENGINES) == OPTIONS["serving_engine"].choices
    assert OPTIONS["serving_engine"].default == engines.DEFAULT_ENGINE == "vllm"
    assert Hardware().serving_engine == "vllm"
    assert engines.NAMES["trtllm"] == "TensorRT-LLM"


@pytest.mark.parametrize(
    ("kind", "tp", "pp", "tokens", "share"),
    # SGLang 0.5.23's handle_gpu_memory_settings gives these (checked against the function
    # itself, for a model neither MLA nor multimodal, on CUDA).
    [("H100", 1, 1, 8192, 0.83), ("H100", 4, 1, 8192, 0.819), ("H200", 1, 1, 8192, 0.903),
     ("B200", 1, 1, 16384, 0.854), ("B200", 4, 2, 16384, 0.849), ("L4", 1, 1, 4096, 0.684),
     ("A100-40GB", 1, 1, 4096, 0.823), ("T4", 1, 1, 2048, 0.735)],
)  # fmt: skip
def test_sglangs_limits_follow_the_gpus_memory_and_the_layout_as_its_source_sets_them(
    kind, tp, pp, tokens, share
):
    limits = engines.limits(lookup(kind), "sglang", tp=tp, pp=pp)
    assert (limits.max_batched_tokens, limits.memory_share) == (tokens, share)
    # resolve_max_num_reqs's floor; 48 where a draft speculates.
    assert (limits.seqs(), limits.seqs(speculating=True)) == (2048, 48)


def test_each_engine_gives_the_kv_cache_the_memory_its_own_rule_says():
    weights = 10 * GIB
    vllm, sglang, trt = (engines.limits(H100, name) for name in ("vllm", "sglang", "trtllm"))
    # vLLM: 92 % of the device for everything; TensorRT-LLM: 90 % of what the weights leave;
    # SGLang: weights and KV cache in mem_fraction_static of what the CUDA context leaves,
    # its reserve holding the activations (so they are not taken off again).
    assert vllm.usable_bytes(80 * GIB, GIB, weights) == 80 * GIB - int(0.08 * 80 * GIB) - 2 * GIB
    assert trt.usable_bytes(80 * GIB, 0, weights) == int(weights + 0.9 * 69 * GIB)
    assert sglang.usable_bytes(80 * GIB, GIB, weights) == int(0.83 * 79 * GIB)
    assert (trt.max_seqs, trt.max_batched_tokens) == (2048, 8192)
    assert engines.limits(None, "sglang").memory_share == 0.95  # its fallback, memory unknown


def test_vllm_stays_the_default_and_the_same_at_every_layout():
    for gpu in (H100, A100, L4, None):
        assert engines.limits(gpu) == engines.limits(gpu, "vllm", tp=8, pp=2)
    s = shapes("llama-3.1-8b")
    rates = assumed(H100, "bfloat16", s.num_layers)
    plain = project(s, rates, "bfloat16", Traffic(1000, 200, 64), Deployment(H100, 2))
    named = project(s, rates, "bfloat16", Traffic(1000, 200, 64),
                    Deployment(H100, 2, engine=engines.limits(H100, "vllm", tp=2)))  # fmt: skip
    assert plain.to_dict() == named.to_dict() and plain.engine == "vllm"


def test_a_projection_stands_for_the_engine_chosen_and_says_which():
    s = shapes("llama-3.1-70b")
    rates = assumed(H100, "fp8", s.num_layers)
    by = {
        name: project(
            s,
            rates,
            "fp8",
            Traffic(1000, 1000, 256),
            Deployment(H100, 2, engine=engines.limits(H100, name, tp=2)),
        )  # fmt: skip
        for name in engines.ENGINES
    }
    for name, projection in by.items():
        assert projection.engine == name
        assert any(f"{engines.NAMES[name]}'s defaults" in n for n in projection.notes)
    # SGLang holds back about 17 % of an H100 for activations and graphs, vLLM 8 %: fewer
    # requests' KV caches fit at once on its defaults.
    assert by["sglang"].served.max_running < by["vllm"].served.max_running
    footprint = Footprint(by["sglang"].weights_bytes, by["sglang"].kv_cache_bytes_per_token, 0)
    fit = fit_check(footprint, _workload(), H100, 2, "sglang")
    assert "SGLang's mem_fraction_static" in fit.note


def _workload():
    from profiling.config import Workload

    return Workload(prompt_tokens=1000, output_tokens=1000, concurrency=256)


def test_both_commands_take_the_engine_and_refuse_an_unknown_one():
    profile = build_parser().parse_args(["profile", "demo", "--serving-engine", "trtllm"])
    config = config_from_args(profile)
    assert (config.hardware.serving_engine, config.engine) == ("trtllm", "")
    estimate = build_parser().parse_args(["estimate", "llama-3.1-8b", "--gpu", "H100",
                                          "--serving-engine", "sglang"])  # fmt: skip
    assert estimate.serving_engine == "sglang"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["estimate", "x", "--serving-engine", "tgi"])
    with pytest.raises(ConfigError, match="serving_engine"):
        Hardware(serving_engine="tgi").validate()


def test_the_estimate_names_its_engine_in_every_projection_and_launches_on_it(tmp_path):
    out = tmp_path / "e.json"
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "estimate", "llama-3.1-8b", "--gpu", "L4",
         "--concurrency", "32", "--tpot-ms", "60", "--conversation-turns", "5",
         "--think-seconds", "10", "--host-memory-gib", "64", "--serving-engine", "sglang",
         "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["hardware"]["serving_engine"] == "sglang"
    assert "Engine  SGLang's default limits" in done.stdout
    # SGLang's defaults leave an L4 68 % for weights and KV cache: 8B in bf16 does not fit.
    assert report["predictions"] and all("on SGLang's limits" in p["note"]
                                         for p in report["predictions"])  # fmt: skip
    assert "does not fit beside the weights" in report["predictions"][0]["note"]
    found = report["deployments"]
    assert found["engine"] == "sglang"
    assert any("SGLang's defaults" in note for note in found["notes"])
    commands = [row["command"] for row in found["configurations"]]
    texts = [c["text"] for c in commands if c["text"]]
    assert texts and all(
        t.startswith("python -m sglang.launch_server --model-path ") for t in texts
    )
    assert all("SGLang" in c["unavailable"] for c in commands if not c["text"])
    section = report["conversations"]
    assert section["serving_engine"] == "sglang"
    assert "on SGLang's limits" in done.stdout
    assert any("SGLang's defaults" in n for n in section["served"]["cold"]["notes"])
    if section["advice"]["recommended"]:
        assert "--enable-hierarchical-cache --hicache-size" in section["advice"]["setting"]
