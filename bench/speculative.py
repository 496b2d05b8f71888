"""Speculative decoding on this machine: acceptance and speedup against K.

    python bench/speculative.py                      # demo + demo-draft, batch 1 and 4
    python bench/speculative.py --quick              # K in 1, 2, 4; fewer prompts
    python bench/speculative.py --target DIR --draft DIR   # any local pair
    python bench/speculative.py --config-only 1b --device cuda    # random ~1B + ~100M pair
    python bench/speculative.py --config-only CONFIG_DIR --device cuda

With trained weights it prints, per draft and batch size, the acceptance
rate, tokens per target pass (1 + accepted / passes), draft ms per proposed
token, verify ms per target pass, tokens/s of the loop and of the target
alone (interleaved with it), and the speedup, all measured in this one run.
On a shared 2-core box use `--threads 1`: two threads contending with other
processes stall each other and the timings become noise.
With `--config-only` the weights are random, so acceptance is meaningless:
it prints the verify-cost curve instead (one target pass over K+1 tokens vs
one token), which bounds what any draft could gain on this hardware.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig  # noqa: E402

from profiling.model.prompts import PromptSet, load_prompts  # noqa: E402
from profiling.options import FULL_KS, QUICK_KS  # noqa: E402
from profiling.speculative import experiment as speculative  # noqa: E402
from profiling.speculative.results import SpeculativeResult  # noqa: E402

# Random-weights pairs: a Llama target and a draft with the same vocabulary.
PRESETS: dict[str, tuple[dict[str, int], dict[str, int]]] = {
    # ~1.1 B target (TinyLlama-like shape), ~110 M draft.
    "1b": (
        dict(
            hidden_size=2048,
            intermediate_size=5632,
            num_hidden_layers=22,
            num_attention_heads=32,
            num_key_value_heads=4,
        ),
        dict(
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=8,
            num_attention_heads=12,
            num_key_value_heads=4,
        ),
    ),
    # Small enough for a CPU smoke run.
    "tiny": (
        dict(
            hidden_size=256,
            intermediate_size=688,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        dict(
            hidden_size=128,
            intermediate_size=344,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
    ),
}
VOCAB = 32_000


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run_config_only(args) if args.config_only else run_trained(args)
    print_result(result)
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="local model directory (default: the demo model)")
    parser.add_argument("--draft", help="local draft directory (default: demo-draft)")
    parser.add_argument(
        "--config-only",
        metavar="CONFIG_DIR_OR_PRESET",
        help=f"random weights: a config directory or one of {sorted(PRESETS)}",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-sizes", default="1,4")
    parser.add_argument("--ks", default=None, help="comma-separated (default 1,2,3,4,6,8)")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--prompts", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="K in 1,2,4 and 6 prompts")
    parser.add_argument("--no-prompt-lookup", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    return parser.parse_args()


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _ks(args: argparse.Namespace) -> list[int]:
    if args.ks:
        return _ints(args.ks)
    return list(QUICK_KS if args.quick else FULL_KS)


def _prompts(args: argparse.Namespace) -> PromptSet:
    prompts = load_prompts()
    count = args.prompts or (6 if args.quick else len(prompts.prompts))
    return PromptSet(prompts.version, prompts.prompts[:count])


def _load(path: Path, device: str) -> tuple[Any, Any]:
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True).to(device).eval()
    return model, AutoTokenizer.from_pretrained(path)


def run_trained(args: argparse.Namespace) -> SpeculativeResult:
    if args.target:
        target_path, draft_path = Path(args.target), Path(args.draft) if args.draft else None
        target_name, draft_name = target_path.name, draft_path.name if draft_path else ""
    else:
        from profiling.model.demo import ensure_demo

        target_path, draft_path = ensure_demo("demo"), ensure_demo("demo-draft")
        target_name, draft_name = "demo", "demo-draft"
    target, tokenizer = _load(target_path, args.device)
    draft = (*_load(draft_path, args.device), draft_name) if draft_path else None
    return speculative.run_speculative(
        target,
        tokenizer,
        draft,
        ks=_ks(args),
        batch_sizes=_ints(args.batch_sizes),
        max_new_tokens=args.new_tokens,
        prompts=_prompts(args),
        prompt_lookup=not args.no_prompt_lookup,
        device=args.device,
        progress=_progress,
        repeats=args.repeats,
        target_name=target_name,
    )


def run_config_only(args: argparse.Namespace) -> SpeculativeResult:
    target_config, draft_config = _random_configs(args.config_only)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    with torch.device(args.device):  # allocate on the device directly
        target = AutoModelForCausalLM.from_config(target_config, dtype=dtype).eval()
        draft = AutoModelForCausalLM.from_config(draft_config, dtype=dtype).eval()
    return speculative.run_speculative(
        target,
        None,
        (draft, None, "random-draft"),
        ks=_ks(args),
        batch_sizes=_ints(args.batch_sizes),
        max_new_tokens=args.new_tokens,
        prompts=_prompts(args),
        prompt_lookup=False,
        device=args.device,
        progress=_progress,
        config_only=True,
        repeats=args.repeats,
        target_name=f"random {args.config_only}",
    )


def _random_configs(spec: str) -> tuple[Any, Any]:
    """(target, draft) configs: a preset pair, or a config directory and a ~100 M draft of it."""
    if spec in PRESETS:
        target, draft = PRESETS[spec]
        return LlamaConfig(vocab_size=VOCAB, **target), LlamaConfig(vocab_size=VOCAB, **draft)
    target = AutoConfig.from_pretrained(spec, local_files_only=True, trust_remote_code=False)
    text = target.get_text_config(decoder=True)
    draft = LlamaConfig(vocab_size=text.vocab_size, **PRESETS["1b"][1])
    return target, draft


def _progress(phase: str, fraction: float, message: str) -> None:
    print(f"  [{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _ms(samples: Any) -> str:
    return f"{samples.median * 1e3:.2f}" if samples is not None else "-"


def _sweep_row(p: Any) -> str:
    positions = " ".join(f"{x:.2f}" for x in p.acceptance_by_position)
    return (
        f"{p.draft:<14}{p.batch_size:>6}{p.k:>4}{p.acceptance_rate:>8.0%}"
        f"{p.mean_accepted_length:>10.2f}{_ms(p.draft_seconds_per_token):>10}"
        f"{_ms(p.verify_seconds_per_pass):>11}{p.tokens_per_second:>9.1f}"
        f"{p.baseline_tokens_per_second:>9.1f}{p.speedup:>8.2f}×  {positions}"
        + ("" if p.matches_baseline else "  OUTPUT DIFFERS")
    )


def print_result(result: SpeculativeResult) -> None:
    for memory in result.draft_memory:
        print(
            f"draft {memory.name}: {memory.weights_bytes / 1e6:,.1f} MB weights, "
            f"{memory.kv_cache_bytes_per_token:,} KV bytes per token"
        )
    if result.sweeps:
        print(
            f"\n{'draft':<14}{'batch':>6}{'K':>4}{'accept':>8}{'tok/pass':>10}{'ms/draft':>10}"
            f"{'ms/verify':>11}{'tok/s':>9}{'alone':>9}{'speedup':>9}  by position"
        )
        for p in result.sweeps:
            print(_sweep_row(p))
        for best in result.best_k:
            print(
                f"best K for {best.draft} at batch {best.batch_size}: {best.k} "
                f"({best.speedup:.2f}×)"
            )
    print(
        f"\n{'batch':>6}{'K':>4}{'1-token ms':>12}{'K+1 ms':>10}{'ratio':>8}{'bound':>8}"
        f"{'w/ draft':>10}"
    )
    for c in result.verify_cost:
        with_draft = f"{c.speedup_bound_with_draft:.2f}×" if c.speedup_bound_with_draft else "-"
        print(
            f"{c.batch_size:>6}{c.k:>4}{c.one_token_seconds.median * 1e3:>12.2f}"
            f"{c.verify_seconds.median * 1e3:>10.2f}{c.cost_ratio:>8.2f}"
            f"{c.speedup_bound:>7.2f}×{with_draft:>10}"
        )
    print(f"\nfinding: {result.finding}")
    for warning in result.warnings:
        print(f"warning: {warning}")


if __name__ == "__main__":
    main()
