"""The checks `gpu_check.py` runs, each on a model built from a config (random weights).

Everything timed goes through the profiler's own code (`baseline.decode_point`,
`baseline.prefill_point`: warm-ups, device synchronisation, repeats, medians
with p10–p90), so the figures are the ones a profile would report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from profiling.baseline import plan as baseline_plan
from profiling.baseline import sweeps as baseline
from profiling.config import ProfileConfig
from profiling.measure import hardware
from profiling.measure.timing import clock_for
from profiling.model.loading import Source, model_info
from profiling.model.memory import kv_bytes_per_token_computed, weights_bytes
from profiling.quantization.methods import METHODS, Request

SHAPES = {
    # Llama-3.2-1B and Llama-3.1-8B, as their configs state them.
    "1b": LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128_256,
        max_position_embeddings=8192, rope_theta=500_000.0, tie_word_embeddings=True,
    ),
    "8b": LlamaConfig(
        hidden_size=4096, intermediate_size=14_336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128_256,
        max_position_embeddings=8192, rope_theta=500_000.0, tie_word_embeddings=False,
    ),
    # Small enough for two CPU cores, big enough (~0.2 GB in float32) that decode
    # reads more than the caches hold.
    "small": LlamaConfig(
        hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
        num_attention_heads=8, num_key_value_heads=4, vocab_size=32_000,
        max_position_embeddings=2048, tie_word_embeddings=False,
    ),
}  # fmt: skip
BATCHES = (1, 32)
CONTEXT = {"cuda": 1024, "cpu": 128}
PREFILL_TOKENS = {"cuda": 2048, "cpu": 256}
EXACT_TOKENS = 32
PLAN = {
    "cuda": baseline_plan.Plan([], [], [], [], warmup=3, repeats=20, min_seconds=0.5),
    "cpu": baseline_plan.Plan([], [], [], [], warmup=1, repeats=5, min_seconds=0.0),
}


def _kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def bandwidths(device: str) -> tuple[float, float]:
    """(copy, read) bytes per second as the profiler measures them (profiling.measure.bandwidth)."""
    from profiling.measure import bandwidth

    found = bandwidth.measure(device)
    return found.copy_bytes_per_second, found.read_bytes_per_second


def build(shape: str, device: str, dtype: str) -> baseline.Subject:
    """The shape with random weights, on the device, as the profiler's Subject."""
    torch.manual_seed(0)
    config = SHAPES[shape]
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=getattr(torch, dtype)).eval()
    info = model_info(model, Source("config", shape), config_only=True, revision=None)
    gpu = None
    if _kind(device) == "cuda":
        gpu = hardware.match_device_name(torch.cuda.get_device_name(device))
    itemsize = getattr(torch, dtype).itemsize
    return baseline.Subject(
        model, None, info, device, dtype, weights_bytes(model)[0],
        kv_bytes_per_token_computed(config, itemsize), gpu,
        copy_bandwidth=bandwidths(device)[0],
    )  # fmt: skip


def decode_figures(subject: baseline.Subject, read: float) -> dict[str, Any]:
    """One step at each batch on the compiled static path and the eager one, by path then
    batch; bytes as the profiler counts them (every weight once per step, plus the KV)."""
    kind, out = _kind(subject.device), {}
    context = CONTEXT[kind]
    for path in ("static-compiled", "eager"):
        subject.decode_path = path
        rows = {}
        for batch in BATCHES:
            try:
                with torch.inference_mode():
                    point = baseline.decode_point(
                        subject, PLAN[kind], clock_for(subject.device), batch, context
                    )
            except Exception as exc:  # an out-of-memory at batch 32 is a figure too
                rows[str(batch)] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                continue
            s = point.seconds_per_token
            rows[str(batch)] = {
                "ms_per_step": s.median * 1e3, "p10_ms": s.p10 * 1e3, "p90_ms": s.p90 * 1e3,
                "samples_s": s.samples, "bytes_per_step": point.bytes_per_step,
                "bytes_per_s": point.achieved_bytes_per_second,
                "fraction_of_copy": point.fraction_of_copy,
                "fraction_of_read": point.achieved_bytes_per_second / read,
                "path": point.path, "path_reason": point.path_reason,
            }  # fmt: skip
        out[path] = rows
    subject.decode_path = "auto"
    return out


def step_ratio(decode: dict[str, Any]) -> dict[str, float]:
    """Eager step time over compiled step time, per batch measured on both."""
    compiled, eager = decode["static-compiled"], decode["eager"]
    return {
        b: eager[b]["ms_per_step"] / compiled[b]["ms_per_step"]
        for b in compiled
        if "ms_per_step" in compiled[b] and "ms_per_step" in eager.get(b, {})
    }


def prefill_figures(subject: baseline.Subject) -> dict[str, Any]:
    kind = _kind(subject.device)
    tokens = PREFILL_TOKENS[kind]
    params = baseline.body_and_head_params(subject.model)
    with torch.inference_mode():
        point = baseline.prefill_point(
            subject, PLAN[kind], clock_for(subject.device), tokens, 1, params
        )
    return {
        "tokens": tokens, "ms": point.seconds.median * 1e3, "samples_s": point.seconds.samples,
        "flops_per_s": point.achieved_flops_per_second, "peak": point.peak_flops_per_second,
        "fraction_of_peak": point.fraction_of_peak,
    }  # fmt: skip


def exactness(shape: str, device: str) -> dict[str, Any]:
    """bf16: greedy decoding one token per step, against one forward over the prompt and
    those tokens (the verify pass of speculation, a batched prefill): do the argmaxes
    agree, where first not, and by how much do the logits differ?"""
    from transformers import DynamicCache

    torch.manual_seed(1)
    with torch.device(device):
        model = LlamaForCausalLM._from_config(SHAPES[shape], dtype=torch.bfloat16).eval()
    prompt = torch.randint(0, model.config.vocab_size, (1, 64), device=device)
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        logits = model(input_ids=prompt, cache=cache, use_cache=True).logits[:, -1]
        stepwise, tokens = [logits], []
        for _ in range(EXACT_TOKENS):
            tokens.append(int(stepwise[-1].argmax(-1)))
            step = torch.tensor([[tokens[-1]]], device=device)
            stepwise.append(model(input_ids=step, cache=cache, use_cache=True).logits[:, -1])
        full = torch.cat([prompt, torch.tensor([tokens], device=device)], dim=1)
        verified = model(input_ids=full).logits[0, prompt.shape[1] - 1 :]
    agree = [int(verified[i].argmax()) == tokens[i] for i in range(EXACT_TOKENS)]
    diffs = [float((verified[i] - stepwise[i][0]).abs().max()) for i in range(EXACT_TOKENS)]
    del model
    return {
        "tokens": EXACT_TOKENS, "agreement": sum(agree) / EXACT_TOKENS,
        "first_divergence": agree.index(False) if False in agree else None,
        "max_abs_logit_diff": max(diffs),
        "logit_scale": float(verified.float().abs().max()),
    }  # fmt: skip


def write_config(shape: str, folder: Path) -> Path:
    """The shape's config.json in its own folder: a config-only model for the project's loader."""
    path = folder / shape
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(SHAPES[shape].to_json_string())
    return path


def quantization_methods(device: str, shape: str, folder: Path) -> dict[str, str]:
    """Each method, built through the quantization experiment's own code on a config-only
    model of the shape and run once: "runs", "failed: <why>" or "not available: <why>"."""
    config = ProfileConfig(model=str(write_config(shape, folder)), source="config")
    dtype = "bfloat16" if _kind(device) == "cuda" else "float32"
    request = Request(config=config, device=device, compute_dtype=dtype, config_only=True)
    out = {}
    for name, method in METHODS.items():
        why = method.unavailable(name, request)
        out[name] = f"not available: {why}" if why else _runs(method, request)
    return out


def _runs(method: Any, request: Request) -> str:
    try:
        built = method.make(method, request)
        ids = torch.randint(0, built.model.config.vocab_size, (1, 16), device=request.device)
        with torch.inference_mode():
            built.model(input_ids=ids)
        del built
        return "runs"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        return f"failed: {type(exc).__name__}: {first}"
