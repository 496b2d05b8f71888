"""Goal: the profiler measures the model, not itself.

In one run, on one model and device, decode tokens/s at batch 1 and a given
context as measured by the profiler's own decode loop
(`profiling.baseline.sweeps.decode_point`: timed steps through the
injected clock, cache cropped back after each step) against a bare torch loop
(forward with a DynamicCache, greedy argmax, one perf_counter around all the
steps, nothing else). Rounds alternate the two so drift hits both alike.
Prints both and the ratio profiler / bare; the goal is >= 0.95.

    python bench/harness_overhead.py [--model demo] [--device cpu] [--context 256]

Second half: wall time of a quick demo profile through the site, submit to
report (goal <= 30 s on 2 CPU cores), measured by bench/site_wall_time.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.baseline import plan as baseline_plan
from profiling.baseline import sweeps as baseline  # noqa: E402
from profiling.config import ProfileConfig  # noqa: E402
from profiling.measure.timing import clock_for  # noqa: E402
from profiling.model.loading import Loaded, load, pick_device, pick_dtype  # noqa: E402
from profiling.model.memory import kv_bytes_per_token_measured, weights_bytes  # noqa: E402

GOAL_RATIO = 0.95


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="demo", help="demo name, repo id or local directory")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--context", type=int, default=256, help="tokens in the cache when decoding")
    p.add_argument("--steps", type=int, default=64, help="decode steps per measurement")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of both loops")
    return p.parse_args(argv)


def profiler_tokens_per_second(
    loaded: Loaded, device: str, dtype: str, context: int, steps: int
) -> float:
    """Decode tokens/s from the profiler's own loop, exactly as a profile runs it."""
    model = loaded.model
    subject = baseline.Subject(
        model,
        loaded.tokenizer,
        loaded.info,
        device,
        dtype,
        weights_bytes(model)[0],
        kv_bytes_per_token_measured(model, device),
        # The bare loop grows a DynamicCache: the profiler's eager path is the same
        # work, so the ratio is the harness's own cost. (Its static and compiled
        # paths are compared in bench/gpu_check.py.)
        decode_path="eager",
    )
    plan = baseline_plan.Plan(
        prefill_tokens=[],
        prefill_batches=[],
        decode_batches=[1],
        decode_contexts=[context],
        warmup=3,
        repeats=steps,
    )
    import torch

    with torch.inference_mode():
        point = baseline.decode_point(subject, plan, clock_for(device), 1, context)
    return point.tokens_per_second


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    elif device == "mps":
        torch.mps.synchronize()


def bare_tokens_per_second(model: Any, device: str, context: int, steps: int) -> float:
    """Decode tokens/s of a plain greedy loop: no clock object, no crop, no profiler."""
    import torch
    from transformers import DynamicCache

    vocab = model.config.get_text_config(decoder=True).vocab_size
    ids = torch.randint(0, vocab, (1, context), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        out = model(input_ids=ids.to(device), cache=cache, use_cache=True, logits_to_keep=1)
        token = out.logits[:, -1:].argmax(-1)
        for _ in range(3):  # warm-up, as the profiler does
            token = model(input_ids=token, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
        _sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            token = model(input_ids=token, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
        _sync(device)
        return steps / (time.perf_counter() - start)


def harness_overhead(args: argparse.Namespace) -> dict[str, float]:
    """First half: profiler vs bare decode tokens/s on the same loaded model."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    loaded = load(ProfileConfig(model=args.model, device=args.device), device, dtype)
    profiler, bare = [], []
    for _ in range(args.rounds):
        profiler.append(profiler_tokens_per_second(loaded, device, dtype, args.context, args.steps))
        bare.append(bare_tokens_per_second(loaded.model, device, args.context, args.steps))
    result = {
        "profiler_tokens_per_second": statistics.median(profiler),
        "bare_tokens_per_second": statistics.median(bare),
    }
    result["ratio"] = result["profiler_tokens_per_second"] / result["bare_tokens_per_second"]
    print(
        f"model {args.model} on {device} ({dtype}), batch 1, context {args.context}, "
        f"{args.steps} steps × {args.rounds} rounds"
    )
    print(f"  profiler decode loop  {result['profiler_tokens_per_second']:10.1f} tok/s")
    print(f"  bare torch loop       {result['bare_tokens_per_second']:10.1f} tok/s")
    verdict = "meets" if result["ratio"] >= GOAL_RATIO else "MISSES"
    print(f"  ratio                 {result['ratio']:10.3f}  ({verdict} the goal >= {GOAL_RATIO})")
    return result


# ---------------------------------------------------------------------------
# Second half: wall time of a quick `demo` profile submitted through the site
# (job row -> worker -> child process -> report), in its own process because
# it sets up Django; see bench/site_wall_time.py.
def site_profile_wall_time(args: argparse.Namespace) -> dict[str, float] | None:
    """Run bench/site_wall_time.py and return its figures (None if it failed)."""
    import json
    import subprocess

    script = Path(__file__).resolve().parent / "site_wall_time.py"
    done = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"site wall time: failed ({done.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    harness_overhead(args)
    site = site_profile_wall_time(args)
    if site is not None:
        goal = "meets" if site["site_seconds"] <= site["goal_seconds"] else "misses"
        print(
            f"quick demo profile, submit -> report: {site['site_seconds']:.1f} s "
            f"({goal} goal <= {site['goal_seconds']:.0f} s); "
            f"CLI alone {site['cli_seconds']:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
