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
- the same at the user's concurrency;
- the report's launch command reproduced: the reference server started from the
  `vllm serve ...` line the report prints, measured by vLLM's own `vllm bench
  serve` CLI at the user's concurrency, its output tokens/s against the
  profile's (goal: within ×2).
Threads differ and are printed: the CPU build of vLLM gives its model one core
per rank and keeps the rest for its front end; our decode uses torch's default.
The defaults are the engine profile the issue names: 512 + 64 tokens, 384 of
them shared, 4 users, the demo's draft.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiling.engine import vllm  # noqa: E402
from profiling.engine.server import HOST, Server  # noqa: E402

GOAL_S = 360.0
REPRODUCED_WITHIN = 2.0
_THROUGHPUT = re.compile(r"Output token throughput \(tok/s\):\s+([\d.]+)")


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
        argv += ["--draft", args.draft] if args.draft else []
        started = time.monotonic()
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - started
        profile = json.loads(out.read_text())
        report(profile, wall)
        if not args.skip_reproduce:
            reproduce(profile, args, Path(folder))


def reproduce(profile: dict, args: argparse.Namespace, folder: Path) -> None:
    """The report's `vllm serve` line started as printed, and vLLM's own `vllm bench serve`
    CLI against it at the user's concurrency, on the profile's prompt shape."""
    engine = profile["engine"]
    point = next((p for p in engine["serving"] if p["concurrency"] == args.concurrency), None)
    serve = shlex.split(engine.get("serve_command") or "")
    if point is None or serve[:2] != ["vllm", "serve"]:
        print("reproduction: no reference point at your concurrency or no launch command")
        return
    # vLLM's own command line, through a launcher where the CPU build's name stops it.
    binary = [str(vllm.python_path()), str(ROOT / "bench" / "_vllm_cli.py")]
    model = serve[2]
    env = vllm.environment(args.device)
    command = lambda port: [*binary, *serve[1:], "--host", HOST, "--port", str(port)]  # noqa: E731
    log = folder / "reproduce-server.log"
    with Server(command, log, env, 600.0, vllm.failure_reason).start() as server:
        client = [
            *binary, "bench", "serve", "--backend", "vllm", "--base-url", server.url,
            "--model", model, "--dataset-name", "random",
            "--random-prefix-len", str(args.shared_prefix_tokens),
            "--random-input-len", str(args.prompt_tokens - args.shared_prefix_tokens),
            "--random-output-len", str(args.output_tokens), "--random-range-ratio", "0",
            "--num-prompts", str(point["requests"]), "--max-concurrency", str(args.concurrency),
            "--ignore-eos", "--temperature", "0", "--num-warmups", "2",
        ]  # fmt: skip
        done = subprocess.run(client, env=env, capture_output=True, text=True, timeout=900)
    found = _THROUGHPUT.search(done.stdout)
    if done.returncode != 0 or found is None:
        print(f"reproduction: vllm bench serve failed ({done.returncode}): "
              f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")  # fmt: skip
        return
    theirs, ours = float(found.group(1)), point["output_tokens_per_s"]
    ratio = theirs / ours
    verdict = "within" if 1 / REPRODUCED_WITHIN <= ratio <= REPRODUCED_WITHIN else "outside"
    print(f"reproduction at concurrency {args.concurrency}: `{shlex.join(serve)}` measured by "
          f"`vllm bench serve`: {theirs:.1f} output tok/s against the profile's {ours:.1f} "
          f"(×{ratio:.2f}, {verdict} the ×{REPRODUCED_WITHIN:g} goal)")  # fmt: skip


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
        why = f": {launch['error'][:160]}" if launch.get("error") else ""
        print(f"  server for {launch['purpose']:<32} {launch['status']:<7} start {start}{why}")
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
    caching = engine.get("prefix_caching")
    if caching:  # the timing the engine test leaves to this script: it checks the counters
        off, on = caching["ttft_ms"]["off"], caching["ttft_ms"]["on"]
        interval = caching.get("interval")
        spread = f", 95 % interval {interval[0]:.2f}–{interval[1]:.2f}" if interval else ""
        print(
            f"prefix caching at concurrency {caching['concurrency']}: TTFT p50 off "
            f"{off['p50']:.2f} ms, on {on['p50']:.2f} ms (off / on ×{caching['speedup']:.2f}"
            f"{spread}), hit rate {caching['hit_rate']:.0%}"
        )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="demo")
    p.add_argument("--device", default="cpu")
    p.add_argument("--full", action="store_true", help="full mode (default: quick)")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--shared-prefix-tokens", type=int, default=384)
    p.add_argument("--draft", default="demo-draft", help="'' for none")
    p.add_argument(
        "--skip-reproduce",
        action="store_true",
        help="skip the bench serve run against the launch command",
    )
    return p.parse_args()


if __name__ == "__main__":
    main()
