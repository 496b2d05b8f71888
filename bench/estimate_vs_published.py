"""The serving estimate against published serving measurements: how far today's model misses.

    python bench/estimate_vs_published.py                    # every row, tables and summary
    python bench/estimate_vs_published.py --rows ID,ID       # only these rows
    python bench/estimate_vs_published.py --json out.json    # everything, as JSON
    python bench/estimate_vs_published.py --split            # also new- vs old-model rows

The rows are `bench/data/published_serving.jsonl` (and the rows added to it: from the
sources it quotes, `published_serving_v014_online.jsonl`, and from engines other than
TensorRT-LLM, `published_serving_others.jsonl`): published serving measurements
(TensorRT-LLM performance tables, MLPerf Inference results, vLLM / SGLang / TGI /
LMDeploy posts, recipes and issues), each copied with its `source_url`, the exact
`quote` it was read from and `notes` on what limits its comparability, plus two
fields of ours: `family` (where the figure was published: "trtllm" for TensorRT-LLM's
performance tables and NVIDIA's TensorRT-LLM launch post, "mlperf" for MLPerf result
logs, else the engine of an engine post, issue or recipe: "vllm", "sglang" or
"other") and `mode` (how the load was driven: "offline", "online-rate",
"online-concurrency"). `bench/data/README.md` says how they were chosen.

Every row is either projected or said, in one line, to be beyond what the estimate
can express (a GPU the catalog lacks, a model without a config, expert parallelism over
several nodes or a disaggregated layout, no published length, ...). A projected row is
the estimate of today, untouched: the datasheet calibration (`assumed`: catalog peaks
× the assumed efficiencies and per-pass cost) and the simulated engine of
`profiling.serving` over `profiling.step_time`'s step model, set up exactly as
`project()` sets it up (the same step model, KV capacity and memory reserve), on
one tensor-parallel group of `tp` GPUs; `replicas` groups serve in data parallel
(the group's figures, its throughput × replicas, an open-loop rate split evenly).
A mixture of experts run with attention in data parallel over its group (SGLang's
--enable-dp-attention, TensorRT-LLM's enable_attention_dp with --ep) is served as the
advisor's expert-parallel layout (`profiling.projection.expert_parallel`, as the layout
search sets it up): `tp` ranks, each an engine of its own holding the shared weights and
1/tp of the experts, the load split evenly over them.

Weights: the row's precision as `--weights` names it (fp8, bf16, fp16, fp4), except
where the row serves a quantized checkpoint as it ships (DeepSeek-V3/R1's block fp8,
gpt-oss's MXFP4): then the checkpoint's own ("checkpoint-fp8", "checkpoint-fp4"), also
for a row that states no precision for a checkpoint that ships only quantized.

How each mode is served:
- online-concurrency: `project()` itself, at the row's concurrency per replica.
- online-rate: `simulate(step, Requests(..., rate=...))`, Poisson arrivals at the row's request rate
  (per replica), as TensorRT-LLM's, MLPerf's and vLLM's serving benchmarks drive a
  server; `project()` only takes a concurrency, so the simulation is called here.
- offline (all requests queued at once: trtllm-bench's "infinite rate", MLPerf
  Offline, vLLM's benchmark_throughput): `simulate` has no infinite rate, so the
  requests arrive open loop at 1e9 requests/s, i.e. all within microseconds of
  t = 0 and queued. A closed loop at a concurrency equal to the engine's sequence
  limit would also saturate it, but spreads its users over one request's time: not
  how an offline run starts. Requests: the count the row's notes state (e.g. "3000
  requests"), else 4 × what the engine runs at once, so that the ramp and the drain
  stay a small part of the run. Throughput is the simulation's, total output tokens
  over the whole run, as these tools report it. A static batch (the row's notes
  say "static-batch" / "fixed batch size") is one batch of `concurrency` requests
  run to completion. The engine's scheduler limits are those of its offline class
  unless the row was run through its server (`SERVER_RUN`: `vllm serve`, the
  serving benchmark's output), whose defaults differ (`profiling.projection.engines`).

Engine limits: the simulator's scheduler defaults are vLLM's (`MAX_SEQS` sequences,
`MAX_BATCHED_TOKENS` tokens per step); where a row states its engine's sequence
limit (e.g. `--max-num-seqs 32`, "Max. Seqs = 3200", a static batch size) that
figure, parsed from the row's own notes, replaces `MAX_SEQS`, and a stated
`--max-num-batched-tokens` replaces the token budget. Nothing else is
engine-specific: the estimate has one efficiency table, whatever engine a row
stands for. KV cache: fp8 where the row says so or its checkpoint declares it
(`CHECKPOINT_FP8_KV`), else the weights' default of `profiling.precision.kv_format`.

Compared: TTFT (the simulation's mean where the row gives a mean, else its p50),
ITL or TPOT (the simulation's ITL for a row giving ITL, TPOT for one giving TPOT,
the mean or the p50 as the row's statistic) and output tokens per second (the whole
deployment, or per GPU where the row's scope is per_gpu). Rows over a dataset of
variable lengths (ShareGPT, OpenOrca, averages computed from totals) compare
throughput only: the simulation serves one fixed length. Error: |predicted /
published − 1|; its median and worst per metric, over all comparable rows, per
family, per engine and per mode. Rows whose
notes call their figure inferred, unverified, presumed, approximate, preliminary
(or the like) are weak evidence: reported apart, never in the headline figures.

Importable: `compare(rows) -> dict` (with `load_rows()`) is the whole comparison,
for a test to call through `runpy.run_path`. Runs in seconds on two cores.

Reading a row into the projection's terms (`load_rows`, `load_configs`, the patterns
read in its notes such as `SERVER_RUN`, `REQUESTS` and `WEAK`, `CHECKPOINT_FP8_KV`,
`express`) is `bench/_published_rows.py`; the printed report, `bench/_published_print.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# A published row read into the projection's terms, and the printed report.
from bench._published_print import print_lofo, report  # noqa: E402
from bench._published_rows import METRICS, express, load_configs, load_rows  # noqa: E402
from bench._published_split import print_split  # noqa: E402

# What the comparison uses of the project's estimate (profiling/).
from profiling.model.shapes import DTYPE_BYTES, Shapes  # noqa: E402
from profiling.options import KV_CACHE_FORMATS  # noqa: E402
from profiling.projection.calibration import (  # noqa: E402
    ASSUMED_BANDWIDTH_EFFICIENCY,
    ASSUMED_COMPUTE_EFFICIENCY,
)
from profiling.projection.precision import PRECISIONS  # noqa: E402
from profiling.projection.validation import summary_of  # noqa: E402

VALIDATION = Path(__file__).resolve().parent.parent / "profiling" / "data" / "validation.json"


# -- the whole comparison --------------------------------------------------------------


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric in METRICS:
        points = [(r["metrics"][metric], r["id"]) for r in results if metric in r["metrics"]]
        if not points:
            continue
        errors = [m["error"] for m, _ in points]
        ratios = [m["ratio"] for m, _ in points if m["ratio"] is not None]
        worst_metric, worst_id = max(points, key=lambda p: p[0]["error"])
        out[metric] = {
            "rows": len(points),
            "median_error": statistics.median(errors),
            "worst_error": worst_metric["error"],
            "worst_row": worst_id,
            "median_ratio": statistics.median(ratios) if ratios else None,
            "within_20pct": sum(e <= 0.20 for e in errors),
            "off_by_2x": sum(
                m["ratio"] is None or m["ratio"] >= 2 or m["ratio"] <= 0.5 for m, _ in points
            ),
        }
    return out


def _grouped(results: list[dict[str, Any]], key: str) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r[key] or "?", []).append(r)
    return {name: _summary(rows) for name, rows in sorted(groups.items())}


def _family_group(family: str | None) -> str:
    return family if family in ("trtllm", "mlperf") else "others"


def compare(
    rows: list[dict[str, Any]], efficiencies: tuple[float, float] | None = None
) -> dict[str, Any]:
    """Every row projected or explained; error summaries of the comparable, non-weak rows
    (overall, per family: trtllm / mlperf / others, per engine, per mode, per GPU, per
    weight precision) and of the weak rows apart."""
    configs = load_configs()
    results = [express(row, configs, efficiencies) for row in rows]
    for r in results:
        r["family_group"] = _family_group(r["family"])
        r["gpu"] = r["setup"].get("gpu")
        r["dtype"] = r["setup"].get("dtype")
    compared = [r for r in results if r["metrics"]]
    strong = [r for r in compared if not r["weak"]]
    weak = [r for r in compared if r["weak"]]
    checks = {}
    if {"llama-3.1-70b", "llama-3.3-70b"} <= configs.keys():
        same = Shapes.from_config(configs["llama-3.1-70b"]) == Shapes.from_config(
            configs["llama-3.3-70b"]
        )
        checks["llama-3.3-70b shapes == llama-3.1-70b shapes"] = same
    return {
        "rows": results,
        "counts": {
            "rows": len(results),
            "expressible": sum(r["expressible"] for r in results),
            "compared": len(compared),
            "compared_strong": len(strong),
            "compared_weak": len(weak),
            "not_expressible": sum(not r["expressible"] for r in results),
        },
        "summary": {
            "overall": _summary(strong),
            "by_family": _grouped(strong, "family_group"),
            "by_engine": _grouped(strong, "engine"),
            "by_mode": _grouped(strong, "mode"),
            "by_gpu": _grouped(strong, "gpu"),
            "by_dtype": _grouped(strong, "dtype"),
        },
        "weak_summary": {
            "overall": _summary(weak),
            "by_family": _grouped(weak, "family_group"),
            "by_engine": _grouped(weak, "engine"),
        },
        "checks": checks,
        "precisions": sorted(PRECISIONS),
        "fp8_kv_key": KV_CACHE_FORMATS["fp8"] if KV_CACHE_FORMATS["fp8"] in DTYPE_BYTES else None,
    }


# Leave one family out: the datasheet efficiencies are the estimate's only free
# constants, so they are what a fit to published rows would tune. Fit them on one
# family's headline rows (the pair of this grid with the least median throughput
# error), then project the other family with them: an error that stays low there is
# not a constant tuned to the rows it is judged on.
COMPUTE_GRID = (0.3, 0.4, 0.5, 0.6, 0.7)
BANDWIDTH_GRID = (0.55, 0.65, 0.75, 0.85, 0.95)


def _throughput_error(rows: list[dict[str, Any]], efficiencies: tuple[float, float]) -> float:
    result = compare(rows, efficiencies)
    return result["summary"]["overall"]["throughput"]["median_error"]


def leave_one_family_out(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """For each family: the efficiencies fitted on the other one, and this family's median
    throughput error with them, beside its error with the assumed ones."""
    strong = [r for r in compare(rows)["rows"] if r["metrics"] and not r["weak"]]
    ids = {"trtllm": set(), "others": set()}
    for r in strong:
        if "throughput" in r["metrics"]:
            ids["trtllm" if r["family_group"] == "trtllm" else "others"].add(r["id"])
    by_family = {f: [row for row in rows if row["id"] in ids[f]] for f in ids}
    out = {}
    for held_out, fitted_on in (("others", "trtllm"), ("trtllm", "others")):
        grid = [(c, b) for c in COMPUTE_GRID for b in BANDWIDTH_GRID]
        best = min(grid, key=lambda e: _throughput_error(by_family[fitted_on], e))
        out[held_out] = {
            "fitted_on": fitted_on, "rows": len(by_family[held_out]),
            "efficiencies": {"compute": best[0], "bandwidth": best[1]},
            "fit_error": _throughput_error(by_family[fitted_on], best),
            "held_out_error": _throughput_error(by_family[held_out], best),
            "assumed_error": _throughput_error(by_family[held_out], (
                ASSUMED_COMPUTE_EFFICIENCY, ASSUMED_BANDWIDTH_EFFICIENCY)),
        }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write every row and summary here")
    parser.add_argument("--rows", help="comma-separated row ids (default: all)")
    parser.add_argument(
        "--leave-one-family-out", action="store_true",
        help="also fit the efficiencies on one family and test on the other (about a minute)",
    )  # fmt: skip
    parser.add_argument(
        "--split", action="store_true",
        help="also the medians of new-model (2025-26) and old-model rows apart (issue #37)",
    )  # fmt: skip
    parser.add_argument(
        "--write-validation", action="store_true",
        help=f"write the error bands the estimates carry to {VALIDATION}",
    )  # fmt: skip
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = load_rows()
    if args.rows:
        wanted = [i.strip() for i in args.rows.split(",") if i.strip()]
        known = {r["id"] for r in rows}
        missing = [i for i in wanted if i not in known]
        if missing:
            parser.error(f"unknown row ids: {', '.join(missing)}")
        rows = [r for r in rows if r["id"] in wanted]
    result = compare(rows)
    elapsed = time.perf_counter() - start
    result["elapsed_seconds"] = elapsed
    report(result)
    if args.split:
        print_split(result)
    print(f"\nElapsed: {elapsed:.2f} s")
    if args.leave_one_family_out:
        result["leave_one_family_out"] = leave_one_family_out(rows)
        print_lofo(result["leave_one_family_out"])
    if args.write_validation:
        if args.rows:
            parser.error("--write-validation takes every row")
        VALIDATION.write_text(json.dumps(summary_of(result), indent=1) + "\n")
        print(f"Wrote {VALIDATION}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"Wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
