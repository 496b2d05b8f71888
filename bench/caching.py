"""Prefix caching on this machine: warm/cold TTFT against the share of the prompt cached.

    python bench/caching.py --threads 1                 # demo, 1024-token prompts
    python bench/caching.py --quick --threads 1         # 512-token prompts, 3 turns
    python bench/caching.py --prompt-tokens 256 --shared-prefix 192
    python bench/caching.py --prompts my_prompts.jsonl  # also the reuse in your own prompts
    python bench/caching.py --model DIR --device cuda   # any local model

For each prefix share (0, 25, 50, 75, 90 %) it prints the cold TTFT (the whole
prompt prefilled into an empty cache), the warm TTFT (only the tokens after
a prefix cached once, a different ending each sample), their ratio (median
over interleaved pairs), the bytes the cached prefix holds (read from the
real cache) against prefix tokens x KV bytes per token, and whether the
warm outputs equal the cold ones; then the multi-turn points, all measured
in this one run. On a shared 2-core box use `--threads 1`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from profiling.caching import experiment as caching  # noqa: E402
from profiling.caching.results import CachingResult  # noqa: E402
from profiling.caching.sample import read_prompt_sample  # noqa: E402
from profiling.config import Workload  # noqa: E402


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer, name = _load(args)
    workload = Workload(
        prompt_tokens=args.prompt_tokens or (512 if args.quick else 1024),
        shared_prefix_tokens=args.shared_prefix,
    )
    plan = caching.make_plan(workload, args.quick, model.config.max_position_embeddings)
    if args.repeats:
        plan.repeats = args.repeats
    started = time.perf_counter()
    result = caching.run_caching(
        model,
        tokenizer,
        plan,
        device=args.device,
        dtype=str(model.dtype).removeprefix("torch."),
        prompt_sample=read_prompt_sample(args.prompts) if args.prompts else None,
        progress=_progress,
        model_name=name,
    )
    print_result(result, time.perf_counter() - started)
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="local model directory (default: the demo model)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prompt-tokens", type=int, default=0, help="default 1024 (512 quick)")
    parser.add_argument("--shared-prefix", type=int, default=0, help="the workload's prefix")
    parser.add_argument("--prompts", type=Path, help="a prompt sample (text or JSON Lines)")
    parser.add_argument("--repeats", type=int, default=0, help="timed pairs per point")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    return parser.parse_args()


def _load(args: argparse.Namespace) -> tuple[Any, Any, str]:
    if args.model:
        path, name = Path(args.model), Path(args.model).name
    else:
        from profiling.model.demo import ensure_demo

        path, name = ensure_demo("demo"), "demo"
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True).to(args.device)
    return model.eval(), AutoTokenizer.from_pretrained(path), name


def _progress(phase: str, fraction: float, message: str) -> None:
    print(f"  [{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _ms(samples: Any) -> str:
    return f"{samples.median * 1e3:.2f}"


def print_result(result: CachingResult, seconds: float) -> None:
    kv = result.kv_bytes_per_token
    print(
        f"{result.model}: {result.prompt_tokens}-token prompts, {kv:,} KV bytes per token, "
        f"measured in {seconds:.1f} s"
    )
    print(
        f"\n{'prefix':>7}{'share':>7}{'cold ms':>9}{'warm ms':>9}{'warm/cold':>11}"
        f"{'cache bytes':>13}{'= tokens x KV':>15}{'same output':>13}"
    )
    sample = result.prompt_sample
    extra = [result.shared_prefix, sample.measured if sample else None]
    points = result.prefix_sweep + [p for p in extra if p is not None]
    for p in points:
        print(
            f"{p.prefix_tokens:>7}{p.prefix_share:>7.0%}{_ms(p.cold_ttft_seconds):>9}"
            f"{_ms(p.warm_ttft_seconds):>9}{p.warm_to_cold:>10.2f}×{p.prefix_cache_bytes:>13,}"
            f"{str(p.prefix_cache_bytes == p.prefix_tokens * kv):>15}{str(p.outputs_match):>13}"
            + (f"  ({p.label})" if p.label else "")
        )
    print(f"\n{'turn':>5}{'cached':>8}{'new':>6}{'cold ms':>9}{'warm ms':>9}{'warm/cold':>11}")
    for t in result.multi_turn:
        print(
            f"{t.turn:>5}{t.cached_tokens:>8}{t.new_tokens:>6}{_ms(t.cold_ttft_seconds):>9}"
            f"{_ms(t.warm_ttft_seconds):>9}{t.warm_to_cold:>10.2f}×"
            + ("" if t.outputs_match else "  OUTPUT DIFFERS")
        )
    if sample is not None:
        print(
            f"\nsample: {sample.prompts:,} prompts, {sample.total_tokens:,} tokens, "
            f"{sample.reusable_tokens:,} reusable ({sample.reuse_fraction:.1%}; "
            f"{sample.block_reuse_fraction:.1%} in blocks of {sample.block_size}), "
            f"hit rate {sample.hit_rate:.1%}"
        )
    print(f"\nfinding: {result.finding}")
    for warning in result.warnings:
        print(f"warning: {warning}")


if __name__ == "__main__":
    main()
