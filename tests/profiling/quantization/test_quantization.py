"""The quantization experiment: real variants on CPU, honest bytes, exact quality metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from profiling.config import ProfileConfig, Workload
from profiling.model.loading import load
from profiling.model.prompts import PromptSet, load_prompts
from profiling.quantization import experiment as quantization
from profiling.quantization import quality
from profiling.quantization.experiment import Spec
from profiling.quantization.keep import keep_plan
from profiling.quantization.methods import METHODS
from profiling.quantization.results import (
    MEASURED,
    NOT_AVAILABLE,
    QuantizationResult,
)
from profiling.quantization.storage import weight_bytes
from tests.profiling.test_cli import run_cli
from tests.profiling.tiny import save_tiny_llama_dir

pytestmark = pytest.mark.model  # models quantized and measured

SMALL = Workload(prompt_tokens=32, output_tokens=6, concurrency=2)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread: None) -> None:
    """Every test here runs on one torch thread."""


def tiny_tokenizer(path: Path) -> None:
    """A word-level tokenizer saved beside the tiny model, so quality can be scored."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for p in load_prompts().prompts for w in p.split()})[:120]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    model = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=model, unk_token="<unk>", eos_token="</s>")
    tok.save_pretrained(path)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = save_tiny_llama_dir(tmp_path_factory.mktemp("quant") / "tiny")
    tiny_tokenizer(path)
    return path


def plan_for(config: ProfileConfig) -> quantization.QuantPlan:
    plan = quantization.make_plan(config, "float32")
    plan.prompts = PromptSet(plan.prompts.version, plan.prompts.prompts[:3])
    plan.eval_tokens, plan.repeats, plan.calibration_samples = 64, 1, 8
    return plan


def run(model_dir: Path, precisions: list[str], keep: list[str] | None = None) -> Any:
    config = ProfileConfig(
        model=str(model_dir),
        device="cpu",
        quick=True,
        workload=SMALL,
        precisions=precisions,
        quant_variants=keep or [],
    )
    loaded = load(config, "cpu", "float32")
    events: list[tuple[str, float, str]] = []
    result = quantization.run_quantization(
        config, loaded, "cpu", "float32", plan_for(config), progress=lambda *e: events.append(e)
    )
    return result, events


@pytest.fixture(scope="module")
def measured(model_dir: Path) -> tuple[QuantizationResult, list[tuple[str, float, str]]]:
    return run(model_dir, ["fp32", "bf16", "int8", "int8-dynamic", "int4"], ["lm_head"])


def by_name(result: QuantizationResult) -> dict[str, Any]:
    return {v.name: v for v in result.variants}


def test_three_precisions_are_measured_on_cpu_with_the_first_as_reference(measured) -> None:
    result, events = measured
    variants = by_name(result)
    for name in ("fp32", "bf16", "int8", "int8-dynamic", "int8 · lm_head quantized"):
        v = variants[name]
        assert v.status == MEASURED, v.reason
        assert v.weights_bytes and v.ttft_seconds and v.seconds_per_token
        assert v.tokens_per_second > 0 and v.concurrency == 2
        assert v.concurrency_seconds_per_token is not None
        assert v.perplexity and 0 <= v.top1_agreement <= 1 and v.kl_divergence >= 0
    assert result.reference == "fp32" and variants["fp32"].is_reference
    assert result.quality_meaningful and result.eval_text_tokens == 64
    assert events[-1][0] == "quantization" and events[-1][1] == 1.0
    assert result.finding.startswith("against fp32: bf16: weights 2.0× smaller")


def test_the_reference_compared_with_itself_agrees_exactly(measured) -> None:
    result, _ = measured
    reference = result.reference_variant
    assert reference.top1_agreement == 1.0 and reference.kl_divergence == 0.0
    assert all(s.first_divergence is None for s in reference.samples)
    assert len(reference.samples) == 3 and reference.samples[0].text


def test_int8_linear_layers_take_fewer_bytes_than_bf16(measured) -> None:
    variants = by_name(measured[0])
    bf16 = variants["bf16"].linear_weights_bytes
    int8 = variants["int8 · lm_head quantized"].linear_weights_bytes
    assert bf16 == variants["fp32"].linear_weights_bytes // 2
    # int8 values plus one scale and zero point per row: a bit over half of bf16
    assert int8 < 0.6 * bf16
    assert variants["int8"].settings.library.startswith("torchao")


def test_an_unavailable_method_is_reported_and_the_job_goes_on(measured) -> None:
    variants = by_name(measured[0])
    assert variants["int4"].status == NOT_AVAILABLE and "CUDA" in variants["int4"].reason
    assert variants["int4"].weights_bytes is None
    assert list(variants).index("int4") < len(variants) - 1  # later variants still ran


def test_head_and_embeddings_stay_in_the_reference_dtype_unless_asked(model_dir: Path) -> None:
    config = ProfileConfig(model=str(model_dir), device="cpu")
    reference = load(config, "cpu", "float32").model
    cases = (
        ("", "float32", "float32", ["lm_head", "model.embed_tokens"]),
        ("lm_head", "int8", "float32", ["model.embed_tokens"]),
        ("embeddings", "float32", "int8", ["lm_head"]),
    )
    for variant, head, embed, kept in cases:
        plan = keep_plan(reference, METHODS["int8"], Spec("int8", variant))
        request = quantization_request(config, plan.modules)
        built = METHODS["int8"].make(METHODS["int8"], request)
        assert stored_dtype(built.model.lm_head.weight) == f"torch.{head}", variant
        assert stored_dtype(built.model.model.embed_tokens.weight) == f"torch.{embed}", variant
        assert built.settings.kept_modules == kept


def stored_dtype(weight: Any) -> str:
    return str(weight.qdata.dtype if hasattr(weight, "qdata") else weight.dtype)


def quantization_request(config: ProfileConfig, kept: list[str]) -> Any:
    from profiling.quantization.methods import Request

    return Request(config=config, device="cpu", compute_dtype="float32", kept=kept)


def test_the_default_variant_holds_more_bytes_than_the_one_with_its_head_quantized(
    measured,
) -> None:
    variants = by_name(measured[0])
    kept, full = variants["int8"], variants["int8 · lm_head quantized"]
    assert kept.linear_weights_bytes > full.linear_weights_bytes
    assert kept.settings.kept_modules == ["lm_head", "model.embed_tokens"]
    assert full.settings.kept_modules == ["model.embed_tokens"]


def test_tied_head_and_embeddings_are_kept_together_and_recorded() -> None:
    from transformers import LlamaForCausalLM

    from tests.profiling.tiny import tiny_llama_config

    model = LlamaForCausalLM(tiny_llama_config(tie_word_embeddings=True))
    kept = keep_plan(model, METHODS["int8"], Spec("int8"))
    assert kept.modules == ["lm_head", "model.embed_tokens"] and "tied_embeddings" in kept.details
    # quantizing one half of a tied weight quantizes both, untied
    quantized = keep_plan(model, METHODS["int8"], Spec("int8", "lm_head"))
    assert quantized.modules == [] and "untied" in quantized.details["tied_embeddings"]
    # bitsandbytes never quantizes embeddings: asking for a tied head changes nothing
    same = keep_plan(model, METHODS["bnb-int8"], Spec("bnb-int8", "lm_head")).same_as_base
    assert same and "does not quantize" in same
    gptq = keep_plan(model, METHODS["gptq-int4"], Spec("gptq-int4", "embeddings"))
    assert "never the head or embeddings" in gptq.same_as_base


def test_variants_are_named_by_the_part_they_change() -> None:
    names = [s.name for s in quantization.variant_specs(variant_plan(["lm_head", "edge_blocks"]))]
    assert names == ["fp32", "int8", "int8 · lm_head quantized", "int8 · edge_blocks kept"]
    edge = quantization.Spec("int8", "edge_blocks")
    assert edge.kept_parts == ["lm_head", "embeddings", "edge_blocks"]
    assert quantization.Spec("int8", "embeddings").kept_parts == ["lm_head"]


def variant_plan(variants: list[str]) -> quantization.QuantPlan:
    config = ProfileConfig(model="demo", precisions=["fp32", "int8"], quant_variants=variants)
    return quantization.make_plan(config, "float32")


def test_the_result_round_trips_through_a_dict(measured) -> None:
    result = measured[0]
    data = json.loads(json.dumps(result.to_dict()))
    assert QuantizationResult.from_dict(data) == result


def test_storage_counts_what_a_quantized_tensor_really_holds() -> None:
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    layer = torch.nn.Sequential(torch.nn.Linear(64, 32, bias=False))
    assert weight_bytes(layer).total == 64 * 32 * 4
    quantize_(layer, Int8WeightOnlyConfig())
    counted = weight_bytes(layer)
    assert counted.linear == counted.total
    # 32 x 64 int8 values, plus per-row float32 scales and int8 zero points
    assert 64 * 32 <= counted.total <= 64 * 32 + 32 * (4 + 1) + 64


# -- the metrics on hand-built cases ----------------------------------------------------


def test_kl_agreement_and_perplexity_match_hand_computed_values() -> None:
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64))
    var = torch.log(torch.tensor([[0.25, 0.75], [0.9, 0.1]], dtype=torch.float64))
    # position 0: 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75); position 1: identical, 0
    expected = (0.5 * math.log(2) + 0.5 * math.log(2 / 3)) / 2
    assert quality.mean_kl([ref], [var]) == pytest.approx(expected, rel=1e-12)
    assert quality.mean_kl([ref], [ref]) == 0.0
    # argmax: ref [0 (tie -> first), 0], var [1, 0]
    assert quality.top1_agreement([ref], [var]) == 0.5
    uniform = torch.zeros(4, 10)
    nll, count = quality.nll_sum(uniform, torch.tensor([1, 2, 3, 4]))
    assert count == 4 and quality.perplexity(nll, count) == pytest.approx(10.0)


def test_first_divergence_finds_the_first_differing_token() -> None:
    assert quality.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert quality.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert quality.first_divergence([1, 2, 3], [1, 2]) == 2


def test_default_precisions_follow_the_run_dtype() -> None:
    assert quantization.default_precisions("float32") == ["fp32", "int8", "int4"]
    assert quantization.default_precisions("bfloat16") == ["bf16", "int8", "int4"]


# -- the CLI ------------------------------------------------------------------------------


def test_cli_runs_the_quantization_experiment(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    done = run_cli(
        "profile", str(model_dir), "--device", "cpu", "--quick", "--experiments",
        "quantization", "--precisions", "fp32,bf16,int8", "--json", str(out),
        "--prompt-tokens", "32", "--output-tokens", "6", "--concurrency", "2",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    variants = data["quantization"]["variants"]
    assert [v["name"] for v in variants] == ["fp32", "bf16", "int8"]
    # costed before it ran (no budget on a CPU), and kept beside the time it took
    planned = data["quantization"]["planned_seconds"]
    assert planned > 0 and data["planned_seconds"] == {"quantization": planned}
    assert data["quantization"]["budget_seconds"] is None
    assert "quantization" in data["phase_seconds"]
    keys = {"weights_bytes", "peak_bytes", "ttft_seconds", "seconds_per_token", "perplexity"}
    assert all(keys <= v.keys() and v["status"] == "measured" for v in variants)


def test_cli_refuses_an_unknown_precision_or_part(model_dir: Path) -> None:
    done = run_cli("profile", str(model_dir), "--precisions", "fp32,int3")
    assert done.returncode == 2 and "precisions: Unknown: int3; choose from fp32" in done.stderr
    done = run_cli("profile", str(model_dir), "--quant-variants", "head")
    assert done.returncode == 2
    assert "quant_variants: Unknown: head; choose from lm_head" in done.stderr


# -- GPTQ (slow: calibrates on CPU) ------------------------------------------------------


@pytest.mark.slow
def test_gptq_int4_quantizes_a_tiny_model_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("gptqmodel")
    from transformers import LlamaForCausalLM

    from tests.profiling.tiny import tiny_llama_config

    # GPTQ packs output rows in 32s: every projection needs a multiple of 32 outputs.
    shape = dict(hidden_size=64, intermediate_size=128, num_attention_heads=2)
    path = tmp_path / "tiny"
    LlamaForCausalLM(tiny_llama_config(**shape)).save_pretrained(path)
    tiny_tokenizer(path)
    result, _ = run(path, ["fp32", "gptq-int4"])
    gptq = by_name(result)["gptq-int4"]
    assert gptq.status == MEASURED, gptq.reason
    assert gptq.linear_weights_bytes < by_name(result)["fp32"].linear_weights_bytes / 3
    assert gptq.settings.method == "gptq" and gptq.perplexity is not None


def test_a_missing_kernel_package_is_not_available_with_what_to_install():
    from profiling.quantization.methods import kernel_missing

    exc = ModuleNotFoundError("No module named 'mslk'", name="mslk")
    said = kernel_missing("Int4WeightOnlyConfig", exc)
    assert said.startswith("torchao Int4WeightOnlyConfig needs a kernel package")
    assert said.endswith(": pip install mslk") and "No module named 'mslk'" in said
