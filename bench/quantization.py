"""Quantization on this machine: weight bytes and decode speed of each precision.

    python bench/quantization.py                            # demo, fp32 bf16 int8 int8-dynamic ...
    python bench/quantization.py --precisions fp32,int8     # any list; the first is the reference
    python bench/quantization.py --model DIR                # any local model directory
    python bench/quantization.py --config-only 1b --device cuda   # random ~1B Llama on a GPU
    python bench/quantization.py --config-only CONFIG_DIR --device cuda

For every variant it prints the real bytes of the loaded weights and their
ratio to the reference, decode ms per token at batch 1 and its ratio, TTFT,
and (for trained weights) perplexity, top-1 agreement and KL against the
reference, all measured in this one run by `profiling.quantization.experiment`.
With `--config-only` the weights are random: memory and speed only.
On a shared 2-core box use `--threads 1`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from profiling.config import ProfileConfig, Workload  # noqa: E402
from profiling.model.loading import load, pick_dtype  # noqa: E402
from profiling.quantization import experiment as quantization  # noqa: E402
from profiling.quantization.results import QuantizationResult  # noqa: E402

DEFAULT_CPU = "fp32,bf16,int8,int8-dynamic,int4,fp8,bnb-int8,bnb-nf4"
DEFAULT_CUDA = "bf16,fp16,int8,int8-dynamic,int4,fp8,bnb-int8,bnb-nf4"
PRESETS = {
    # ~1.1 B (TinyLlama-like shape).
    "1b": dict(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=32_000,
    ),
}


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-quant-") as folder:
        result = run(args, Path(folder))
    print_result(result)
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo", help="demo name or local directory")
    parser.add_argument(
        "--config-only",
        metavar="CONFIG_DIR_OR_PRESET",
        help=f"random weights: a config directory or one of {sorted(PRESETS)}",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precisions", help="comma-separated; the first is the reference")
    parser.add_argument("--keep", default="", help="parts kept, e.g. lm_head,embeddings")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="6 prompts, 256 eval tokens")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    return parser.parse_args()


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _config(args: argparse.Namespace, folder: Path) -> ProfileConfig:
    default = DEFAULT_CUDA if args.device.startswith("cuda") else DEFAULT_CPU
    common: dict[str, Any] = dict(
        device=args.device,
        quick=args.quick,
        workload=Workload(output_tokens=args.new_tokens, concurrency=args.concurrency),
        precisions=_names(args.precisions or default),
        quant_variants=_names(args.keep),
    )
    if not args.config_only:
        return ProfileConfig(model=args.model, **common)
    spec = args.config_only
    if spec in PRESETS:
        from transformers import LlamaConfig

        LlamaConfig(**PRESETS[spec]).save_pretrained(folder)
        spec = str(folder)
    return ProfileConfig(model=spec, source="config", **common)


def run(args: argparse.Namespace, folder: Path) -> QuantizationResult:
    config = _config(args, folder)
    config.validate()
    device = "cuda:0" if args.device == "cuda" else args.device
    dtype = pick_dtype("auto", device)
    loaded = load(config, device, dtype)
    plan = quantization.make_plan(config, dtype)
    plan.repeats = args.repeats
    plan.max_new_tokens = args.new_tokens
    return quantization.run_quantization(config, loaded, device, dtype, plan, progress=_progress)


def _progress(phase: str, fraction: float, message: str) -> None:
    print(f"  [{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _row(v: Any, ref: Any) -> str:
    if v.status != "measured":
        return f"{v.name:<28}{v.status:>14}  {v.reason}"
    weights = ref.weights_bytes / v.weights_bytes
    decode = ref.seconds_per_token.median / v.seconds_per_token.median
    quality = (
        f"{v.perplexity:>8.3f}{v.top1_agreement:>7.1%}{v.kl_divergence:>9.5f}"
        if v.perplexity is not None
        else f"{'-':>8}{'-':>7}{'-':>9}"
    )
    return (
        f"{v.name:<28}{v.status:>14}{v.weights_bytes / 1e6:>9.2f}{weights:>7.2f}×"
        f"{v.seconds_per_token.median * 1e3:>9.2f}{decode:>7.2f}×"
        f"{v.concurrency_seconds_per_token.median * 1e3:>9.2f}"
        f"{v.ttft_seconds.median * 1e3:>9.2f}{quality}"
    )


def print_result(result: QuantizationResult) -> None:
    ref = result.reference_variant
    batch = ref.concurrency if ref else "-"
    print(
        f"\n{result.model}: reference {result.reference}; decode at batch 1 "
        f"(and batch {batch}), {result.max_new_tokens} new tokens"
    )
    print(
        f"{'variant':<28}{'status':>14}{'MB':>9}{'w ratio':>8}{'ms/tok':>9}{'speed':>8}"
        f"{f'ms@b{batch}':>9}{'TTFT ms':>9}{'ppl':>8}{'top-1':>7}{'KL':>9}"
    )
    for v in result.variants:
        print(_row(v, ref))
    print(f"\nfinding: {result.finding}")
    for warning in result.warnings:
        print(f"warning: {warning}")


if __name__ == "__main__":
    main()
