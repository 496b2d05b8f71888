"""The conversation section of an estimate: the workload's synthetic conversations replayed
through the prefix cache at the deployment's KV capacity, the host tier's projection
and its advice, as JSON and as text.

The synthetic conversation reuses the workload's figures
(`profiling.conversation_options`): the shared prefix is the system prompt, each turn
adds `prompt_tokens − shared_prefix_tokens` of user message and `output_tokens` of
reply. Enough conversations are made for every user to hold several in turn.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from profiling import serde
from profiling.caching.hit_check import HitCheck
from profiling.caching.offload import host_tier_advice
from profiling.config import ConfigError, Hardware, Workload
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection.calibration import Calibration, assumed
from profiling.projection.conversation_serving import Setup, prepare, project_conversations
from profiling.projection.conversation_workloads import (
    MAX_TURNS,
    ChatRecord,
    Conversation,
    SyntheticSpec,
    read_conversation_file,
    synthetic,
    tokenize_conversations,
)
from profiling.projection.engines import DEFAULT_ENGINE, NAMES, limits
from profiling.projection.estimate import Deployment
from profiling.projection.host_tier import OFFLOAD_CPU_REASON, host_bytes_of, project_host_tier
from profiling.projection.step_time import StepModel
from profiling.technique_kit.advice_results import Recommendation
from profiling.units import ms, size

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
CONVERSATIONS_PER_USER = 8


def synthetic_conversations(workload: Workload) -> list[Conversation]:
    """The workload's conversations (see the module docstring)."""
    turns = workload.conversation_turns or 1
    count = max(1, min(CONVERSATIONS_PER_USER * workload.concurrency, MAX_TURNS // turns))
    spec = SyntheticSpec(
        conversations=count,
        turns=turns,
        user_tokens=max(1, workload.prompt_tokens - workload.shared_prefix_tokens),
        output_tokens=workload.output_tokens,
        system_tokens=workload.shared_prefix_tokens,
        think_seconds=workload.conversation_think_s or 0.0,
    )
    return synthetic(spec)


def file_conversations(path: str, model_dir: Path, workload: Workload) -> list[Conversation]:
    """The conversations of a JSON Lines file, as the ids of the model's own tokenizer
    (from `model_dir`, local files only, no remote code); a ConfigError where the file or
    the tokenizer cannot be used. A turn whose reply the file lacks gets `output_tokens`."""
    _, records = read_conversation_file(path)
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{path}: conversations are tokenized with the model's own tokenizer, and "
            f"{model_dir} holds none: give the model as a local directory with its tokenizer"
        )
    # heavy: transformers, kept out of the site's imports
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            model_dir, trust_remote_code=False, local_files_only=True
        )
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the tokenizer in {model_dir}: {exc}") from None
    return tokenized(records, tokenizer, workload)


def tokenized(records: list[ChatRecord], tokenizer: Any, workload: Workload) -> list[Conversation]:
    """`records` as the ids of the model's `tokenizer` (a transformers tokenizer), each
    message without special tokens; the workload's think time, and its `output_tokens`
    for a reply the file lacks. The CLI's file and a job's uploaded one both come here."""

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    think = workload.conversation_think_s or 0.0
    return tokenize_conversations(records, encode, workload.output_tokens, think)


def file_source(name: str) -> str:
    """Where a file's conversations came from, as the section says it."""
    return f"your file {name}"


def synthetic_source(workload: Workload) -> str:
    turns = workload.conversation_turns or 1
    return f"synthetic: {turns} turns per conversation, from the workload's figures"


def engine_check(device: str | None) -> str:
    """What the engine measures of the tier on `device` (None: an estimate, no device)."""
    if device is None:
        return "not measured: an estimate runs no engine"
    if not device.startswith("cuda"):
        return OFFLOAD_CPU_REASON
    return "not measured on the engine yet: the projection stands alone"


def estimate_conversations(
    shapes: Shapes, gpu: GPU, gpu_count: int, dtype: str, workload: Workload, hw: Hardware,
    device: str | None = None, measured_link: float | None = None,
    conversations: list[Conversation] | None = None, rates: Calibration | None = None,
    source: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The conversation section's JSON, for one engine copy of the deployment's layout:
    `conversations` (a file's, `source` saying which), or the workload's synthetic ones;
    `rates` measured on `gpu`, else its datasheet's (estimated)."""
    layout = hw.layout() or (gpu_count, 1, 1)
    tp, replicas = layout[0], layout[2]
    users = math.ceil(workload.concurrency / replicas)
    rates = rates or assumed(gpu, dtype, shapes.num_layers)
    engine = limits(gpu, hw.serving_engine, tp=tp)
    setup = Setup(users, Deployment(gpu, tp, hw.kv_dtype, engine), workload.ttft_ms,
                  workload.tpot_ms)  # fmt: skip
    if not conversations:
        conversations, source = synthetic_conversations(workload), synthetic_source(workload)
    p = prepare(shapes, rates, dtype, conversations, setup)
    served = project_conversations(shapes, rates, dtype, conversations, setup, prepared=p)
    host = host_bytes_of(hw.host_memory_gib)
    step = StepModel(shapes, rates, dtype, hw.kv_dtype, tp, gpu)
    tier = project_host_tier(p, step, setup, host, measured_link)
    advice = host_tier_advice(tier, hw.serving_engine, tp)
    return {
        "basis": rates.basis,
        "source": source or "your conversations",
        "users_per_copy": users,
        "tensor_parallel": tp,
        "dtype": dtype,  # the weights' precision served (the KV's where `kv_cache` is "auto")
        "kv_cache": hw.kv_cache,
        "serving_engine": hw.serving_engine,
        "served": served.to_dict(),
        "host_tier": tier.to_dict(),
        "advice": {"recommended": isinstance(advice, Recommendation), **serde.to_dict(advice)},
        "engine_check": engine_check(device),
    }


def render_conversations(section: dict[str, Any]) -> list[str]:
    """The section as the estimate's text (a worker's without a GPU named: its hit check
    alone)."""
    if "served" not in section:
        head = f"Conversations (from {section.get('source', 'the workload')})"
        return ["", head, *render_hit_check(section), *render_engine(section)]
    served, tier, advice = section["served"], section["host_tier"], section["advice"]
    summary = served["summary"]
    capacity = served["capacity_tokens"]
    held = f"{capacity:,} tokens of KV" if capacity is not None else "an unlimited cache"
    lines = [
        "",
        f"Conversations ({summary['conversations']:,} conversations, {summary['turns']:,} "
        f"turns, {section['users_per_copy']} users per engine copy on "
        f"{NAMES[section.get('serving_engine', DEFAULT_ENGINE)]}'s limits; {section['basis']})",
        f"  from {section.get('source', 'the workload')}",
        f"  the mean turn: {summary['mean_prompt_tokens']:,.0f} prompt tokens (its history "
        f"included), {summary['mean_output_tokens']:,.0f} reply tokens",
        f"  prefix cache: {held} on the GPUs → hit rate {served['hit_rate']:.0%} of prompt "
        f"tokens (room for everything: {served['reusable_rate']:.0%}), "
        f"{served['prefill_tokens_saved']:,} prefill tokens saved",
        f"  TTFT {ms(served['cold']['ttft_seconds'])} without the cache → "
        f"{ms(served['warm']['ttft_seconds'])} with its hits; throughput "
        f"{served['cold']['decode_tokens_per_second']:,.0f} → "
        f"{served['warm']['decode_tokens_per_second']:,.0f} tokens/s",
        f"  host tier of {size(tier['host_bytes'])} over {tier['link']['name']} "
        f"({tier['link']['bytes_per_second'] / 1e9:,.0f} GB/s, {tier['link']['basis']}): "
        f"hit rate {tier['gpu_hit_rate']:.0%} → {tier['tier_hit_rate']:.0%}",
    ]
    if advice["recommended"]:
        lines.append(f"  offload: recommended, {advice['setting']}")
    else:
        lines.append(f"  offload: not recommended, {advice['why']}")
    return [*lines, *render_hit_check(section), *render_engine(section)]


def render_engine(section: dict[str, Any]) -> list[str]:
    """What the engine measured of the conversations: its prefix cache, then the host
    tier's run or why there is none (`engine_offload`, where the engine ran)."""
    lines = [f"  on the engine: {section['engine_check']}"]
    if section.get("engine_offload"):
        lines.append(f"  offload on the engine: {section['engine_offload']}")
    return lines


def hit_check_line(section: dict[str, Any]) -> str | None:
    """The hit check in one line (`profiling.caching.hit_check`), None without one."""
    data = section.get("hit_check")
    if not data:
        return None

    check = HitCheck.from_dict(data)
    if not check.points:
        return f"not judged: {check.interval}"
    at = "; ".join(f"{p.cached_tokens:,}+{p.new_tokens:,} tokens {ms(p.warm_ttft_seconds.median)}"
                   f" vs {ms(p.projected.seconds)} {p.verdict}" for p in check.points)  # fmt: skip
    return f"{check.summary()} (cached+new: measured vs projected: {at})"


def render_hit_check(section: dict[str, Any]) -> list[str]:
    line = hit_check_line(section)
    if line is None:
        return []
    interval = section["hit_check"]["interval"]
    return [f"  hit check: {line}", f"    projected interval: {interval}"]
