"""A quantization result built with the library's own dataclasses, for the chart and view tests.

The numbers are made up but shaped like a CPU run of the demo model: an fp32
reference, int8 measured (4× smaller weights, one greedy output diverging), int4
not available on CPU. `with_quantization` places it in a real profile's dict the
way `Profile.to_dict()` does for any experiment.
"""

from __future__ import annotations

from typing import Any

from profiling.quantization.results import (
    MEASURED,
    NOT_AVAILABLE,
    QUALITY_CONVENTION,
    GreedySample,
    MethodSettings,
    QuantizationResult,
    QuantVariant,
)
from profiling.results import Samples

INT4_REASON = "int4 weight-only needs a CUDA device; this worker has cpu"
REFERENCE_TEXT = [" the", " cat", " sat", " on", " the", " mat"]
INT8_TEXT = [" the", " cat", " sat", " in", " a", " hat"]  # first divergence at index 3


def _variant(name: str, precision: str, *, weights: int, step_s: float, **extra: Any):
    return QuantVariant(
        name=name,
        precision=precision,
        status=MEASURED,
        weights_bytes=weights,
        linear_weights_bytes=weights * 9 // 10,
        peak_bytes=weights + 1_000_000,
        peak_method="rss_delta",
        ttft_seconds=Samples([step_s * 4, step_s * 4.1, step_s * 3.9]),
        seconds_per_token=Samples([step_s, step_s * 1.01, step_s * 0.99]),
        tokens_per_second=1 / step_s,
        concurrency=8,
        concurrency_seconds_per_token=Samples([step_s * 2, step_s * 2.02]),
        concurrency_tokens_per_second=8 / (step_s * 2),
        **extra,
    )


def quantization_result(**changes: Any) -> QuantizationResult:
    reference = _variant(
        "fp32", "fp32", weights=8_000_000, step_s=0.010, is_reference=True,
        settings=MethodSettings("dtype", "float32", 32, compute_dtype="float32"),
        perplexity=12.5, top1_agreement=1.0, kl_divergence=0.0,
    )  # fmt: skip
    int8 = _variant(
        "int8", "int8", weights=2_000_000, step_s=0.014,
        settings=MethodSettings(
            "torchao", "int8", 8, compute_dtype="float32", kept_modules=["lm_head"],
            quantized_modules=14, library="torchao 0.18.0",
        ),
        perplexity=12.9, top1_agreement=0.96, kl_divergence=0.0123,
        decode_path="static", decode_path_reason="on a CPU, compiling costs more than it saves",
        samples=[
            GreedySample(0, "Once upon a time", [1, 2, 3, 4, 5, 6], REFERENCE_TEXT,
                         [1, 2, 3, 7, 8, 9], INT8_TEXT, first_divergence=3),
            GreedySample(1, "The weather", [1, 2], [" is", " fine"], [1, 2], [" is", " fine"],
                         first_divergence=None),
        ],
        warnings=["seconds_per_token is noisy"],
    )  # fmt: skip
    int4 = QuantVariant("int4", "int4", status=NOT_AVAILABLE, reason=INT4_REASON)
    fields: dict[str, Any] = {
        "model": "demo", "config_only": False, "quality_meaningful": True,
        "quality_convention": QUALITY_CONVENTION, "reference": "fp32", "prompt_set_version": 1,
        "eval_text_tokens": 512, "max_new_tokens": 6, "variants": [reference, int8, int4],
        "finding": "int8 weight-only: weights 4.0× smaller, decode 1.4× slower, 96 % agreement",
    }  # fmt: skip
    fields.update(changes)
    return QuantizationResult(**fields)


def with_quantization(result: dict[str, Any], quantization: QuantizationResult) -> dict[str, Any]:
    """`result` (a `Profile.to_dict()`) with the quantization experiment added to it."""
    result["quantization"] = quantization.to_dict()
    result["experiments_run"] = sorted({*result.get("experiments_run", []), "quantization"})
    return result
