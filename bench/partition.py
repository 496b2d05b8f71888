"""A worker host cut off mid-job at the default stale limit, for 3 stale limits and for
20 minutes (real network namespace, Redis, PostgreSQL and Celery workers; needs root).

Runs the scenario of tests/e2e/test_partition.py once per cut and prints its figures:
seconds from the cut to the job's reaping, who finished the job, updates of the job's row
written by the cut-off host after the cut (stale writes), and seconds from the link's return
to the cut-off worker claiming a new job. Goal: finished elsewhere, 0 stale writes, serving
again within 60 s of the return, whatever the cut's length.

    python bench/partition.py [--stale-s 120] [--cut-s 360 --cut-s 1200]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^partition: .*$", re.MULTILINE)
DEFAULT_STALE_S = 120  # ADVISOR_HEARTBEAT_STALE_S's default (docs/settings.md)
TWENTY_MINUTES_S = 1200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stale-s", type=int, default=DEFAULT_STALE_S,
                        help="the stale limit the workers run with")  # fmt: skip
    parser.add_argument("--cut-s", type=float, action="append",
                        help="a cut's length; repeat for several (default: 3 stale limits, "
                        "then 20 minutes)")  # fmt: skip
    args = parser.parse_args()
    cuts = args.cut_s or [3 * args.stale_s, TWENTY_MINUTES_S]
    env = {**os.environ, "ADVISOR_PARTITION_STALE_S": str(args.stale_s)}
    env.setdefault("ADVISOR_VAR_DIR", str(ROOT / "var" / "test"))
    failures = 0
    for cut_s in cuts:
        argv = [sys.executable, "-m", "pytest", "tests/e2e/test_partition.py", "-s", "-q",
                "-rs", "-p", "no:cacheprovider", f"--timeout={int(cut_s) + 900}"]  # fmt: skip
        start = time.monotonic()
        done = subprocess.run(argv, cwd=ROOT, env={**env, "ADVISOR_PARTITION_CUT_S": str(cut_s)},
                              capture_output=True, text=True)  # fmt: skip
        wall_s = time.monotonic() - start
        found = LINE.findall(done.stdout)
        for line in found:
            print(f"{line} wall_s={wall_s:.0f}", flush=True)
        if done.returncode != 0 or not found:
            failures += 1
            print(f"cut {cut_s:g} s: FAILED (exit {done.returncode})\n{done.stdout[-4000:]}",
                  flush=True)  # fmt: skip
    print(f"{len(cuts)} cuts at stale limit {args.stale_s} s: failed={failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
