"""Weights and KV-cache bytes from real tensors, peak tracking, fit checks."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from profiling.config import Workload
from profiling.measure import hardware
from profiling.model.memory import (
    PeakMemory,
    kv_bytes_per_token_computed,
    kv_bytes_per_token_measured,
    weights_bytes,
)
from profiling.model.shapes import Shapes
from profiling.projection.calibration import assumed
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs
from profiling.projection.fit import (
    RESERVE_FIXED_BYTES,
    Footprint,
    activation_bytes,
    fit_check,
    usable_bytes,
)
from profiling.technique_kit.facts import Facts
from profiling.units import GIB

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_llama(**overrides: object) -> LlamaForCausalLM:
    settings = dict(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=256,
        max_position_embeddings=128,
    )
    settings.update(overrides)
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**settings)).eval()


@pytest.mark.parametrize(
    "layout",
    [
        dict(num_attention_heads=4, num_key_value_heads=4),  # multi-head
        dict(num_attention_heads=4, num_key_value_heads=1),  # grouped-query (MQA)
        dict(num_attention_heads=8, num_key_value_heads=2, num_hidden_layers=3),  # GQA
        dict(num_attention_heads=4, num_key_value_heads=2, head_dim=32),  # head_dim != h/heads
    ],
    ids=["mha", "mqa", "gqa", "explicit-head-dim"],
)
def test_measured_kv_bytes_per_token_equal_the_formula(layout: dict) -> None:
    model = tiny_llama(**layout)
    computed = kv_bytes_per_token_computed(model.config, dtype_bytes=4)
    heads, kv_heads = layout["num_attention_heads"], layout["num_key_value_heads"]
    head_dim = layout.get("head_dim", 64 // heads)
    assert computed == 2 * layout.get("num_hidden_layers", 2) * kv_heads * head_dim * 4
    assert kv_bytes_per_token_measured(model, "cpu") == computed


def test_kv_bytes_follow_the_dtype() -> None:
    model = tiny_llama().to(torch.bfloat16)
    assert kv_bytes_per_token_measured(model, "cpu") == kv_bytes_per_token_computed(
        model.config, dtype_bytes=2
    )


def test_weights_bytes_equal_the_sum_of_parameter_and_buffer_bytes() -> None:
    model = tiny_llama(tie_word_embeddings=False)
    expected = sum(t.numel() * t.element_size() for t in model.parameters())
    expected += sum(t.numel() * t.element_size() for t in model.buffers())
    total, by_dtype = weights_bytes(model)
    assert total == expected
    assert by_dtype == {"float32": expected}


def test_tied_embeddings_are_counted_once() -> None:
    tied, untied = tiny_llama(tie_word_embeddings=True), tiny_llama(tie_word_embeddings=False)
    assert tied.lm_head.weight.data_ptr() == tied.model.embed_tokens.weight.data_ptr()
    embedding_bytes = 256 * 64 * 4
    assert weights_bytes(untied)[0] - weights_bytes(tied)[0] == embedding_bytes


def test_weights_bytes_split_by_dtype() -> None:
    model = tiny_llama()
    model.lm_head.to(torch.bfloat16)
    model.config.tie_word_embeddings = False
    _, by_dtype = weights_bytes(model)
    assert set(by_dtype) == {"float32", "bfloat16"}


def test_cpu_peak_tracker_sees_a_large_allocation() -> None:
    # Alive until the tracker's last reading, in __exit__: the sampling thread need not
    # catch it on a busy machine. (64 MB is above glibc's largest mmap threshold: fresh
    # pages, resident once touched.)
    with PeakMemory("cpu") as tracker:
        block = torch.ones(64_000_000, dtype=torch.uint8)  # 64 MB, touched
    del block
    assert tracker.reading.method == "rss_delta"
    assert tracker.reading.peak_bytes is not None and tracker.reading.peak_bytes > 32_000_000


def test_fit_check_counts_kv_for_every_request_and_keeps_a_reserve() -> None:
    gpu = hardware.lookup("h100")
    workload = Workload(prompt_tokens=1000, output_tokens=24, concurrency=10)
    fit = fit_check(
        Footprint(10_000_000_000, 100_000, activations=GIB // 2), workload, gpu, gpu_count=1
    )
    assert fit.kv_cache_bytes == 100_000 * 1024 * 10
    assert fit.required_bytes == 10_000_000_000 + fit.kv_cache_bytes
    reserve = int(0.08 * gpu.memory_bytes) + RESERVE_FIXED_BYTES + GIB // 2
    assert fit.available_bytes == gpu.memory_bytes - reserve
    assert fit.activation_bytes == GIB // 2
    assert fit.fits and fit.headroom_bytes == fit.available_bytes - fit.required_bytes
    assert fit.max_concurrency == (fit.available_bytes - 10_000_000_000) // (100_000 * 1024)
    assert "8%" in fit.note and "1.00 GiB" in fit.note
    assert "512 MiB for the activations" in fit.note


def test_fit_check_reports_a_model_too_big_for_the_gpu() -> None:
    fit = fit_check(
        Footprint(100_000_000_000, 1, activations=0), Workload(), hardware.lookup("l4"), 1
    )
    assert not fit.fits and fit.headroom_bytes < 0 and fit.max_concurrency == 0


def test_fit_check_adds_up_several_gpus() -> None:
    one = fit_check(
        Footprint(1, 1, activations=GIB), Workload(), hardware.lookup("h100"), gpu_count=1
    )
    four = fit_check(
        Footprint(1, 1, activations=GIB), Workload(), hardware.lookup("h100"), gpu_count=4
    )
    assert four.device_memory_bytes == 4 * one.device_memory_bytes
    assert four.available_bytes == 4 * one.available_bytes


def test_the_activation_peak_is_the_largest_prefill_chunk_on_each_shard() -> None:
    configs = shipped_configs()
    llama = Shapes.from_config(configs["llama-3.1-8b"])
    logits = 256 * 128256 * 4  # the sampled rows' float32 logits, gathered whole
    # 8,192 tokens × (the residual and its normed copy + gate, up and their product) × 2 bytes
    one = activation_bytes(llama, "bfloat16", 1)
    assert one == 8192 * (2 * 4096 + 3 * 14336) * 2 + logits
    assert activation_bytes(llama, "bfloat16", 2) == 8192 * (2 * 4096 + 3 * 14336 / 2) * 2 + logits
    assert activation_bytes(llama, "int8", 1) == one  # a weight format keeps 16-bit activations
    assert activation_bytes(llama, "float32", 1) == 2 * (one - logits) + logits
    assert activation_bytes(None, "bfloat16", 1) == 0
    mixtral = Shapes.from_config(configs["mixtral-8x7b"])  # two routed copies of each token
    assert activation_bytes(mixtral, "bfloat16", 1) == (
        8192 * (2 * 4096 + 2 * (3 * 14336 + 4096)) * 2 + 256 * 32000 * 4
    )


def test_the_fit_check_and_the_estimate_hold_back_the_same_activations() -> None:
    llama = Shapes.from_config(shipped_configs()["llama-3.1-70b"])
    gpu = hardware.lookup("H100")
    peak = activation_bytes(llama, "bfloat16", 2)
    workload = Workload(prompt_tokens=2000, output_tokens=200, concurrency=1)
    kv = llama.kv_bytes_per_token("bfloat16")
    # Weights that leave room for one request's KV only without the activations.
    room = usable_bytes(gpu.memory_bytes, 0) * 2
    weights = room - kv * workload.context_tokens
    fit = fit_check(Footprint(weights, kv, peak), workload, gpu, 2)
    assert not fit.fits and fit.headroom_bytes == -2 * peak
    calibration = assumed(gpu, "bfloat16", llama.num_layers)
    projection = project(llama, calibration, "bfloat16", Traffic(2000, 200, 1), Deployment(gpu, 2))
    facts = Facts.from_projection(projection, llama, calibration, workload, gpu)
    assert facts.fit.available_bytes == usable_bytes(gpu.memory_bytes, peak) * 2
    assert projection.fits == (projection.weights_bytes + projection.kv_cache_bytes
                               <= facts.fit.available_bytes)  # fmt: skip
