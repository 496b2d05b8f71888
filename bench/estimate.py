"""The analytic estimate: how fast it answers, and how close its calibrated predictions come.

    python bench/estimate.py                 # every shipped config on H100, then demo on CPU
    python bench/estimate.py --gpu A100-80GB --threads 1

0. For each shipped config, its first sizing (transformers' class built on the meta
   device and counted by role: `profiling.model.sizing`; torch's import the first time)
   and a second one (read back from the sizing cache), in a fresh cache folder.
1. For each shipped config (profiling/data/configs), on 1 and on 8 GPUs: the
   wall time of an estimate with advice (`profiling.advice.build.estimate_report`:
   shapes → the simulated engine's projection → bottleneck → ranked
   recommendations, the layout search and the disaggregation simulation
   included), median of repeats. Goal: ≤ 200 ms each.
2. A full (non-quick) profile of `demo` on this machine, then each measured
   prefill and decode point predicted by a fit to the other points of its
   phase (`profiling.projection.calibration.leave_one_out`). Goal: median |error| ≤ 10 %.
3. The deployment search with every option on (`profiling.projection.deployments`: every
   layout × weights × KV cache × speculation at a given acceptance × prefix caching, the
   pick's capacity under the targets and the costs: what the report's what-if waits for)
   for each shipped config on 8 and on 64 GPUs. Goals: ≤ 200 ms on 8 GPUs, ≤ 1 s on 64.
   Beside it, the same with every configuration's capacity (a job's stored answer).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.advice.build import estimate_report  # noqa: E402
from profiling.config import ProfileConfig, Workload  # noqa: E402
from profiling.measure import hardware  # noqa: E402
from profiling.model.shapes import Shapes  # noqa: E402
from profiling.projection.calibration import leave_one_out, median_abs_error  # noqa: E402
from profiling.projection.estimate import shipped_configs  # noqa: E402
from profiling.projection.precision import serving_precision  # noqa: E402

GOAL_MS, GOAL_ERROR = 200.0, 0.10
SEARCH_GOALS_MS = {8: 200.0, 64: 1000.0}


def time_sizings() -> None:
    import os
    import tempfile

    from profiling.model import sizing

    print("Sizing each shipped config: first (built on the meta device), then from the cache")
    with tempfile.TemporaryDirectory() as folder:
        os.environ[sizing.ENV_VAR] = folder
        for name, config in shipped_configs().items():
            times = []
            for _ in range(2):
                sizing._cached.cache_clear()  # the second one reads the file, as a new process
                start = time.perf_counter()
                sized = sizing.size_config(config)
                times.append(time.perf_counter() - start)
            print(f"  {name:20s} first {times[0] * 1e3:8.1f} ms, cached {times[1] * 1e3:6.2f} ms  "
                  f"{sized.total_params / 1e9:9.2f} B parameters ({sized.architecture})")


def time_estimates(gpu_kind: str, repeats: int) -> None:
    gpu = hardware.lookup(gpu_kind)
    workload = Workload(prompt_tokens=2048, output_tokens=256, concurrency=16, tpot_ms=50)
    for count in (1, 8):
        where = f"{count}× {gpu.key}, 2048+256 tokens × 16 users, TPOT target 50 ms"
        print(f"Analytic estimate + advice on {where} (goal ≤ {GOAL_MS:.0f} ms)")
        for name, config in shipped_configs().items():
            shapes = Shapes.from_config(config)
            dtype = serving_precision(shapes, "")  # as the checkpoint ships
            times, cpu = [], []
            for _ in range(repeats):
                start, start_cpu = time.perf_counter(), time.process_time()
                advice, _ = estimate_report(shapes, gpu, count, dtype, workload)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            ms = statistics.median(times) * 1e3
            first = advice.first.setting if advice.first else "-"
            print(f"  {name:15s} {ms:7.2f} ms  {'ok' if ms <= GOAL_MS else 'OVER'}  "
                  f"({statistics.median(cpu) * 1e3:.1f} ms CPU)  "
                  f"bottleneck {advice.bottleneck}; first: {first}")  # fmt: skip


def time_searches(gpu_kind: str, repeats: int) -> None:
    from profiling.projection.configurations import Configuration
    from profiling.projection.deployments import FIRST_ONLY, deployments
    from profiling.projection.search import Scenario

    gpu = hardware.lookup(gpu_kind)
    workload = Workload(prompt_tokens=2048, output_tokens=256, concurrency=16,
                        shared_prefix_tokens=1024, ttft_ms=500, tpot_ms=50)  # fmt: skip
    for count, goal in SEARCH_GOALS_MS.items():
        print(f"Deployment search, every option, on {count}× {gpu.key}, 2048+256 tokens "
              "(1024 shared) × 16 users, TTFT 500 ms, TPOT 50 ms "
              f"(goal ≤ {goal:.0f} ms)")  # fmt: skip
        for name, config in shipped_configs().items():
            shapes = Shapes.from_config(config)
            sc = Scenario(shapes, gpu, count, serving_precision(shapes, ""), workload,
                          Configuration(gpu.key, tp=min(count, 8), replicas=max(1, count // 8)),
                          acceptance=0.7, acceptance_basis="given")  # fmt: skip
            line = []
            for capacity_for in (FIRST_ONLY, None):
                times, cpu = [], []
                for _ in range(repeats):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    found = deployments(sc, capacity_for=capacity_for)
                    times.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)
                line.append((statistics.median(times) * 1e3, statistics.median(cpu) * 1e3))
            (ms, cpu_ms), (all_ms, all_cpu_ms) = line
            first = found.first.configuration.name if found.first else "-"
            # The CPU time too: on a shared machine the wall time counts others' work.
            print(f"  {name:15s} {ms:7.2f} ms  {'ok' if ms <= goal else 'OVER'}  "
                  f"({cpu_ms:.1f} ms CPU); every capacity {all_ms:.0f} ms "
                  f"({all_cpu_ms:.0f} ms CPU)  {len(found.ranked)} served; "
                  f"first: {first}")  # fmt: skip


def calibration_error(threads: int | None) -> None:
    import torch

    from profiling.model.demo import ensure_demo
    from profiling.runner import run_profile

    if threads:
        torch.set_num_threads(threads)
    config = ProfileConfig(
        model="demo", device="cpu", quick=False,
        workload=Workload(prompt_tokens=256, output_tokens=64, concurrency=4),
    )  # fmt: skip
    start = time.perf_counter()
    profile = run_profile(config)
    took = time.perf_counter() - start
    shapes = Shapes.from_config(json.loads((ensure_demo("demo") / "config.json").read_text()))
    predictions = leave_one_out(shapes, profile)
    print(f"\nCalibrated prediction on demo, each point left out of its fit "
          f"(full profile, {took:.0f} s, {torch.get_num_threads()} threads)")  # fmt: skip
    for p in predictions:
        at = ", ".join(f"{k} {v}" for k, v in p.at.items())
        print(f"  {p.metric:24s} {at:34s} predicted {p.predicted * 1e3:8.3f} ms  "
              f"measured {p.measured * 1e3:8.3f} ms  error {p.error:+7.1%}")  # fmt: skip
    error = median_abs_error(predictions)
    verdict = "ok" if error is not None and error <= GOAL_ERROR else "OVER"
    print(f"  median |error| {error:.1%} over {len(predictions)} points "
          f"(goal ≤ {GOAL_ERROR:.0%}): {verdict}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", default="H100")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, help="torch threads for the demo profile")
    parser.add_argument("--skip-demo", action="store_true", help="only time the estimates")
    args = parser.parse_args()
    time_sizings()
    time_estimates(args.gpu, args.repeats)
    time_searches(args.gpu, max(1, args.repeats // 4))
    if not args.skip_demo:
        calibration_error(args.threads)


if __name__ == "__main__":
    main()
