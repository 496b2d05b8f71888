"""The hit check on this machine: measured warm TTFT at the replay's hit positions
against the projection fitted on this device, and two projections that should miss.

    python bench/hit_check.py --threads 1                  # demo, the demo conversations
    python bench/hit_check.py --conversations chats.jsonl  # your own conversations
    python bench/hit_check.py --model DIR --device cuda    # any local model, full mode

It runs one quick profile (the baseline the calibration is fitted to, then the check,
as a worker does) and prints, per hit position, the measured warm and cold TTFT, the
projected warm TTFT with its interval and verdict, and the same measurements judged
against two projections that leave the cache out: the new tokens at offset 0 (the
cached prefix's attention ignored) and the whole prompt cold. On a shared 2-core box
use `--threads 1`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from profiling.caching.hit_check import (  # noqa: E402
    DEMO_SAMPLE,
    HitCheck,
    error_range,
    judge,
    project_point,
)
from profiling.config import ProfileConfig, Workload  # noqa: E402
from profiling.projection.calibration import calibrate  # noqa: E402
from profiling.projection.step_time import StepModel  # noqa: E402
from profiling.runner import run_profile  # noqa: E402


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    path = Path(args.conversations)
    config = ProfileConfig(
        model=args.model, device=args.device, quick=not args.full,
        workload=Workload(concurrency=args.users), conversations=path.read_text(),
        conversations_name=path.name,
    )  # fmt: skip
    started = time.perf_counter()
    profile = run_profile(config)
    wall = time.perf_counter() - started
    check = HitCheck.from_dict(profile.conversations["hit_check"])
    shapes = profile.model.shapes
    step = StepModel(shapes, calibrate(shapes, profile), profile.environment.dtype)
    errors = error_range(shapes, profile)
    print(f"{args.model} on {check.device}, {path.name}; profile and check {wall:.1f} s")
    print(f"interval: {check.interval}")
    print(f"note: {check.note}")
    print(f"{'cached':>7} {'new':>5} {'warm ms':>9} {'p10-p90':>13} {'cold ms':>8} "
          f"{'proj ms':>8} {'interval':>13} {'meas/proj':>9}  verdict "
          "| no offset | cold")  # fmt: skip
    for p in check.points:
        w, pr = p.warm_ttft_seconds, p.projected
        controls = []
        for tokens in (p.new_tokens, p.cached_tokens + p.new_tokens):  # both at offset 0
            other = project_point(step, 0, tokens, errors)
            controls.append(judge(w, p.cold_ttft_seconds, other)[0])
        print(f"{p.cached_tokens:>7} {p.new_tokens:>5} {w.median * 1e3:>9.3f} "
              f"{w.p10 * 1e3:>6.2f}-{w.p90 * 1e3:<6.2f} {p.cold_ttft_seconds.median * 1e3:>8.3f} "
              f"{pr.seconds * 1e3:>8.3f} {pr.low_seconds * 1e3:>6.2f}-{pr.high_seconds * 1e3:<6.2f}"
              f" {p.ratio:>9.2f}  {p.verdict} {p.why} | {controls[0]} | {controls[1]}")  # fmt: skip
    print(f"overall: {check.summary()}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--conversations", default=str(DEMO_SAMPLE))
    parser.add_argument("--users", type=int, default=2)
    parser.add_argument("--full", action="store_true", help="full mode: more repeats, longer turns")
    parser.add_argument("--threads", type=int, default=0)
    return parser.parse_args()


if __name__ == "__main__":
    main()
