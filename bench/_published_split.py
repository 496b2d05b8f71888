"""The comparison split by model generation: issue #37's figure.

    python bench/estimate_vs_published.py --split           # the split after the usual report
    python bench/_published_split.py /tmp/evp.json          # the split of a saved --json run

"Old" rows project a config of the families the estimate was first checked on (Llama-2,
Llama-3.x, Mixtral, Qwen3-32B); every other projected config is a "new" (2025-26) model:
DeepSeek-V3/R1, Kimi-K2, gpt-oss, Qwen3 MoE / Next, Llama-4, GLM-4.5, Nemotron-H, ...
Headline (non-weak) rows only, as in the headline summary.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

METRICS = ("ttft", "itl_tpot", "throughput")
OLD_PREFIXES = ("llama-2", "llama-3", "mixtral", "qwen3-32b")


def generation(config: str | None) -> str:
    return "old" if (config or "").startswith(OLD_PREFIXES) else "new"


def split(result: dict[str, Any], worst: int = 8) -> dict[str, Any]:
    """Per generation and metric: rows, median |error|, median ratio, and the largest misses."""
    strong = [r for r in result["rows"] if r["metrics"] and not r["weak"]]
    out: dict[str, Any] = {}
    for gen in ("new", "old"):
        rows = [r for r in strong if generation(r["setup"].get("config")) == gen]
        per_metric: dict[str, Any] = {}
        for metric in METRICS:
            points = [(r["metrics"][metric], r) for r in rows if metric in r["metrics"]]
            if not points:
                continue
            points.sort(key=lambda p: -p[0]["error"])
            per_metric[metric] = {
                "rows": len(points),
                "median_error": statistics.median(m["error"] for m, _ in points),
                "worst": [
                    (r["id"], r["setup"].get("config"), m["ratio"]) for m, r in points[:worst]
                ],
            }
        out[gen] = per_metric
    return out


def print_split(result: dict[str, Any], worst: int = 8) -> None:
    summary = split(result, worst)
    print("\nBy model generation (headline rows; old = Llama-2/3, Mixtral, Qwen3-32B):")
    for gen, per_metric in summary.items():
        for metric, s in per_metric.items():
            print(f"  {gen} {metric:10s} n={s['rows']:3d}  median|err| {s['median_error']:.1%}")
    for gen, per_metric in summary.items():
        for metric, s in per_metric.items():
            print(f"  largest {gen} {metric} misses:")
            for row_id, config, ratio in s["worst"]:
                shown = f"×{ratio:.2f}" if ratio is not None else "none"
                print(f"    {shown:>7s}  {row_id}  ({config})")


if __name__ == "__main__":
    print_split(json.loads(Path(sys.argv[1]).read_text()))
