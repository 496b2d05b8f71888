"""Tensor parallelism on this machine: two CPU processes (gloo) against one, on `demo`.

    python bench/parallel.py                    # demo, TP 2, prompt 128, decode batch 4
    python bench/parallel.py --model DIR --tp 2 --prompt-tokens 256 --batch 8
    python bench/parallel.py --device cuda      # nccl, needs as many GPUs as --tp

One torchrun job measures both, sample by sample interleaved: the model split
with transformers' tensor parallelism over `--tp` processes, and (on rank 0)
the whole model as one device, with the same threads per process. It prints
the per-rank weight bytes against one device's, the prefill and decode step
latencies and their ratios (split / single), and whether the split model's
logits and greedy tokens equal the single-device ones. On a 2-core box each
rank gets one core, and so does the single-device run: one "device" is one
core, and the ratio shows what splitting costs or saves here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling import serde  # noqa: E402
from profiling.parallel.launch import TPRequest, run_tp  # noqa: E402
from profiling.parallel.results import MeasuredTP  # noqa: E402


def main() -> None:
    args = parse_args()
    path = args.model or _demo_path()
    request = TPRequest(
        model_path=str(path),
        tp_size=args.tp,
        device=args.device,
        dtype=args.dtype,
        prompt_tokens=args.prompt_tokens,
        decode_batch=args.batch,
        decode_context=args.context,
        warmup=2,
        repeats=args.repeats,
        greedy_tokens=16,
    )
    print(f"model {path}: TP {args.tp} over {args.device} processes vs one", file=sys.stderr)
    measured = run_tp(request, timeout_s=args.timeout)
    print_result(measured, args)
    if args.json:
        args.json.write_text(json.dumps(serde.to_dict(measured), indent=1), encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="local model directory (default: demo)")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4, help="decode batch")
    parser.add_argument("--context", type=int, default=128, help="decode context tokens")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, help="also write the measurement here")
    return parser.parse_args()


def _demo_path() -> Path:
    from profiling.model.demo import ensure_demo

    return Path(ensure_demo("demo"))


def _ms(samples: object) -> str:
    median = getattr(samples, "median", None)
    return f"{median * 1e3:8.2f}" if median is not None else "       -"


def print_result(m: MeasuredTP, args: argparse.Namespace) -> None:
    if m.status != "measured":
        print(f"tensor-parallel run {m.status}: {m.reason}")
        return
    ranks = ", ".join(f"{b / 1e6:,.3f}" for b in m.weights_bytes_per_rank)
    storage = ", ".join(f"{b / 1e6:,.3f}" for b in m.weights_storage_bytes_per_rank)
    print(f"weights: one device {m.single_weights_bytes / 1e6:,.3f} MB; per rank {ranks} MB")
    print(f"  per-rank / one device: {m.weights_ratio:.3f}  (storage behind shards: {storage} MB)")
    kv_ranks = ", ".join(str(b) for b in m.kv_bytes_per_token_per_rank)
    print(f"KV bytes per token: one device {m.single_kv_bytes_per_token}; per rank {kv_ranks}")
    print(f"\n{'':<28}{'1 device ms':>12}{f'TP {m.tp_size} ms':>10}{'ratio':>8}{'spread':>8}")
    rows = (
        (f"prefill {m.prompt_tokens} tokens", m.single_prefill_seconds, m.prefill_seconds,
         m.prefill_ratio),
        (f"decode step, batch {m.decode_batch}", m.single_decode_step_seconds,
         m.decode_step_seconds, m.decode_ratio),
    )  # fmt: skip
    for label, single, split, ratio in rows:
        spread = max(s.spread for s in (single, split) if s is not None)
        print(f"{label:<28}{_ms(single):>12}{_ms(split):>10}{ratio or 0:>7.2f}×{spread:>8.0%}")
    same = "equal" if m.logits_match and m.greedy_tokens_match else "DIFFER"
    print(
        f"\noutputs: {same} (max |logit difference| {m.max_logit_difference:.2e}, "
        f"{m.greedy_tokens} greedy tokens {'match' if m.greedy_tokens_match else 'differ'})"
    )
    threads = f", {m.threads_per_rank} thread(s) per process" if m.threads_per_rank else ""
    print(f"{m.backend}{threads}; {len(m.prefill_seconds.samples)} interleaved samples each; "
          f"torchrun wall time {m.wall_seconds:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
