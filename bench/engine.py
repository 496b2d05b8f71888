"""The engine profile on this machine: its wall time, and vLLM's decode against ours.

    python bench/engine.py                         # demo, quick, every engine experiment
    python bench/engine.py --model DIR --device cuda --full

One run of `python -m profiling profile <model> --quick --engine vllm` measures
both sides on the same model and device: our decode sweep (transformers, one
static batch, on the path it records: a static KV cache, compiled on CUDA) and
the engine's served requests. It prints
- the wall time of the whole profile and of its engine part (goal: the quick
  demo profile with every engine experiment in ≤ 6 min on two CPU cores), with
  each server's start time;
- TPOT at batch 1: the engine's p50 over its requests at concurrency 1 against
  our step time at batch 1 (the measured context nearest the middle of a
  request, prompt + output / 2), and their ratio;
- the same at the user's concurrency.
Threads differ and are printed: the CPU build of vLLM gives its model one core
per rank and keeps the rest for its front end; our decode uses torch's default.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 360.0


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.json"
        argv = [
            sys.executable, "-m", "profiling", "profile", args.model, "--device", args.device,
            "--engine", "vllm", "--json", str(out), "--prompt-tokens", str(args.prompt_tokens),
            "--output-tokens", str(args.output_tokens), "--concurrency", str(args.concurrency),
            "--shared-prefix-tokens", str(args.shared_prefix_tokens),
        ] + ([] if args.full else ["--quick"])  # fmt: skip
        started = time.monotonic()
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - started
        profile = json.loads(out.read_text())
    report(profile, wall)


def _our_step_ms(profile: dict, batch: int) -> tuple[float, int, str] | None:
    work = profile["config"]["workload"]
    middle = work["prompt_tokens"] + work["output_tokens"] / 2
    points = [p for p in profile["decode"] if p["batch_size"] == batch]
    if not points:
        return None
    point = min(points, key=lambda p: abs(p["context_tokens"] - middle))
    path = point.get("path", "eager")
    return point["seconds_per_token"]["median"] * 1e3, point["context_tokens"], path


def report(profile: dict, wall: float) -> None:
    engine = profile["engine"]
    print(f"{engine['name']} {engine['version']} on {profile['environment']['device_name']}")
    verdict = "meets" if wall <= GOAL_S else "misses"
    print(f"wall time: whole profile {wall:.0f} s ({verdict} the {GOAL_S:.0f} s goal), "
          f"engine part {engine['wall_s']:.0f} s")  # fmt: skip
    for launch in engine["launches"]:
        start = f"{launch['start_s']:.0f} s" if launch["start_s"] is not None else "—"
        print(f"  server for {launch['purpose']:<32} {launch['status']:<7} start {start}")
    our_threads = profile["environment"].get("torch_threads") or "torch's default"
    print(f"threads: engine {engine['threads'] or 'its default'}; our decode {our_threads}")
    concurrency = profile["config"]["workload"]["concurrency"]
    for batch in sorted({1, concurrency}):
        point = next((p for p in engine["serving"] if p["concurrency"] == batch), None)
        ours_at = _our_step_ms(profile, batch)
        if point is None or ours_at is None:
            print(f"batch {batch}: not measured on both sides")
            continue
        served, (ours, context, path) = point["tpot_ms"]["p50"], ours_at
        print(
            f"TPOT at batch {batch}: engine p50 {served:.3f} ms "
            f"(p90 {point['tpot_ms']['p90']:.3f}, {point['requests'] - point['coalesced']} of "
            f"{point['requests']} requests streamed) against ours ({path}) {ours:.3f} ms at "
            f"context {context}: engine / ours = {served / ours:.2f}"
        )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="demo")
    p.add_argument("--device", default="cpu")
    p.add_argument("--full", action="store_true", help="full mode (default: quick)")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--shared-prefix-tokens", type=int, default=384)
    return p.parse_args()


if __name__ == "__main__":
    main()
