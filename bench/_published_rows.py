"""A published serving row read into the projection's terms, for `estimate_vs_published.py`
(whose docstring says how each mode is served): `load_rows`, `load_configs`, the row's
engine, GPU, formats and layout, the figures its notes state (`stated`), and `express`: the
row projected, or the reasons it cannot be.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from profiling.measure.hardware import GPU, UnknownGPU, lookup, match_device_name
from profiling.model.shapes import Shapes
from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS
from profiling.projection import validation
from profiling.projection.calibration import Calibration, assumed
from profiling.projection.engines import EngineLimits
from profiling.projection.engines import limits as engine_limits
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs
from profiling.projection.expert_parallel import ExpertParallel
from profiling.projection.fit import activation_bytes
from profiling.projection.precision import serving_precision
from profiling.projection.serving import Requests, Served, simulate
from profiling.projection.step_time import DeviceMemory, StepModel, kv_capacity_tokens

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
ENGINE_LIMITS = {"TensorRT-LLM": "trtllm"}

# The model a row names -> its config: shipped with the project (profiling/data/configs)
# or copied with its source under bench/data/configs. Matched on the row's `model`.
# DeepSeek-R1 is projected with DeepSeek-V3's config: the same architecture (the config's
# `_source`: R1's config has the same keys and values but transformers_version);
# DeepSeek-V3.2 is not (see UNMODELLED).
MODELS = (
    (r"Llama[- ]?3\.1[- ]8B", "llama-3.1-8b"),
    (r"Llama[- ]?3\.3[- ]70B", "llama-3.3-70b"),
    (r"Llama[- ]?3\.1[- ]70B", "llama-3.1-70b"),
    (r"Llama[- ]?3\.1[- ]405B", "llama-3.1-405b"),
    (r"Llama[- ]?2[- ]70B", "llama-2-70b"),
    (r"Mixtral[- ]8x7B", "mixtral-8x7b"),
    (r"Qwen3[- ]32B", "qwen3-32b"),
    (r"Qwen3[- ]235B", "qwen3-235b-a22b"),
    (r"Qwen3[- ]30B[- ]A3B", "qwen3-30b-a3b"),
    (r"Qwen3[- ]Next[- ]80B", "qwen3-next-80b-a3b"),
    (r"DeepSeek[- ]?(?:V3|R1)(?![.\d])", "deepseek-v3"),
    (r"Kimi[- ]?K2", "kimi-k2"),
    (r"gpt-oss[- ]?20b", "gpt-oss-20b"),
    (r"gpt-oss[- ]?120b", "gpt-oss-120b"),
    (r"Llama[- ]?4[- ]Maverick", "llama-4-maverick"),
    (r"Llama[- ]?4[- ]Scout", "llama-4-scout"),
    (r"GLM[- ]?4\.5[- ]Air", "glm-4.5-air"),
    (r"Nemotron[- ]H[- ]56B", "nemotron-h-56b"),
)
# Architectures no config here stands for (said whatever else the row lacks).
UNMODELLED = (
    (
        r"DeepSeek[- ]?V3\.2",
        "DeepSeek-V3.2's sparse attention (DSA) has no config here: DeepSeek-V3's would "
        "cost its attention over the whole context",
    ),
)
# Notes of a row whose figure is weaker evidence (bench/data/README.md: reported apart, never
# tuned to).
WEAK = re.compile(
    r"inferred|unverified|unlabell?ed|presumed|approximate|low-quality|"
    r"preliminary|per blog context|with caution",
    re.I,
)
# An expert-parallel or attention-data-parallel layout, said in a row's notes.
EXPERT_LAYOUT = re.compile(
    r"--ep\b|\bEP\d+|\bEPLB\b|EP size|expert[- ]parallel|dp[- ]attention|"
    r"attention[_ ]dp|DP attention|wide-EP|DP\+EP",
    re.I,
)
# Of those, attention in data parallel over the row's group, the experts split over the
# same GPUs: the estimate's expert-parallel layout (`profiling.projection.expert_parallel`:
# each rank its own requests through the shared weights, 1/ep of the experts, all-to-all
# exchanges), taken with ep = the row's `tp`. Whether the group splits its experts by
# expert parallelism or by tensor parallelism within it (TensorRT-LLM's --ep ≤ --tp,
# SGLang's MoE without --enable-ep-moe), each rank reads 1/ep of the experts' bytes; the
# exchange is modelled as the all-to-all either way.
DP_ATTENTION = re.compile(
    r"enable[-_]dp[-_]attention|enable_attention_dp|\bDP attention\b|attention[_ ]dp", re.I
)
# A layout beyond one such group: several nodes' EP (EP32, EP72, wide-EP), load balancing.
EP_BEYOND = re.compile(r"\bEP(\d+)\b|wide-EP|\bEPLB\b|DP\+EP|multi-node", re.I)
# Sources whose MoE rows all ran in that layout, whether or not a row's notes say it, with
# where the source says so (the command its rows were run with).
DP_ATTENTION_SOURCES = {
    "https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/"
    "docs/source/performance/perf-overview.md": "perf-overview's 'For MoE models' command "
    "(trtllm-bench --tp $tp_size --pp $pp_size --ep $ep_size ...) with 'enable_attention_dp: "
    "true' in its llm_options.yml",
}
# Engines a clause of the notes may name: a layout said of another engine's run (a row
# whose notes describe its sibling's launch) is not the row's.
ENGINE_NAMES = {
    "TensorRT-LLM": r"TensorRT|TRT-LLM|trtllm",
    "vLLM": r"vLLM",
    "SGLang": r"SGLang|SGL_",
    "TGI": r"\bTGI\b",
    "LMDeploy": r"LMDeploy",
}
# A row whose `tp` its notes say the source does not state for its engine: projected at
# the row's `tp`, said in its layout.
PARALLEL_UNSTATED = re.compile(r"parallel config(?:uration)? not stated", re.I)
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
# The engine's token budget a step, where a row's launch command states it (vLLM's
# --max-num-batched-tokens): it replaces the engine default as the sequence limit does.
MAX_BATCHED_TOKENS_STATED = (re.compile(r"--max-num-batched-tokens[ =]([\d,]+)"),)


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


# A row's `weight_precision` (its first word) -> the format it names, as `--weights`
# names it, and the compute format of a checkpoint that ships in it
# (`profiling.model.sizing.Checkpoint.compute`): a row serving a quantized checkpoint as
# published is served as the checkpoint (its own bytes, scales included), one quantizing a
# 16-bit checkpoint at load in the format named.
# A stated format, the weight option it is where the checkpoint ships otherwise, and the
# checkpoint methods (profiling.model.sizing's) it names where the checkpoint ships in it.
STATED_FORMATS = (
    ("fp8", "fp8", ("fp8-block", "fp8")),
    ("bf16", "bf16", ()),
    ("fp16", "fp16", ()),
    ("mxfp4", None, ("mxfp4",)),  # only as a checkpoint ships it (gpt-oss)
    ("nvfp4", "fp4", ("nvfp4",)),
    ("fp4", "fp4", ("mxfp4", "nvfp4")),  # a column labelled FP4: the checkpoint's 4-bit float
)


def weights_precision(row: dict[str, Any], shapes: Shapes | None = None) -> tuple[str | None, str]:
    """The serving precision of the row's weights as the estimate names them (a
    `profiling.projection.precision` key; None: not published or not modelled), and how
    it was read. `shapes`: the row's model, whose checkpoint's own format serves a row
    that runs the checkpoint as published, or states no precision for a checkpoint that
    ships only quantized."""
    text = (row.get("weight_precision") or "").strip().lower()
    checkpoint = shapes.checkpoint if shapes is not None else None
    if not text:
        if checkpoint is None:
            return None, "not published"
        return serving_precision(shapes, ""), (
            f"not published: the checkpoint's own ({checkpoint.label}), as an engine "
            "serves a checkpoint that ships only quantized unless told otherwise"
        )
    for prefix, option, methods in STATED_FORMATS:
        if not text.startswith(prefix):
            continue
        if checkpoint is not None and checkpoint.method in methods:
            how = f"as published: the checkpoint's own ({checkpoint.label})"
            return serving_precision(shapes, ""), how
        if option is None:
            return None, f"{prefix} of a checkpoint that does not ship in it: not modelled"
        return WEIGHT_FORMATS[option], "as published"
    return None, "not modelled"


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


def own_clauses(row: dict[str, Any]) -> str:
    """The row's notes less the clauses that name only other engines than its own (a
    launch line of the sibling row another engine ran, quoted in both)."""
    own = engine_of(row)
    kept = []
    for clause in re.split(r"(?<=[.;])\s+", row.get("notes") or ""):
        named = {e for e, pattern in ENGINE_NAMES.items() if re.search(pattern, clause, re.I)}
        if not named or own in named:
            kept.append(clause)
    return " ".join(kept)


def expert_layout(row: dict[str, Any], notes: str) -> tuple[bool, str, list[str]]:
    """(whether the row runs attention in data parallel and the experts split over its
    group, where that is said, reasons its MoE layout cannot be projected)."""
    source = DP_ATTENTION_SOURCES.get(row.get("source_url") or "")
    if not row.get("moe") or not (source or EXPERT_LAYOUT.search(notes)):
        return False, "", []
    beyond = EP_BEYOND.search(notes)
    count = row.get("gpu_count") or 0
    if beyond and not (beyond.group(1) and int(beyond.group(1)) <= count):
        return (
            False,
            "",
            [
                f"MoE at a layout beyond one group of the row's GPUs ('{beyond.group(0)}' in "
                "notes: expert parallelism over several nodes or expert load balancing)"
            ],
        )
    found = DP_ATTENTION.search(notes)
    if found:
        return True, f"notes: '{found.group(0)}'", []
    if source:
        return True, f"source: {source}", []
    return (
        False,
        "",
        [
            "MoE at an expert-parallel layout with attention in tensor parallel, or one not "
            "stated (project() splits experts by tensor parallelism; the estimate's expert "
            "parallelism runs attention in data parallel)"
        ],
    )


def layout(row: dict[str, Any]) -> tuple[int, int, str, list[str], int]:
    """(tp, replicas, how it was read, reasons it cannot be projected, expert-parallel
    ranks per copy: 1 unless attention runs in data parallel over the group)."""
    reasons, how = [], "as published"
    count, tp, pp = row.get("gpu_count"), row.get("tp"), row.get("pp")
    replicas = row.get("replicas")
    notes = own_clauses(row)
    dp_attention, dp_from, ep_reasons = expert_layout(row, notes)
    reasons += ep_reasons
    if DISAGGREGATED.search(notes):
        reasons.append("prefill/decode disaggregated deployment not modelled by project()")
    if not count:
        reasons.append("no published GPU count")
        return 0, 0, how, reasons, 1
    if pp not in (None, 1):
        reasons.append(f"pipeline parallel {pp} not modelled by project()")
    if tp is None:
        if replicas and count % replicas == 0:
            tp, how = count // replicas, f"TP {count // replicas} read as gpu_count / replicas"
        else:
            reasons.append(f"layout not published (TP × replicas of the {count} GPUs unknown)")
            return 0, 0, how, reasons, 1
    if replicas is None:
        replicas = count // tp
    if tp * replicas != count:
        reasons.append(f"TP {tp} × {replicas} replicas ≠ {count} GPUs")
    unstated = PARALLEL_UNSTATED.search(notes)
    if unstated:
        how = f"TP {tp} as the row's `tp` gives it (notes: '{unstated.group(0)}')"
    ep = 1
    if dp_attention and tp > 1:
        ep = tp
        how = (
            f"{tp} GPUs: attention in data parallel over {tp} ranks, the experts split "
            f"over them, read as the estimate's DP={tp} attention + EP={tp} ({dp_from})"
        )
    return tp, replicas, how, reasons, ep


def project_expert_parallel(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    isl: int,
    osl: int,
    concurrency: int,
    gpu: GPU,
    ep: int,
    *,
    kv_dtype: str,
    engine: EngineLimits,
    rate: float,
    requests: int | None,
    replicas: int,
    lined_up: bool = False,
) -> tuple[Served | None, float, list[str]]:
    """The row served by `replicas` copies of `ep` expert-parallel ranks, each rank an
    engine of its own set up as `profiling.projection.search.engine` sets up an
    expert-parallel configuration (`ExpertParallel` over a one-device step; its memory:
    the shared weights whole and 1/ep of the experts, the rest the KV cache of its own
    requests) with the row's engine limits per rank, the load split evenly over the ranks,
    as `project()` serves a tensor-parallel group. (served, output tokens/s of the whole
    deployment, notes)."""
    step = ExpertParallel(StepModel(shapes, calibration, dtype, kv_dtype, 1, gpu), ep)
    held = step.weights_held()
    usable = engine.usable_bytes(gpu.memory_bytes, activation_bytes(shapes, dtype, 1), held)
    capacity = kv_capacity_tokens(shapes, dtype, kv_dtype, gpu, DeviceMemory(1, usable, held),
                                  isl + osl)  # fmt: skip
    engines = ep * replicas
    notes = [f"{replicas} × {ep} expert-parallel ranks, each its own engine; {engine.note()}"]
    try:
        served = simulate(step, Requests(  # type: ignore[arg-type]
            isl, osl,
            concurrency=0 if rate else math.ceil(concurrency / engines), rate=rate / engines,
            requests=math.ceil(requests / engines) if requests else None, kv_tokens=capacity,
            max_batched_tokens=engine.max_batched_tokens, max_seqs=engine.max_seqs,
            lined_up=lined_up,
        ))  # fmt: skip
    except ValueError as exc:
        return None, 0.0, notes + [f"not served by the simulated engine ({exc})"]
    return served, served.output_tokens_per_second * engines, notes


# -- one row ---------------------------------------------------------------------------

_SHAPES: dict[str, Shapes] = {}


def _shapes(name: str | None, configs: dict[str, dict[str, Any]]) -> Shapes | None:
    """The model's shapes (sized once per config in a run), None without a config."""
    if name is None or name not in configs:
        return None
    if name not in _SHAPES:
        _SHAPES[name] = Shapes.from_config(configs[name])
    return _SHAPES[name]


def _blank(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "family": row.get("family"), "mode": row.get("mode"),
        "engine": engine_of(row), "weak": weak_reason(row), "expressible": False,
        "reasons": [], "setup": {}, "metrics": {}, "notes": [], "published_gpu": row.get("gpu"),
        "features": [],
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
    tp, replicas, how, layout_reasons, ep = layout(row)
    reasons += layout_reasons
    gpu = resolve_gpu(row.get("gpu"))
    if not row.get("gpu"):
        reasons.append("GPU not named")
    elif gpu is None:
        reasons.append(f"GPU not in the catalog: {row['gpu']}")
    model = row.get("model") or ""
    unmodelled = [why for pattern, why in UNMODELLED if re.search(pattern, model, re.I)]
    reasons += unmodelled
    name = None if unmodelled else next((n for p, n in MODELS if re.search(p, model, re.I)), None)
    try:
        shapes = _shapes(name, configs)
    except ValueError as exc:  # SizingError: a config transformers' classes cannot size
        shapes = None
        reasons.append(f"config {name} cannot be sized: {exc}")
    (dtype, dtype_from), kv = weights_precision(row, shapes), kv_precision(row)
    if dtype is None:
        reasons.append(
            "weight precision not published"
            if not row.get("weight_precision")
            else f"weight precision {row['weight_precision']!r} not modelled ({dtype_from})"
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
    if not reasons and shapes is None:
        reasons.append(f"no config found for {row.get('model')}")
    if reasons:
        return out

    assert shapes is not None and name is not None
    assert gpu is not None and dtype is not None and isl is not None and osl is not None
    isl, osl = int(round(isl)), int(round(osl))
    calibration = assumed(gpu, dtype, shapes.num_layers, *(efficiencies or ()))
    text = (row.get("notes") or "") + " " + (row.get("quote") or "")
    static = bool(STATIC_BATCH.search(row.get("notes") or ""))
    offline = mode == "offline" and not SERVER_RUN.search(text)
    engine = engine_limits(gpu, ENGINE_LIMITS.get(out["engine"], "vllm"), offline)
    seqs_from = f"{engine.name}'s default"
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
        found = stated(MAX_BATCHED_TOKENS_STATED, text)
        if found:
            engine = replace(engine, max_batched_tokens=found[0])
            seqs_from += f"; notes: '{found[1]}'"
        found = stated(REQUESTS, text)
        if found:
            requests, requests_from = found[0], f"notes: '{found[1]}'"
    out["setup"] = {
        "config": name, "gpu": gpu.key, "dtype": dtype, "dtype_from": dtype_from,
        "kv_dtype": kv or "default", "kv_from": kv_read_from(row),
        "tp": tp, "ep": ep, "replicas": replicas, "layout": how, "input_tokens": isl,
        "output_tokens": osl, "engine_limits": engine.note(), "max_seqs": engine.max_seqs,
        "max_seqs_from": seqs_from, "max_batched_tokens": engine.max_batched_tokens,
        "variable_lengths": variable, "calibration": calibration.note,
    }  # fmt: skip
    out["expressible"] = True
    # What of the model's architecture this row exercises: a band covers only those.
    out["features"] = validation.features(shapes)
    rate, concurrency, lined_up = 0.0, 0, False
    if mode == "online-concurrency":
        # A benchmark client at a concurrency limit sends its first `concurrency`
        # requests at once: the start-up wave is in the printed means and throughput.
        concurrency, lined_up = row["concurrency"], True
        out["setup"]["served_by"] = f"project(concurrency={concurrency}, every user at t=0)"
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
    if ep > 1:
        served, throughput, ep_notes = project_expert_parallel(
            shapes, calibration, dtype, isl, osl, concurrency, gpu, ep, kv_dtype=kv,
            engine=engine, rate=rate, requests=requests, replicas=replicas, lined_up=lined_up,
        )  # fmt: skip
        out["setup"]["served_by"] += f", {ep} expert-parallel ranks"
        why_not = "" if served is not None else "; ".join(ep_notes)
    else:
        traffic = Traffic(isl, osl, concurrency, rate=rate, requests=requests, lined_up=lined_up)
        deployment = Deployment(gpu, tp, kv_dtype=kv, engine=engine, replicas=replicas)
        projection = project(shapes, calibration, dtype, traffic, deployment)
        served, throughput = projection.served, projection.decode_tokens_per_second
        why_not = "" if served is not None else "; ".join(projection.notes)
    if served is not None:
        out["setup"]["max_running"] = served.max_running
        out["setup"]["mean_batch"] = round(served.mean_batch, 1)
        itl_kind = "tpot" if "tpot" in (row.get("itl_stat") or "").lower() else "itl"
        per_gpu = row.get("throughput_scope") == "per_gpu"
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
