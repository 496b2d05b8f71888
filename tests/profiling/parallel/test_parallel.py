"""The parallel experiment: per-device plans, measured tensor parallelism, interference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.config import ConfigError, Hardware, ProfileConfig, Workload
from profiling.measure.hardware import lookup
from profiling.measure.timing import CpuClock
from profiling.parallel import launch, plans
from profiling.parallel.disaggregation import Sizes, disaggregate, workers_for
from profiling.parallel.interference import Interference, measure_interference
from profiling.parallel.launch import TPRequest, run_tp
from profiling.parallel.plans import ParamBytes
from profiling.parallel.results import DisaggregationResult, ParallelResult
from profiling.profile import Profile
from profiling.results import Samples
from tests.profiling.tiny import save_tiny_llama_dir

pytestmark = pytest.mark.model  # models split over CPU processes

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
SMALL = Workload(prompt_tokens=96, output_tokens=16, concurrency=2)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llama_dir(tmp_path_factory.mktemp("parallel") / "tiny", max_positions=512)


# -- plans: a GQA model by hand ---------------------------------------------------
#
# 2 layers, hidden 128, 8 attention heads, 2 KV heads of 16, MLP 256, vocab 1000,
# 2-byte weights, untied LM head. Per layer: q + o = 2 × 128 × 128 × 2 = 65,536 and
# gate/up/down = 3 × 128 × 256 × 2 = 196,608 (split by TP); k + v = 2 × 32 × 128 × 2
# = 16,384 (split by KV heads); two norms 512 (replicated). Embedding and LM head
# 1000 × 128 × 2 = 256,000 each; final norm 256. KV per token = 2 × 2 layers × 2
# heads × 16 × 2 bytes = 256; 4 requests × 1000 tokens = 1,024,000 bytes of KV.
KV_TOKENS = 4 * 1000


def gqa_params() -> list[ParamBytes]:
    out = [
        ParamBytes("model.embed_tokens.weight", 256_000, "embed"),
        ParamBytes("lm_head.weight", 256_000, "head"),
        ParamBytes("model.norm.weight", 256),
    ]
    for i in range(2):
        layer = f"model.layers.{i}."
        out += [
            ParamBytes(layer + "self_attn.q_proj.weight", 32_768),
            ParamBytes(layer + "self_attn.k_proj.weight", 8_192),
            ParamBytes(layer + "self_attn.v_proj.weight", 8_192),
            ParamBytes(layer + "self_attn.o_proj.weight", 32_768),
            ParamBytes(layer + "mlp.gate_proj.weight", 65_536),
            ParamBytes(layer + "mlp.up_proj.weight", 65_536),
            ParamBytes(layer + "mlp.down_proj.weight", 65_536),
            ParamBytes(layer + "input_layernorm.weight", 256),
            ParamBytes(layer + "post_attention_layernorm.weight", 256),
        ]
    return out


def gqa_shape() -> plans.ModelShape:
    return plans.shape_of(gqa_params(), attention_heads=8, kv_heads=2, kv_bytes_per_token=256)


def test_parameters_are_sorted_into_split_kv_and_replicated_bytes() -> None:
    shape = gqa_shape()
    assert [(x.split, x.kv_proj, x.replicated) for x in shape.layers] == [
        (262_144, 16_384, 512)
    ] * 2
    assert (shape.embed_bytes, shape.head_bytes, shape.other_bytes) == (256_000, 256_000, 256)
    assert shape.weights_bytes == 1_070_336 and not shape.tied


def test_tp_beyond_the_kv_heads_replicates_one_head_per_device() -> None:
    plan = plans.plan(gqa_shape(), tp=4, pp=1, kv_tokens=KV_TOKENS, device_memory_bytes=None)
    # Per layer 262,144 / 4 + 16,384 × (1 of 2 heads) + 512 = 74,240; two layers, plus
    # embedding and head split by vocabulary (2 × 64,000) and the final norm.
    assert plan.weights_bytes_per_device == 2 * 74_240 + 128_000 + 256
    assert plan.kv_heads_per_device == 1 and plan.kv_replication == 2
    assert plan.kv_cache_bytes_per_device == 512_000  # half the KV: one of two heads
    assert plan.bytes_per_device == 788_736
    assert plan.valid and plan.fits is None
    assert "exceeds the 2 KV heads" in plan.note and "replicated on 2 devices" in plan.note


def test_the_kv_cache_splits_by_heads_down_to_one() -> None:
    shape = gqa_shape()
    kv = [plans.plan(shape, tp, 1, KV_TOKENS, None).kv_cache_bytes_per_device for tp in (1, 2, 8)]
    assert kv == [1_024_000, 512_000, 512_000]
    assert [plans.kv_heads_per_device(2, tp) for tp in (1, 2, 4, 8)] == [2, 1, 1, 1]
    assert plans.plan(shape, 8, 1, KV_TOKENS, None).kv_replication == 4


def test_pipeline_stages_split_layers_and_put_embeddings_at_the_ends() -> None:
    plan = plans.plan(gqa_shape(), tp=2, pp=2, kv_tokens=KV_TOKENS, device_memory_bytes=None)
    # Each stage: one layer (131,072 + 8,192 + 512) + half a vocab matrix + the final norm;
    # KV: one layer of two, one head of two.
    assert plan.layers_per_stage == 1
    assert plan.weights_bytes_per_device == 139_776 + 128_000 + 256
    assert plan.kv_cache_bytes_per_device == 256_000
    assert not plans.plan(gqa_shape(), 1, 4, KV_TOKENS, None).valid  # 4 stages, 2 layers


def test_the_fewest_devices_that_fit_are_found() -> None:
    # 1,167,762,853 bytes less 8 % (vLLM's 0.92 utilisation) and 1 GiB leaves 600,001
    # usable per device: only TP 2 × PP 2 (524,032) of the 4-device plans fits; TP 4
    # (788,736) does not.
    found = plans.all_plans(gqa_shape(), KV_TOKENS, 1_167_762_853)
    assert found[0].available_bytes_per_device == 600_001
    best = plans.fewest_devices(found)
    assert best is not None and (best.tp, best.pp, best.devices) == (2, 2, 4)
    assert plans.fewest_devices(plans.all_plans(gqa_shape(), KV_TOKENS, 1_000_000_000)) is None
    assert {(p.tp, p.pp) for p in found} == {
        (t, p) for t in (1, 2, 4, 8) for p in (1, 2, 4) if t * p <= 8
    }


def test_a_real_model_is_read_by_module(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from profiling.model.memory import weights_bytes

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    shape = plans.shape_of(
        plans.parameters_of(model), attention_heads=4, kv_heads=2, kv_bytes_per_token=256
    )
    assert shape.weights_bytes == weights_bytes(model)[0]
    assert len(shape.layers) == 2 and all(x.kv_proj and x.split for x in shape.layers)


# -- measured tensor parallelism (two gloo processes) -----------------------------


def test_two_cpu_processes_split_the_model_and_match_one(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    request = TPRequest(str(model_dir), 2, "cpu", "float32", 24, 2, 24, repeats=2, greedy_tokens=6)
    measured = run_tp(request, timeout_s=240)
    assert measured.status == "measured", measured.reason
    assert measured.backend == "gloo" and measured.threads_per_rank == 1
    assert measured.logits_match and measured.greedy_tokens_match
    assert measured.greedy_tokens == 6
    assert 0.45 < (measured.weights_ratio or 0) < 0.6  # about half per rank
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    shape = plans.shape_of(
        plans.parameters_of(model), attention_heads=4, kv_heads=2, kv_bytes_per_token=256
    )
    predicted = plans.plan(shape, 2, 1, 0, None).weights_bytes_per_device
    assert measured.weights_bytes_per_rank == [predicted, predicted]
    assert measured.kv_bytes_per_token_per_rank == [128, 128]  # one of two KV heads
    assert measured.single_kv_bytes_per_token == 256
    assert measured.prefill_seconds and len(measured.prefill_seconds.samples) == 2
    assert measured.decode_ratio and measured.prefill_ratio


def test_a_failed_torchrun_is_reported_with_its_reason(tmp_path: Path) -> None:
    missing = TPRequest(str(tmp_path / "no-model"), 2, "cpu", "float32", 8, 1, 8, repeats=1)
    measured = run_tp(missing, timeout_s=240)
    assert measured.status == "failed" and "torchrun failed" in measured.reason
    assert "no-model" in measured.reason or "Error" in measured.reason


def test_a_torchrun_past_its_timeout_is_killed_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A launch that surely outlives the timeout, however fast or slow the machine.
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    monkeypatch.setattr(launch, "command", lambda spec, ranks: sleeper)
    request = TPRequest(str(tmp_path / "no-model"), 2, "cpu", "float32", 8, 1, 8, repeats=1)
    slow = run_tp(request, timeout_s=1)
    assert slow.status == "failed"
    assert slow.reason == "torchrun did not finish within 1 s and was killed"
    assert slow.wall_seconds is not None and slow.wall_seconds < 600  # killed, not waited for


# -- interference and disaggregation ----------------------------------------------


def test_decode_alone_prefill_and_mixed_steps_are_measured(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ticks: list[tuple[int, int]] = []
    measured = measure_interference(
        model,
        decode_batch=2,
        decode_context=32,
        prefill_tokens=64,
        device="cpu",
        clock=CpuClock(),
        warmup=1,
        repeats=3,
        on_sample=lambda done, total: ticks.append((done, total)),
    )
    for samples in (measured.decode_alone, measured.prefill, measured.mixed):
        assert len(samples.samples) == 3 and min(samples.samples) > 0
    assert ticks == [(1, 4), (2, 4), (3, 4), (4, 4)]  # the warm-up round is reported too


def test_interference_is_reported_against_the_tpot_target() -> None:
    ms = 1e-3
    measured = Interference(Samples([10 * ms] * 3), Samples([30 * ms] * 3), Samples([40 * ms] * 3))
    workload = Workload(prompt_tokens=512, output_tokens=128, concurrency=8, tpot_ms=20)
    result = disaggregate(
        measured,
        Sizes(decode_batch=4, decode_context=576, prefill_tokens=256),
        workload,
        kv_bytes_per_token=3072,
        gpu=lookup("h100"),
    )
    assert result.decode_alone_tpot_seconds == pytest.approx(0.010)
    assert result.decode_mixed_tpot_seconds == pytest.approx(0.040)
    assert result.tpot_spike == pytest.approx(4.0)
    assert result.alone_meets_tpot and not result.mixed_meets_tpot
    assert result.mixed_step_share == pytest.approx(8 / 128)
    assert result.mean_tpot_seconds == pytest.approx(0.010 + 0.030 * 8 / 128)
    # Prefill 30 ms at 256 tokens -> 60 ms at 512: 16.7 requests/s per prefill worker;
    # a decode worker holds 4 requests for 128 × 10 ms: 3.125 requests/s.
    assert result.prefill_to_decode_ratio == pytest.approx(3.125 / (1 / 0.060))
    assert (result.prefill_workers, result.decode_workers) == (1, 2)
    assert result.workers == "1 prefill : 2 decode"
    assert result.kv_transfer_bytes_per_request == 3072 * 512
    assert result.kv_transfer_seconds == pytest.approx(3072 * 512 / 450e9)
    assert "NVLink 4" in (result.link or "")
    assert "miss the 20 ms TPOT target" in result.finding
    assert DisaggregationResult.from_dict(result.to_dict()) == result


def test_prefill_workers_cover_the_decode_side() -> None:
    assert workers_for(0.46, 1) == (1, 1)
    assert workers_for(2.2, 1) == (3, 1)
    assert workers_for(0.25, 4) == (1, 4)


# -- the whole experiment ----------------------------------------------------------


@pytest.fixture(scope="module")
def profile(model_dir: Path) -> Profile:
    from profiling.runner import run_profile

    config = ProfileConfig(
        model=str(model_dir),
        device="cpu",
        quick=True,
        workload=SMALL,
        hardware=Hardware(gpu_kind="L4"),
        experiments=["parallel"],
        tp_measure=0,
    )
    return run_profile(config)


def test_the_profile_json_has_plans_measured_and_disaggregation(profile: Profile) -> None:
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["experiments_run"] == ["disaggregation", "parallel"]
    assert data["parallel"]["plans"] and data["parallel"]["measured"]["status"] == "skipped"
    assert data["parallel"]["basis"] == "estimated from shapes"
    assert data["disaggregation"] == data["parallel"]["disaggregation"]
    for key in (
        "decode_alone_tpot_seconds",
        "decode_mixed_tpot_seconds",
        "prefill_to_decode_ratio",
    ):
        assert data["disaggregation"][key] > 0
    best = data["parallel"]["fewest_devices"]
    assert best["devices"] == 1 and best["fits"] and data["parallel"]["inputs"]["gpu_kind"] == "L4"
    assert Profile.from_dict(data).to_dict() == data
    result = ParallelResult.from_dict(data["parallel"])
    assert result.to_dict() == data["parallel"]


def test_tp_measure_accepts_only_whole_process_counts() -> None:
    for good in (None, 0, 2, 8):
        ProfileConfig(model="demo", tp_measure=good).validate()
    with pytest.raises(ConfigError, match="tp_measure"):
        ProfileConfig(model="demo", tp_measure=3).validate()


def test_the_cli_runs_the_parallel_experiment(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "parallel.json"
    args = ["profile", str(model_dir), "--device", "cpu", "--quick", "--experiments", "parallel"]
    args += ["--tp-measure", "0", "--prompt-tokens", "64", "--output-tokens", "8"]
    args += ["--concurrency", "2", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "profiling", *args],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert {"plans", "measured", "disaggregation"} <= data["parallel"].keys()
    assert data["disaggregation"]["finding"]
    assert data["config"]["tp_measure"] == 0


RAISED = "OSError: /tmp/x/no-model is not a directory with a config.json"


def test_the_reason_is_the_ranks_exception_not_torchruns_summary_after_it() -> None:
    from profiling.parallel.launch import _tail

    output = "\n".join([
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "tp_worker.py", line 38, in main',
        f"[rank1]: {RAISED}",
        "W1206 20:58:01 torch/distributed/elastic/multiprocessing/api.py:900] Sending SIGTERM",
        "Root Cause (first observed failure):",
        "  exitcode  : 1 (pid: 123)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ])  # fmt: skip
    assert _tail(output) == f"[rank1]: {RAISED}"
    assert _tail("first\nsecond\nthird\nfourth") == "second | third | fourth"  # no exception
