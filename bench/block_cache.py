"""The prefix block cache's replay speed: 10,000 conversation turns through it (goal ≤ 2 s).

    python bench/block_cache.py                       # 2,000 conversations × 5 turns
    python bench/block_cache.py --conversations 4000 --turns 5 --users 128

Builds synthetic conversations (a shared system prompt, then new user messages and
replies each turn), schedules them over the users with think time, indexes their
blocks, then replays them at a capacity that holds about half the working set and
prints, all measured in this one run: the seconds each stage took, the fast replay's
seconds against the exact reference replay's (and whether every request's hit
agrees), and the seconds of the whole hit-rate-against-capacity curve.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.projection import block_cache as bc  # noqa: E402
from profiling.projection.conversation_workloads import SyntheticSpec, synthetic  # noqa: E402

GOAL_SECONDS = 2.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conversations", type=int, default=2000)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--user-tokens", type=int, default=256)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--system-tokens", type=int, default=1024)
    p.add_argument("--think-seconds", type=float, default=10.0)
    p.add_argument("--users", type=int, default=64)
    args = p.parse_args()
    spec = SyntheticSpec(args.conversations, args.turns, args.user_tokens, args.output_tokens,
                         args.system_tokens, args.think_seconds)  # fmt: skip
    start = time.perf_counter()
    conversations = synthetic(spec)
    made = time.perf_counter()
    requests = bc.schedule(conversations, args.users)
    scheduled = time.perf_counter()
    workload = bc.Workload(conversations, requests)
    indexed = time.perf_counter()
    context = spec.system_tokens + spec.turns * (spec.user_tokens + spec.output_tokens)
    capacity = args.users * context // 2
    fast = bc.replay(workload, capacity)
    replayed = time.perf_counter()
    exact = bc.reference_replay(workload, capacity)
    referenced = time.perf_counter()
    workload.replays.clear()  # the curve times every one of its replays
    points = bc.curve(workload, bc.capacity_grid(workload, marks=[capacity]))
    curved = time.perf_counter()
    total = replayed - start
    print(f"{len(requests):,} turns, {workload.unique_blocks:,} distinct blocks, "
          f"capacity {capacity:,} tokens")  # fmt: skip
    print(f"make {made - start:.3f} s · schedule {scheduled - made:.3f} s · index blocks "
          f"{indexed - scheduled:.3f} s · replay {replayed - indexed:.3f} s")  # fmt: skip
    print(f"reference replay {referenced - replayed:.3f} s; hits agree on every request: "
          f"{fast.per_request == exact.per_request}")  # fmt: skip
    print(f"hit rate {fast.hit_rate:.3f} ({fast.cached_tokens:,} of {fast.prompt_tokens:,} "
          f"prompt tokens)")  # fmt: skip
    print(f"curve of {len(points)} capacities: {curved - referenced:.3f} s")
    verdict = "meets" if total <= GOAL_SECONDS else "misses"
    print(f"workload to hit rate: {total:.3f} s ({verdict} the {GOAL_SECONDS:g} s goal)")


if __name__ == "__main__":
    main()
