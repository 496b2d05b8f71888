"""Models sized from their own architecture: transformers' class for each real config,
counted on the meta device, against the totals and fits their publishers state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.measure.hardware import lookup
from profiling.model.shapes import CHECKPOINT, Shapes
from profiling.model.sizing import SizingError, role_of, size_config
from profiling.options import WEIGHT_FORMATS
from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs
from profiling.projection.precision import serving_precision

ROOT = Path(__file__).resolve().parents[3]
PUBLISHED = json.loads((ROOT / "bench/data/published_model_sizes.json").read_text())["models"]
FITS = json.loads((ROOT / "bench/data/published_fits.json").read_text())["statements"]
CONFIGS = shipped_configs()
# Published to one significant figure ("1 trillion total parameters"): a count can only
# be held to that figure's rounding.
ROUNDED = {"kimi-k2"}


def test_every_shipped_config_names_its_source():
    for name, config in CONFIGS.items():
        assert config.get("_source"), f"{name}: a shipped config says where it was copied from"


@pytest.mark.parametrize("name", sorted(set(CONFIGS) & set(PUBLISHED) - ROUNDED))
def test_parameters_are_within_one_percent_of_the_published_total(name):
    counted = size_config(CONFIGS[name]).total_params
    published = PUBLISHED[name]["total_params"]
    assert abs(counted - published) / published <= 0.01, (name, counted, published)


def test_a_total_published_to_one_figure_rounds_to_it():
    counted = size_config(CONFIGS["kimi-k2"]).total_params
    assert round(counted / 1e12) == PUBLISHED["kimi-k2"]["total_params"] / 1e12


def test_twelve_architectures_or_more_are_checked():
    checked = set(CONFIGS) & set(PUBLISHED)
    assert len(checked) >= 12, sorted(checked)


def test_deepseek_v3_is_counted_as_the_model_it_is():
    s = size_config(CONFIGS["deepseek-v3"])
    config = CONFIGS["deepseek-v3"]
    assert s.architecture == "DeepseekV3ForCausalLM"
    assert s.moe_layers == config["num_hidden_layers"] - config["first_k_dense_replace"]
    assert s.experts == config["n_routed_experts"] and s.shared_experts > 0 and s.dense_mlp > 0
    # MLA: one latent per token per layer, whole on every tensor-parallel rank.
    assert s.kv_elements == config["kv_lora_rank"] + config["qk_rope_head_dim"]
    assert s.kv_replicated
    assert s.mtp > 0 and s.checkpoint_bytes(with_mtp=True) > s.checkpoint_bytes()
    # The block-fp8 checkpoint: about one byte a parameter, its scales included.
    assert s.checkpoint is not None and s.checkpoint.method == "fp8-block"
    assert 1.0 < s.checkpoint_bytes() / s.total_params < 1.01
    # Active: 8 of 256 routed experts, the shared ones and the dense layers always.
    assert 0.05 < s.active_params / s.total_params < 0.06


def test_kimi_k2_needs_remote_code_but_is_sized_by_the_class_its_config_names():
    assert CONFIGS["kimi-k2"]["model_type"] == "kimi_k2"
    assert size_config(CONFIGS["kimi-k2"]).architecture == "DeepseekV3ForCausalLM"


def test_llama_4_maverick_interleaves_its_moe_layers_and_keeps_a_shared_expert():
    s = size_config(CONFIGS["llama-4-maverick"])
    text = CONFIGS["llama-4-maverick"]["text_config"]
    step = text["interleave_moe_layer_step"]
    assert step == 2 and s.moe_layers == text["num_hidden_layers"] // step
    assert s.shared_experts > 0 and s.vision > 0
    assert s.window_layers > 0 and s.window == text["attention_chunk_size"]


def test_gpt_oss_ships_mxfp4_experts_and_fits_its_window_layers():
    s = size_config(CONFIGS["gpt-oss-120b"])
    assert s.checkpoint is not None and s.checkpoint.method == "mxfp4"
    # modules_to_not_convert keeps attention, router, embedding and head in bf16.
    assert s.checkpoint.quantized_params == s.checkpoint.quantized_routed_params
    assert s.checkpoint.quantized_routed_params > 0.95 * s.routed_experts
    assert s.window_layers == s.full_layers == CONFIGS["gpt-oss-120b"]["num_hidden_layers"] // 2
    assert s.window == CONFIGS["gpt-oss-120b"]["sliding_window"]


def test_hybrid_models_hold_a_fixed_state_per_sequence():
    for name in ("qwen3-next-80b-a3b", "nemotron-h-56b"):
        shapes = Shapes.from_config(CONFIGS[name])
        s = shapes.sized
        assert s.state_layers > 0 and s.state_elements > 0, name
        short, long = shapes.kv_bytes("bfloat16", 1_000), shapes.kv_bytes("bfloat16", 100_000)
        # The attention layers grow with the context; the state does not.
        attention = s.full_layers * s.kv_elements * 2
        assert long - short == pytest.approx(attention * 99_000), name


def test_window_layers_stop_growing_at_their_window():
    shapes = Shapes.from_config(CONFIGS["gpt-oss-120b"])
    s = shapes.sized
    below = shapes.kv_bytes_per_token("bfloat16", s.window)
    far = shapes.kv_bytes_per_token("bfloat16", 100 * s.window)
    assert below == (s.full_layers + s.window_layers) * s.kv_elements * 2
    assert far < 0.51 * below  # past the window only the full layers grow


def test_mla_latent_is_counted_on_every_tensor_parallel_rank():
    shapes = Shapes.from_config(CONFIGS["deepseek-v3"])
    assert shapes.kv_bytes_per_token("bfloat16", devices=8) == 8 * shapes.kv_bytes_per_token(
        "bfloat16"
    )
    dense = Shapes.from_config(CONFIGS["llama-3.1-70b"])
    assert dense.kv_bytes_per_token("bfloat16", devices=8) == dense.kv_bytes_per_token("bfloat16")


def test_a_quantized_checkpoint_serves_as_it_ships_and_is_never_quantized_again():
    shapes = Shapes.from_config(CONFIGS["gpt-oss-120b"])
    precision = serving_precision(shapes, "")
    assert precision == "checkpoint-weight-only"  # MXFP4 × bf16 activations, as vLLM runs it
    assert shapes.weights_bytes(CHECKPOINT) < 0.6 * shapes.weights_bytes("bfloat16")
    assert shapes.bytes_per_param(CHECKPOINT) < 1.0
    from profiling.config import Workload
    from profiling.projection.configurations import Configuration
    from profiling.projection.search import Scenario, weight_formats

    gpu = lookup("H100-SXM")
    scenario = Scenario(shapes, gpu, 1, precision, Workload(), Configuration(gpu.key))
    assert weight_formats(scenario) == ("auto",)


@pytest.mark.parametrize("statement", FITS, ids=lambda s: f"{s['model']}-{s['weights']}")
def test_fit_verdicts_agree_with_what_the_publishers_state(statement):
    shapes = Shapes.from_config(CONFIGS[statement["model"]])
    asked = WEIGHT_FORMATS[statement["weights"]]
    precision = serving_precision(shapes, asked)
    if "memory_gib" in statement:
        weights = shapes.weights_bytes(CHECKPOINT if shapes.checkpoint else precision)
        assert (weights <= statement["memory_gib"] * 2**30) == statement["fits"]
        return
    gpu, count = lookup(statement["gpu"]), statement["gpu_count"]
    # One user, a short chat: the least a fit statement can mean.
    calibration = assumed(gpu, precision, shapes.num_layers)
    fits = project(
        shapes, calibration, precision, Traffic(1024, 256, 1), Deployment(gpu, count)
    ).fits
    assert fits == statement["fits"], statement["quote"]


def test_deepseek_v3_in_its_fp8_does_not_fit_eight_h100s_and_fits_eight_h200s():
    shapes = Shapes.from_config(CONFIGS["deepseek-v3"])
    precision = serving_precision(shapes, "")
    assert precision == "checkpoint-fp8"
    verdicts = {}
    for kind in ("H100-SXM", "H200"):
        gpu = lookup(kind)
        calibration = assumed(gpu, precision, shapes.num_layers)
        verdicts[kind] = project(
            shapes, calibration, precision, Traffic(1024, 256, 1), Deployment(gpu, 8)
        ).fits
    assert verdicts == {"H100-SXM": False, "H200": True}


def test_a_model_transformers_does_not_ship_is_refused_by_name():
    config = {"model_type": "my_remote_model", "architectures": ["MyRemoteForCausalLM"],
              "auto_map": {"AutoModelForCausalLM": "modeling.MyRemoteForCausalLM"},
              "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "vocab_size": 100}  # fmt: skip
    with pytest.raises(SizingError, match="my_remote_model.*MyRemoteForCausalLM"):
        size_config(config)


def test_an_unknown_quantization_method_is_refused_by_name():
    config = {**CONFIGS["llama-3.1-8b"], "num_hidden_layers": 2,
              "quantization_config": {"quant_method": "mystery-q"}}  # fmt: skip
    with pytest.raises(SizingError, match="mystery-q"):
        size_config(config)


def test_an_unknown_layer_type_is_refused_by_name():
    config = {**CONFIGS["qwen3-32b"], "num_hidden_layers": 2,
              "layer_types": ["full_attention", "indexed_attention"]}  # fmt: skip
    with pytest.raises(SizingError, match="indexed_attention"):
        size_config(config)


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("model.layers.3.mlp.experts.gate_up_proj", "routed_experts"),
        ("model.layers.3.mlp.shared_experts.up_proj.weight", "shared_experts"),
        ("model.layers.3.mlp.gate.weight", "router"),
        ("model.layers.3.self_attn.kv_a_proj_with_mqa.weight", "attention"),
        ("model.layers.3.self_attn.kv_a_layernorm.weight", "attention"),
        ("model.layers.3.input_layernorm.weight", "norms"),
        ("model.layers.3.mlp.down_proj.weight", "dense_mlp"),
        ("model.layers.2.mixer.conv1d.weight", "attention"),
        ("model.layers.2.mixer.up_proj.weight", "dense_mlp"),
        ("model.embed_tokens.weight", "embedding"),
        ("lm_head.weight", "lm_head"),
        ("model.vision_tower.encoder.layers.0.mlp.fc1.weight", "vision"),
        ("model.norm.weight", "norms"),
    ],
)
def test_each_parameter_gets_its_role(name, role):
    assert role_of(name) == role


def test_a_sized_config_is_read_back_without_torch_in_another_process(tmp_path):
    env = {**os.environ, "ADVISOR_SIZING_DIR": str(tmp_path)}
    script = (
        "import json, sys; from profiling.model.sizing import size_config; "
        f"s = size_config(json.load(open({str(tmp_path / 'c.json')!r}))); "
        "print(s.total_params, 'torch' in sys.modules)"
    )
    (tmp_path / "c.json").write_text(json.dumps(CONFIGS["deepseek-v3"]))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300, check=True)  # fmt: skip
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300, check=True)  # fmt: skip
    count = first.stdout.split()[0]
    assert first.stdout.split() == [count, "True"]  # the first sizing builds the class
    assert second.stdout.split() == [count, "False"]  # the second reads the cache
    assert len(list(tmp_path.glob("*.json"))) == 2  # the config and its one sizing


TINY = {
    "deepseek_v3": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                        num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=8,
                        num_experts_per_tok=2, n_group=2, topk_group=1, num_attention_heads=4,
                        num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16,
                        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, vocab_size=256),
    "gpt_oss": dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                    num_local_experts=4, num_experts_per_tok=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, vocab_size=256, sliding_window=8),
    "qwen3_next": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                       shared_expert_intermediate_size=32, num_hidden_layers=4, num_experts=4,
                       num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=8, linear_value_head_dim=8, vocab_size=256),
    "llama4_text": dict(hidden_size=64, intermediate_size=32, intermediate_size_mlp=128,
                        num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=1,
                        interleave_moe_layer_step=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, vocab_size=256),
}  # fmt: skip


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_the_meta_count_is_the_count_of_the_real_model(model_type):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **TINY[model_type])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)  # real weights, on the CPU
    real = sum(p.numel() for p in model.parameters())  # tied tensors once
    assert size_config(config.to_dict()).total_params == real


def test_an_nvfp4_checkpoint_keeps_its_excluded_layers_and_asks_for_an_fp8_cache():
    shapes = Shapes.from_config(CONFIGS["deepseek-v3.1-nvfp4"])
    c = shapes.checkpoint
    assert c is not None and (c.method, c.bits, c.kv) == ("nvfp4", 4.5, "float8")
    # exclude_modules keeps MLA's projections in bf16: fewer parameters quantized than
    # every linear weight of the decoder, all routed experts still among them.
    assert c.quantized_routed_params == shapes.sized.routed_experts
    assert c.quantized_params < shapes.sized.body_params - shapes.sized.norms
    assert serving_precision(shapes, "") == "checkpoint-fp4"


def test_a_modelopt_checkpoint_directory_is_read_with_its_quant_config(tmp_path):
    from profiling.estimate_cli import read_model_config

    config = {k: v for k, v in CONFIGS["deepseek-v3.1-nvfp4"].items()
              if k not in ("quantization_config", "_source")}  # fmt: skip
    quant = {k: v for k, v in CONFIGS["deepseek-v3.1-nvfp4"]["quantization_config"].items()
             if k != "quant_method"}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": quant}))
    read, _ = read_model_config(str(tmp_path))
    assert read["quantization_config"]["quant_algo"] == "NVFP4"
    assert size_config(read).checkpoint.method == "nvfp4"


def test_an_mla_decode_step_attends_over_the_latent():
    config = CONFIGS["deepseek-v3"]
    shapes = Shapes.from_config(config)
    heads, latent = config["num_attention_heads"], config["kv_lora_rank"]
    rope = config["qk_rope_head_dim"]
    # Per context token per layer: q·k over latent + rope dims and p·v over the latent,
    # two FLOPs a multiply-add, every head.
    per_token = 2 * heads * (latent + rope) + 2 * heads * latent
    layers = shapes.sized.full_layers
    grown = shapes.decode_flops(1, 2000) - shapes.decode_flops(1, 1000)
    assert grown == pytest.approx(per_token * layers * 1000)
    # A prefill chunk multiplies the up-projected heads instead (nope + rope, v).
    nope, v = config["qk_nope_head_dim"], config["v_head_dim"]
    prefill = shapes.chunk_flops(1, 2000) - shapes.chunk_flops(1, 1000)
    assert prefill == pytest.approx(2 * heads * (nope + rope + v) * layers * 1000)


def test_the_layout_advice_serves_the_kv_cache_the_checkpoint_declares():
    from profiling.advice.build import estimate_report
    from profiling.config import Hardware, Workload

    shapes = Shapes.from_config(CONFIGS["deepseek-v3.1-nvfp4"])
    gpu = lookup("B200")
    # The deployment as the estimate command makes it for this checkpoint: fp8 KV.
    deployment = Hardware(gpu_kind="B200", gpu_count=8, kv_cache="fp8")
    advice, points = estimate_report(shapes, gpu, 8, serving_precision(shapes, ""), Workload(),
                                     deployment=deployment)  # fmt: skip
    throughput = next(p.predicted for p in points if p.metric == "output_tokens_per_second")
    layout = next(o for o in advice.not_recommended if "best layout" in o.why)
    assert f"{throughput:,.0f} tok/s" in layout.why
