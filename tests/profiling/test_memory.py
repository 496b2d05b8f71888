"""Weights and KV-cache bytes from real tensors, peak tracking, fit checks."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from profiling import hardware
from profiling.config import Workload
from profiling.memory import (
    RESERVE_FIXED_BYTES,
    PeakMemory,
    fit_check,
    kv_bytes_per_token_computed,
    kv_bytes_per_token_measured,
    weights_bytes,
)

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
    with PeakMemory("cpu") as tracker:
        block = torch.ones(64_000_000, dtype=torch.uint8)  # 64 MB, touched
        del block
    assert tracker.reading.method == "rss_delta"
    assert tracker.reading.peak_bytes is not None and tracker.reading.peak_bytes > 32_000_000


def test_fit_check_counts_kv_for_every_request_and_keeps_a_reserve() -> None:
    gpu = hardware.lookup("h100")
    workload = Workload(prompt_tokens=1000, output_tokens=24, concurrency=10)
    fit = fit_check(10_000_000_000, 100_000, workload, gpu, gpu_count=1)
    assert fit.kv_cache_bytes == 100_000 * 1024 * 10
    assert fit.required_bytes == 10_000_000_000 + fit.kv_cache_bytes
    reserve = int(0.1 * gpu.memory_bytes) + RESERVE_FIXED_BYTES
    assert fit.available_bytes == gpu.memory_bytes - reserve
    assert fit.fits and fit.headroom_bytes == fit.available_bytes - fit.required_bytes
    assert fit.max_concurrency == (fit.available_bytes - 10_000_000_000) // (100_000 * 1024)
    assert "10%" in fit.note and "1.00 GiB" in fit.note


def test_fit_check_reports_a_model_too_big_for_the_gpu() -> None:
    fit = fit_check(100_000_000_000, 1, Workload(), hardware.lookup("l4"), gpu_count=1)
    assert not fit.fits and fit.headroom_bytes < 0 and fit.max_concurrency == 0


def test_fit_check_adds_up_several_gpus() -> None:
    one = fit_check(1, 1, Workload(), hardware.lookup("h100"), gpu_count=1)
    four = fit_check(1, 1, Workload(), hardware.lookup("h100"), gpu_count=4)
    assert four.device_memory_bytes == 4 * one.device_memory_bytes
    assert four.available_bytes == 4 * one.available_bytes
