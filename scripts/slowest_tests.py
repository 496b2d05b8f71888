"""Print the N slowest tests of a run, across its tiers' JUnit reports.

    python scripts/slowest_tests.py 25 var/test/junit/*.xml

A test's time is pytest's: its set-up (module fixtures included), call and tear-down.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(argv: list[str]) -> int:
    count, paths = int(argv[0]), [Path(p) for p in argv[1:] if Path(p).is_file()]
    rows: list[tuple[float, str, str]] = []
    total: dict[str, float] = {}
    for path in paths:
        tier = path.stem
        for case in ET.parse(path).iter("testcase"):
            seconds = float(case.get("time") or 0)
            name = f"{case.get('file') or case.get('classname')}::{case.get('name')}"
            rows.append((seconds, tier, name))
            total[tier] = total.get(tier, 0.0) + seconds
    if not rows:
        return 0
    print(f"== the {min(count, len(rows))} slowest of {len(rows)} tests ==")
    for seconds, tier, name in sorted(rows, reverse=True)[:count]:
        print(f"{seconds:8.1f} s  {tier:<8} {name}")
    print("tiers: " + ", ".join(f"{tier} {s / 60:.1f} min" for tier, s in total.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
