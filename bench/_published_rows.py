"""A published serving row read into the projection's terms, for `estimate_vs_published.py`
(whose docstring says how each mode is served): `load_rows`, `load_configs`, the row's
engine, GPU, formats and layout, the figures its notes state (`stated`), and `express`: the
row projected, or the reasons it cannot be.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from profiling.measure.hardware import GPU, UnknownGPU, lookup, match_device_name
from profiling.model.shapes import Shapes
from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS
from profiling.projection.calibration import assumed
from profiling.projection.engines import limits as engine_limits
from profiling.projection.estimate import project, shipped_configs

DATA = Path(__file__).resolve().parent / "data"
ROWS_FILE = DATA / "published_serving.jsonl"
# Rows added later, kept apart (bench/data/README.md): the rest of a table the collection
# quotes, and published measurements of engines other than TensorRT-LLM.
ADDED_ROWS_FILES = (
    DATA / "published_serving_v014_online.jsonl",
    DATA / "published_serving_others.jsonl",
)
CONFIGS = DATA / "configs"

METRICS = ("ttft", "itl_tpot", "throughput")

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
