"""The serving estimate against published serving measurements: how far today's model misses.

    python bench/estimate_vs_published.py                    # every row, tables and summary
    python bench/estimate_vs_published.py --rows ID,ID       # only these rows
    python bench/estimate_vs_published.py --json out.json    # everything, as JSON

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
can express (a GPU the catalog lacks, a model without a config, an expert-parallel
or disaggregated layout, no published length, ...). A projected row is the
estimate of today, untouched: the datasheet calibration (`assumed`: catalog peaks
× the assumed efficiencies and per-pass cost) and the simulated engine of
`profiling.serving` over `profiling.step_time`'s step model, set up exactly as
`project()` sets it up (the same step model, KV capacity and memory reserve), on
one tensor-parallel group of `tp` GPUs; `replicas` groups serve in data parallel
(the group's figures, its throughput × replicas, an open-loop rate split evenly).

How each mode is served:
- online-concurrency: `project()` itself, at the row's concurrency per replica.
- online-rate: `simulate(rate=...)`, Poisson arrivals at the row's request rate
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
figure, parsed from the row's own notes, replaces `MAX_SEQS`. Nothing else is
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
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The project's estimate: every import of profiling/ in this one block.
from profiling.measure.hardware import GPU, UnknownGPU, lookup, match_device_name  # noqa: E402
from profiling.model.shapes import DTYPE_BYTES, Shapes  # noqa: E402
from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS  # noqa: E402
from profiling.projection.calibration import (  # noqa: E402
    ASSUMED_BANDWIDTH_EFFICIENCY,
    ASSUMED_COMPUTE_EFFICIENCY,
    assumed,
)
from profiling.projection.engines import limits as engine_limits  # noqa: E402
from profiling.projection.estimate import project, shipped_configs  # noqa: E402
from profiling.projection.precision import PRECISIONS  # noqa: E402
from profiling.projection.validation import summary_of  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
VALIDATION = Path(__file__).resolve().parent.parent / "profiling" / "data" / "validation.json"
ROWS_FILE = DATA / "published_serving.jsonl"
# Rows added later, kept apart (bench/data/README.md): the rest of a table the collection
# quotes, and published measurements of engines other than TensorRT-LLM.
ADDED_ROWS_FILES = (
    DATA / "published_serving_v014_online.jsonl",
    DATA / "published_serving_others.jsonl",
)
CONFIGS = DATA / "configs"

METRICS = ("ttft", "itl_tpot", "throughput")
METRIC_LABELS = {"ttft": "TTFT", "itl_tpot": "ITL/TPOT", "throughput": "output tok/s"}

# Offline: every request queued at once (see the docstring).
OFFLINE_RATE = 1e9
OFFLINE_ROUNDS = 4
# The engine whose limits a row's projection uses, by the row's engine.
ENGINE_LIMITS = {"TensorRT-LLM": "tensorrt-llm"}

# The model a row names -> its config: shipped with the project (profiling/data/configs)
# or copied with its source under bench/data/configs. Matched on the row's `model`.
MODELS = (
    (r"Llama[- ]?3\.1[- ]8B", "llama-3.1-8b"),
    (r"Llama[- ]?3\.3[- ]70B", "llama-3.3-70b"),
    (r"Llama[- ]?3\.1[- ]70B", "llama-3.1-70b"),
    (r"Llama[- ]?3\.1[- ]405B", "llama-3.1-405b"),
    (r"Llama[- ]?2[- ]70B", "llama-2-70b"),
    (r"Mixtral[- ]8x7B", "mixtral-8x7b"),
    (r"Qwen3[- ]32B", "qwen3-32b"),
)
# Architectures whose config fields profiling.shapes has no counterpart for.
UNMODELLED = (
    (
        r"DeepSeek",
        "DeepSeek-V3/R1 architecture not in profiling.shapes (its config's MLA cache "
        "kv_lora_rank, n_shared_experts, first_k_dense_replace)",
    ),
)
# Notes of a row whose figure is weaker evidence (README: "report apart, never tune").
WEAK = re.compile(
    r"inferred|unverified|unlabell?ed|presumed|approximate|low-quality|"
    r"preliminary|per blog context|with caution",
    re.I,
)
# A layout the projection cannot take: expert parallel, attention data parallel,
# prefill/decode disaggregation.
EXPERT_LAYOUT = re.compile(
    r"--ep\b|\bEP\d+|\bEPLB\b|EP size|expert[- ]parallel|dp[- ]attention|"
    r"attention[_ ]dp|DP attention|wide-EP|DP\+EP",
    re.I,
)
DISAGGREGATED = re.compile(r"disaggregat|\bP/D\b", re.I)
VARIABLE_LENGTHS = re.compile(
    r"ShareGPT|OpenOrca|variable|average|computed from totals|"
    r"Synthetic dataset",
    re.I,
)
STATIC_BATCH = re.compile(r"static[- ]batch|fixed batch size", re.I)
# A run driven through the engine's server (its own benchmark client's output, or the
# command), not its offline class: the server's scheduler defaults apply even when every
# request was sent at once (vLLM's server batches fewer tokens a step than `LLM`).
SERVER_RUN = re.compile(
    r"vllm serve|bench serve|benchmark_serving|api_server|Successful requests:|Server: --", re.I
)
# Engine figures a row's notes state, parsed from them (never typed here).
REQUESTS = (
    re.compile(r"No\. Prompts = (?:Max\. Seqs = )?([\d,]+)"),
    re.compile(r"(?<![\w.,])(\d[\d,]*) requests\b(?! per)"),
    re.compile(r"(?<![\w.,])(\d[\d,]*) prompts\b"),
)
MAX_SEQS_STATED = (re.compile(r"--max-num-seqs ([\d,]+)"), re.compile(r"Max\. Seqs = ([\d,]+)"))


# -- reading a row -------------------------------------------------------------------


def load_rows(*paths: Path) -> list[dict[str, Any]]:
    """The rows of `paths` (default: the collection, then the rows added to it)."""
    rows = []
    for path in paths or (ROWS_FILE, *ADDED_ROWS_FILES):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def load_configs() -> dict[str, dict[str, Any]]:
    """Shipped configs, then the benchmark's own (their `_source` keys dropped)."""
    configs = dict(shipped_configs())
    for path in sorted(CONFIGS.glob("*.json")):
        raw = json.loads(path.read_text())
        configs[path.stem] = {k: v for k, v in raw.items() if not k.startswith("_")}
    return configs


def engine_of(row: dict[str, Any]) -> str:
    text = (row.get("engine") or "").lower()
    for key, name in (
        ("tensorrt", "TensorRT-LLM"),
        ("vllm", "vLLM"),
        ("sglang", "SGLang"),
        ("tgi", "TGI"),
        ("lmdeploy", "LMDeploy"),
    ):
        if key in text:
            return name
    return row.get("engine") or "unknown"


def resolve_gpu(name: str | None) -> GPU | None:
    """The catalog GPU a row's free-text GPU names: a driver-style name, else its
    longest leading words that are a catalog key or alias ("H100 SXM 80GB" -> H100 SXM)."""
    if not name:
        return None
    found = match_device_name(name)
    if found is not None:
        return found
    words = name.split("(")[0].split()
    for k in range(len(words), 0, -1):
        try:
            return lookup(" ".join(words[:k]))
        except UnknownGPU:
            continue
    return None


def weights_precision(row: dict[str, Any]) -> str | None:
    """The serving precision of the row's weights, read as the estimate's own `--weights`
    names them (None: not published or not modelled)."""
    text = (row.get("weight_precision") or "").strip().lower()
    for name in ("fp8", "bf16", "fp16"):
        if text.startswith(name):
            return WEIGHT_FORMATS[name]
    return None


# A row that leaves its KV cache's format unstated runs the one its checkpoint declares
# (hf_quant_config.json's kv_cache_quant_algo): TensorRT-LLM and vLLM take it from the
# checkpoint unless told otherwise (TensorRT-LLM lets one enable FP8 KV "even for
# checkpoints that do not have it enabled by default": nvidia.github.io/TensorRT-LLM/
# 1.0.0/features/quantization.html). The ModelOpt checkpoints known to declare FP8 KV,
# with where that is said; nvidia/Llama-3.1-405B-Instruct-FP8 is not among them (its
# card: "Only the weights and activations of the linear operators within transformers
# blocks are quantized").
CHECKPOINT_FP8_KV = {
    "nvidia/Llama-3.1-8B-Instruct-FP8": "github.com/sgl-project/sglang/pull/3223: "
    "'nvidia/Llama-3.1-8B-Instruct-FP8 will be updated with FP8 kv cache enabled'",
    "nvidia/Llama-3.3-70B-Instruct-FP8": "vLLM resolves its hf_quant_config.json's "
    "KV cache to fp8_e4m3 (kv_cache_dtype auto)",
}


def kv_precision(row: dict[str, Any]) -> str:
    stated = (row.get("kv_precision") or "").lower()
    fp8 = stated.startswith("fp8") or (not stated and row.get("hf_id") in CHECKPOINT_FP8_KV)
    return KV_CACHE_FORMATS["fp8" if fp8 else "auto"]


def kv_read_from(row: dict[str, Any]) -> str:
    if row.get("kv_precision"):
        return "as published"
    if row.get("hf_id") in CHECKPOINT_FP8_KV:
        return f"the checkpoint's kv_cache_quant_algo (FP8; {CHECKPOINT_FP8_KV[row['hf_id']]})"
    return "not published: the weights' default"


def stated(patterns: tuple[re.Pattern[str], ...], text: str) -> tuple[int, str] | None:
    """The first figure one of `patterns` finds in a row's text, with the text matched."""
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1).replace(",", "")), found.group(0)
    return None


def weak_reason(row: dict[str, Any]) -> str | None:
    for field in ("notes", "model", "gpu", "weight_precision", "kv_precision"):
        found = WEAK.search(row.get(field) or "")
        if found:
            return f"'{found.group(0)}' in {field}"
    return None


def layout(row: dict[str, Any]) -> tuple[int, int, str, list[str]]:
    """(tp, replicas, how it was read, reasons it cannot be projected)."""
    reasons, how = [], "as published"
    count, tp, pp = row.get("gpu_count"), row.get("tp"), row.get("pp")
    replicas = row.get("replicas")
    notes = row.get("notes") or ""
    if row.get("moe") and EXPERT_LAYOUT.search(notes):
        reasons.append(
            "MoE at a layout not modelled (expert / attention-data parallel; "
            "project() splits experts by tensor parallelism only)"
        )
    if DISAGGREGATED.search(notes):
        reasons.append("prefill/decode disaggregated deployment not modelled by project()")
    if not count:
        reasons.append("no published GPU count")
        return 0, 0, how, reasons
    if pp not in (None, 1):
        reasons.append(f"pipeline parallel {pp} not modelled by project()")
    if tp is None:
        if replicas and count % replicas == 0:
            tp, how = count // replicas, f"TP {count // replicas} read as gpu_count / replicas"
        else:
            reasons.append(f"layout not published (TP × replicas of the {count} GPUs unknown)")
            return 0, 0, how, reasons
    if replicas is None:
        replicas = count // tp
    if tp * replicas != count:
        reasons.append(f"TP {tp} × {replicas} replicas ≠ {count} GPUs")
    return tp, replicas, how, reasons


# -- one row ---------------------------------------------------------------------------


def _blank(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "family": row.get("family"), "mode": row.get("mode"),
        "engine": engine_of(row), "weak": weak_reason(row), "expressible": False,
        "reasons": [], "setup": {}, "metrics": {}, "notes": [], "published_gpu": row.get("gpu"),
    }  # fmt: skip


def express(
    row: dict[str, Any],
    configs: dict[str, dict[str, Any]],
    efficiencies: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The row projected, or the reasons it cannot be; `efficiencies`: (compute,
    bandwidth) shares of the datasheet peaks instead of the assumed ones."""
    out = _blank(row)
    reasons = out["reasons"]
    tp, replicas, how, layout_reasons = layout(row)
    reasons += layout_reasons
    gpu = resolve_gpu(row.get("gpu"))
    if not row.get("gpu"):
        reasons.append("GPU not named")
    elif gpu is None:
        reasons.append(f"GPU not in the catalog: {row['gpu']}")
    for pattern, why in UNMODELLED:
        if re.search(pattern, row.get("model") or ""):
            reasons.append(why)
    dtype, kv = weights_precision(row), kv_precision(row)
    if dtype is None:
        reasons.append(
            "weight precision not published"
            if not row.get("weight_precision")
            else f"weight precision {row['weight_precision']!r} not modelled"
        )
    isl, osl = row.get("input_tokens"), row.get("output_tokens")
    if isl is None:
        reasons.append("no published input length")
    if osl is None:
        reasons.append("no published output length")
    mode = row.get("mode")
    if mode == "online-rate" and not row.get("request_rate"):
        reasons.append("no published request rate")
    if mode == "online-concurrency" and not row.get("concurrency"):
        reasons.append("no published concurrency")
    published = {
        "ttft": row.get("ttft_ms"),
        "itl_tpot": row.get("itl_or_tpot_ms"),
        "throughput": row.get("output_tokens_per_s"),
    }
    variable = bool(VARIABLE_LENGTHS.search((row.get("notes") or "") + (row.get("quote") or "")))
    if variable:
        published["ttft"] = published["itl_tpot"] = None
    if not any(v is not None for v in published.values()):
        reasons.append(
            "no published TTFT, ITL/TPOT or output throughput to compare"
            + (" (variable lengths: latency not compared)" if variable else "")
        )
    name = next((n for p, n in MODELS if re.search(p, row.get("model") or "", re.I)), None)
    if not reasons and (name is None or name not in configs):
        reasons.append(f"no config found for {row.get('model')}")
    if reasons:
        return out

    shapes = Shapes.from_config(configs[name])
    assert gpu is not None and dtype is not None and isl is not None and osl is not None
    isl, osl = int(round(isl)), int(round(osl))
    calibration = assumed(gpu, dtype, shapes.num_layers, *(efficiencies or ()))
    text = (row.get("notes") or "") + " " + (row.get("quote") or "")
    static = bool(STATIC_BATCH.search(row.get("notes") or ""))
    offline = mode == "offline" and not SERVER_RUN.search(text)
    engine = engine_limits(gpu, ENGINE_LIMITS.get(out["engine"], "vllm"), offline)
    seqs_from = f"{engine.engine}'s default"
    requests, requests_from = None, ""
    if static and row.get("concurrency"):
        engine = replace(engine, max_seqs=row["concurrency"] // replicas)
        requests = row["concurrency"]
        seqs_from = requests_from = f"static batch of {row['concurrency']} (concurrency)"
    else:
        found = stated(MAX_SEQS_STATED, text)
        if found:
            engine = replace(engine, max_seqs=found[0] // replicas)
            seqs_from = f"notes: '{found[1]}'"
        found = stated(REQUESTS, text)
        if found:
            requests, requests_from = found[0], f"notes: '{found[1]}'"
    out["setup"] = {
        "config": name, "gpu": gpu.key, "dtype": dtype, "kv_dtype": kv or "default",
        "kv_from": kv_read_from(row),
        "tp": tp, "replicas": replicas, "layout": how, "input_tokens": isl,
        "output_tokens": osl, "engine_limits": engine.note(), "max_seqs": engine.max_seqs,
        "max_seqs_from": seqs_from, "max_batched_tokens": engine.max_batched_tokens,
        "variable_lengths": variable, "calibration": calibration.note,
    }  # fmt: skip
    out["expressible"] = True
    rate, concurrency = 0.0, 0
    if mode == "online-concurrency":
        concurrency = row["concurrency"]
        out["setup"]["served_by"] = f"project(concurrency={concurrency})"
    elif mode == "online-rate":
        rate = row["request_rate"]
        out["setup"]["served_by"] = f"project(rate={rate:g}/s Poisson)"
    else:
        rate = OFFLINE_RATE
        if requests is None:
            requests = max(64, OFFLINE_ROUNDS * engine.max_seqs) * replicas
            requests_from = f"{OFFLINE_ROUNDS} × the engine's {engine.max_seqs} sequences"
        out["setup"]["served_by"] = "project(all queued at t=0)"
    if requests:
        out["setup"]["requests"], out["setup"]["requests_from"] = requests, requests_from
    projection = project(
        shapes, calibration, dtype, isl, osl, concurrency, gpu, tp, kv_dtype=kv,
        engine=engine, rate=rate, requests=requests, replicas=replicas,
    )  # fmt: skip
    served = projection.served
    why_not = "" if served is not None else "; ".join(projection.notes)
    if served is not None:
        out["setup"]["max_running"] = served.max_running
        out["setup"]["mean_batch"] = round(served.mean_batch, 1)
        itl_kind = "tpot" if "tpot" in (row.get("itl_stat") or "").lower() else "itl"
        per_gpu = row.get("throughput_scope") == "per_gpu"
        throughput = projection.decode_tokens_per_second
        # The statistic the row publishes: its mean where it says so, else the median.
        ttft_mean = "mean" in (row.get("ttft_stat") or "").lower()
        itl_mean = "mean" in (row.get("itl_stat") or "").lower()
        itl = {("tpot", False): served.tpot.p50, ("tpot", True): served.tpot_mean,
               ("itl", False): served.itl.p50, ("itl", True): served.itl_mean}  # fmt: skip
        predicted = {
            "ttft": (served.ttft_mean if ttft_mean else served.ttft.p50) * 1e3,
            "itl_tpot": itl[itl_kind, itl_mean] * 1e3,
            "throughput": throughput / (row["gpu_count"] if per_gpu else 1),
        }
        stats = {
            "ttft": "mean" if ttft_mean else "p50",
            "itl_tpot": f"{itl_kind.upper()} {'mean' if itl_mean else 'p50'}",
            "throughput": "run",
        }
        p90 = {
            "ttft": served.ttft.p90 * 1e3,
            "itl_tpot": (served.tpot.p90 if itl_kind == "tpot" else served.itl.p90) * 1e3,
            "throughput": None,
        }
        out["notes"] += served.notes
    else:
        out["notes"].append(why_not)
        # No service: no throughput (an error of 100 %), no latency.
        predicted = {"ttft": None, "itl_tpot": None, "throughput": 0.0}
        stats = {"ttft": "-", "itl_tpot": "-", "throughput": "none"}
        p90 = {"ttft": None, "itl_tpot": None, "throughput": None}
    published_stats = {
        "ttft": row.get("ttft_stat"), "itl_tpot": row.get("itl_stat"),
        "throughput": row.get("throughput_scope"),
    }  # fmt: skip
    for metric in METRICS:
        pub = published[metric]
        if pub is None:
            continue
        pred = predicted[metric]
        ratio = None if pred is None else pred / pub
        out["metrics"][metric] = {
            "published": pub, "published_stat": published_stats[metric],
            "predicted": pred, "predicted_stat": stats[metric],
            "predicted_p90": p90[metric], "ratio": ratio,
            "error": 1.0 if ratio is None else abs(ratio - 1),
        }  # fmt: skip
    return out


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


# -- printing ------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _cell(metric: dict[str, Any] | None) -> str:
    if metric is None:
        return ""
    ratio = "n/a" if metric["ratio"] is None else f"{metric['ratio']:.2f}"
    return f"{_fmt(metric['predicted'])} / {_fmt(metric['published'])} (×{ratio})"


def _print_rows(results: list[dict[str, Any]], title: str) -> None:
    print(title)
    head = (
        f"  {'row':52s} {'engine':12s} {'mode':8s} {'TTFT ms pred/pub':26s} "
        f"{'ITL/TPOT ms pred/pub':24s} {'out tok/s pred/pub':30s} setup"
    )
    print(head)
    for r in results:
        m, s = r["metrics"], r["setup"]
        mode = {"offline": "offline", "online-rate": "rate", "online-concurrency": "conc"}[
            r["mode"]
        ]
        setup = (
            f"{s['gpu']}×{s['tp']}"
            + (f" ×{s['replicas']}rep" if s["replicas"] > 1 else "")
            + f" {s['dtype']}/kv {s['kv_dtype']}, {s['input_tokens']}/{s['output_tokens']}"
            + f", run≤{s.get('max_running', '-')} (max_seqs {s['max_seqs']})"
        )
        print(
            f"  {r['id']:52s} {r['engine']:12s} {mode:8s} {_cell(m.get('ttft')):26s} "
            f"{_cell(m.get('itl_tpot')):24s} {_cell(m.get('throughput')):30s} {setup}"
        )
        if r["weak"]:
            print(f"  {'':52s} weak: {r['weak']}")
        for note in r["notes"]:
            if note.startswith("the estimate finds no room") or note.startswith("not served"):
                print(f"  {'':52s} ! {note}")


def _print_summary(summary: dict[str, Any], title: str) -> None:
    print(title)
    groups = [("overall", summary["overall"])]
    for group in ("by_family", "by_engine", "by_mode", "by_gpu", "by_dtype"):
        groups += [(f"{group[3:]}: {name}", s) for name, s in summary.get(group, {}).items()]
    for metric in METRICS:
        rows = [(name, s[metric]) for name, s in groups if metric in s]
        if not rows:
            continue
        print(
            f"  {METRIC_LABELS[metric]:26s} {'n':>3s} {'median|err|':>11s} {'median ratio':>12s} "
            f"{'≤20 %':>6s} {'≥×2 off':>7s}  worst|err| (row)"
        )
        for name, x in rows:
            ratio = "-" if x["median_ratio"] is None else f"×{x['median_ratio']:.2f}"
            print(
                f"    {name:24s} {x['rows']:3d} {x['median_error']:11.1%} {ratio:>12s} "
                f"{x['within_20pct']:6d} {x['off_by_2x']:7d}  "
                f"{x['worst_error']:.1%} ({x['worst_row']})"
            )


def report(result: dict[str, Any]) -> None:
    rows = result["rows"]
    strong = [r for r in rows if r["metrics"] and not r["weak"]]
    weak = [r for r in rows if r["metrics"] and r["weak"]]
    c = result["counts"]
    print(
        f"{c['rows']} published rows: {c['compared']} projected and compared "
        f"({c['compared_strong']} headline, {c['compared_weak']} weak), "
        f"{c['not_expressible']} not expressible."
    )
    print(
        "Estimate: datasheet peaks × assumed efficiencies (profiling.projection.calibration."
        "assumed), the simulated engine with the scheduler and memory defaults of the row's "
        "engine (profiling.projection.engines: TensorRT-LLM's for its rows, vLLM's for the "
        "rest) unless the row states its limit; one efficiency table for every engine."
    )
    for check, ok in result["checks"].items():
        print(f"Check: {check}: {ok}")
    print()
    _print_rows(strong, "Compared rows (predicted / published (× ratio)):")
    print()
    _print_rows(weak, "Weak rows (notes: inferred / unverified / ...), reported apart:")
    print()
    print("Not expressible:")
    for r in rows:
        if not r["expressible"]:
            print(f"  {r['id']:52s} {'; '.join(r['reasons'])}")
    print()
    _print_summary(result["summary"], "Error of the headline rows (|predicted/published − 1|):")
    families = sorted({r["family_group"] for r in rows})
    for family in families:
        if family not in result["summary"]["by_family"]:
            total = sum(r["family_group"] == family for r in rows)
            print(f"    family: {family}: none of its {total} rows is comparable (see above)")
    _print_off_by_2x(strong)
    print()
    _print_summary(result["weak_summary"], "Error of the weak rows (apart):")


def _print_off_by_2x(rows: list[dict[str, Any]]) -> None:
    """Each headline figure off by ×2 or more, with the GPU as its source names it (the
    reason such a row misses is in its notes: bench/data/*.jsonl)."""
    off = [(r, metric, m["ratio"]) for r in rows for metric, m in r["metrics"].items()
           if m["ratio"] is not None and not 0.5 < m["ratio"] < 2]  # fmt: skip
    print(f"Headline figures off by ×2 or more: {len(off)}")
    for r, metric, ratio in off:
        print(f"  {r['id']:52s} {METRIC_LABELS[metric]} ×{ratio:.2f}; published on: "
              f"{r['published_gpu']}, projected on the catalog's {r['setup']['gpu']}")  # fmt: skip


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


def _print_lofo(lofo: dict[str, Any]) -> None:
    print("\nLeave one family out (median |error| of output tok/s):")
    for held_out, r in lofo.items():
        e = r["efficiencies"]
        print(
            f"  fitted on {r['fitted_on']:7s} (compute {e['compute']:.0%}, bandwidth "
            f"{e['bandwidth']:.0%}: {r['fit_error']:.1%} there) -> {held_out} "
            f"({r['rows']} rows): {r['held_out_error']:.1%}, against {r['assumed_error']:.1%} "
            "with the assumed efficiencies"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write every row and summary here")
    parser.add_argument("--rows", help="comma-separated row ids (default: all)")
    parser.add_argument(
        "--leave-one-family-out", action="store_true",
        help="also fit the efficiencies on one family and test on the other (about a minute)",
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
    print(f"\nElapsed: {elapsed:.2f} s")
    if args.leave_one_family_out:
        result["leave_one_family_out"] = leave_one_family_out(rows)
        _print_lofo(result["leave_one_family_out"])
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
