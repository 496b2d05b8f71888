"""Goal: the first action holds still. The issue's demo scenario profiled N times in a row
on this machine; each run's first action, whether the advice marks it uncertain, and
every promise the ranking rule breaks (`profiling.advice.ranking.broken_promises`: more
devices above a fix on the named ones, a section's own "cannot" ranked, a figure above
its physical limit, evidence at another batch unexplained, an unmarked unstable first).

    python bench/first_action.py [--runs 5] [--keep DIR]

Each run: a quick demo profile with every experiment, the form's default workload
(512 + 128 tokens, 8 users, 384 shared), a 500 ms TTFT and 5 ms TPOT target, the demo
draft, stated bottleneck "generation". Goal: the same first action in every run or each
run marked uncertain; 0 broken promises.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.advice.ranking import WITHIN_NOISE, advice_broken_promises  # noqa: E402
from profiling.profile import Profile  # noqa: E402

SCENARIO = [
    "demo", "--device", "cpu", "--quick",
    "--experiments", "quantization,speculative,caching,parallel",
    "--prompt-tokens", "512", "--output-tokens", "128", "--concurrency", "8",
    "--shared-prefix-tokens", "384", "--ttft-ms", "500", "--tpot-ms", "5",
    "--draft", "demo-draft", "--stated-bottleneck", "generation",
]  # fmt: skip


def one_run(path: Path) -> tuple[Profile, float]:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "profiling", "profile", *SCENARIO, "--json", str(path)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return Profile.from_dict(json.loads(path.read_text())), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="keep each run's profile JSON here")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="first-action-"))
    folder.mkdir(parents=True, exist_ok=True)
    firsts, marked, broken = [], [], 0
    for i in range(args.runs):
        profile, seconds = one_run(folder / f"run{i + 1}.json")
        advice = profile.advice
        assert advice is not None
        first = advice.first
        name = f"{first.setting} ({first.gain:.2f}×, {first.basis})" if first else "(none)"
        uncertain = any(WITHIN_NOISE in n for n in advice.notes)
        promises = advice_broken_promises(
            advice, profile.config.workload, profile.config.hardware.gpu_count
        )
        broken += len(promises)
        firsts.append(first.setting if first else "")
        marked.append(uncertain)
        print(f"run {i + 1} ({seconds:.0f} s): first {name}"
              + ("; marked: within the noise" if uncertain else ""))  # fmt: skip
        for p in promises:
            print(f"    broken: {p}")
    usual, count = Counter(firsts).most_common(1)[0]
    holds = sum(f == usual or m for f, m in zip(firsts, marked, strict=True))
    print(f"\nfirst action: {usual or '(none)'} in {count} of {args.runs} runs; "
          f"{holds} of {args.runs} give it or are marked uncertain; "
          f"{broken} broken promises; profiles in {folder}")  # fmt: skip
    return 0 if holds == args.runs and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
