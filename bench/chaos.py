"""Faults on the whole pipe, counted: broker restarts during a batch, a frozen
worker, SIGKILLs of a child and of a worker (real Redis, real Celery workers).

Runs the chaos scenarios of tests/e2e/test_chaos.py `--rounds` times each and
prints their counts: jobs, succeeded, failed, lost, results written twice,
attempts. Goal: 0 lost and 0 written twice in every round.

    python bench/chaos.py [--rounds 3] [--jobs 24]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^chaos [a-z-]+:.*$", re.MULTILINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=24, help="jobs in the broker-restart batch")
    args = parser.parse_args()
    env = {**os.environ, "ADVISOR_CHAOS_JOBS": str(args.jobs)}
    env.setdefault("ADVISOR_VAR_DIR", str(ROOT / "var" / "test"))
    lines, failures = [], 0
    for round_no in range(1, args.rounds + 1):
        argv = [sys.executable, "-m", "pytest", "tests/e2e/test_chaos.py", "-s", "-q",
                "-p", "no:cacheprovider"]  # fmt: skip
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        found = sorted(set(LINE.findall(done.stdout)))
        failures += done.returncode != 0
        for line in found:
            lines.append(f"round {round_no}: {line}")
            print(lines[-1], flush=True)
        if done.returncode != 0:
            print(f"round {round_no}: FAILED\n{done.stdout[-3000:]}", flush=True)
    lost = sum(int(n) for n in re.findall(r"lost=(\d+)", "\n".join(lines)))
    twice = sum(int(n) for n in re.findall(r"duplicates=(\d+)", "\n".join(lines)))
    print(f"{args.rounds} rounds: lost={lost} written_twice={twice} failed_rounds={failures}")


if __name__ == "__main__":
    main()
