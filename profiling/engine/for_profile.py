"""The engine profile as the runner calls it: the user's config and loaded model → Target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from profiling.config import ProfileConfig
from profiling.engine.experiment import Progress, Target, run_engine
from profiling.engine.plan import CHECK_TOKENS, EVAL_WINDOW, make_plan
from profiling.engine.results import EngineResult
from profiling.model.loading import resolve
from profiling.model.prompts import load_eval_text, load_prompts
from profiling.model.shapes import Shapes
from profiling.projection.conversation_workloads import Conversation
from profiling.projection.host_tier import host_bytes_of
from profiling.speculative.experiment import default_draft_name

MIN_MODEL_LEN = 1024  # room for the evaluation windows and the greedy checks
# Turns of the conversations replayed on the engine (each a request with its reply):
# the first conversations, whole, up to this many.
QUICK_TURNS, FULL_TURNS = 64, 256


def engine_model(loaded: Any) -> str | None:
    """What vLLM loads: the directory the weights came from, or the Hub id; None for a
    config-only model (random weights: the engine needs real ones and a tokenizer)."""
    if loaded.info.config_only or loaded.tokenizer is None:
        return None
    if loaded.path is not None:
        return str(loaded.path)
    return loaded.source.repo_id


def draft_model(config: ProfileConfig, target_name: str) -> str | None:
    """The draft the engine speculates with: the user's, else the family's default."""
    name = config.draft or default_draft_name(target_name)
    if not name:
        return None
    source = resolve(config.replace(model=name, source="auto"))
    return str(source.path) if source.path is not None else source.repo_id


def max_model_len(
    config: ProfileConfig, positions: int | None, conversations: Sequence[Conversation] = ()
) -> int:
    """Room for the workload, the checks and the longest conversation turn replayed."""
    longest = max((t.prompt_tokens + t.output_tokens for c in conversations for t in c.turns),
                  default=0)  # fmt: skip
    need = max(config.workload.context_tokens, MIN_MODEL_LEN, EVAL_WINDOW + CHECK_TOKENS, longest)
    return min(need, positions) if positions else need


def replayed_conversations(conversations: list[Conversation], quick: bool) -> list[Conversation]:
    """The first conversations, whole, up to QUICK_TURNS or FULL_TURNS turns (at least one)."""
    limit, out, turns = QUICK_TURNS if quick else FULL_TURNS, [], 0
    for conversation in conversations:
        if out and turns + len(conversation.turns) > limit:
            break
        out.append(conversation)
        turns += len(conversation.turns)
    return out


def tensor_parallel_size(config: ProfileConfig, device: str) -> int:
    if config.tp_measure is not None:
        return config.tp_measure
    if device.startswith("cuda"):
        return 2 if torch.cuda.device_count() >= 2 else 0
    return 0


def offload_bytes(
    config: ProfileConfig, conversations: list[Conversation], kv_bytes_per_token: int, device: str
) -> int | None:
    """The host tier the engine measures on a GPU (None elsewhere): the host tier's
    projected size (the host memory named, else this worker's, as
    `profiling.projection.host_tier` takes it), cut to what the conversations can fill
    (every token they hold, at the engine's KV bytes per token)."""
    if not device.startswith("cuda") or not conversations or kv_bytes_per_token <= 0:
        return None

    host = host_bytes_of(config.hardware.host_memory_gib)
    return min(host, sum(len(c.tokens) for c in conversations) * kv_bytes_per_token)


def run_for_profile(
    config: ProfileConfig,
    loaded: Any,
    device: str,
    dtype: str,
    progress: Progress,
    artifacts: dict[str, str] | None = None,
    conversations: list[Conversation] | None = None,
) -> EngineResult:
    """`artifacts`: what the experiments left for the engine ("gptq-int4": a checkpoint);
    `conversations`: the profile's, replayed turn by turn on the engine (the first of
    them, `replayed_conversations`)."""
    model = engine_model(loaded)
    w = config.workload
    if model is None:
        return _failed(config, dtype, "a config-only model has random weights and no "
                       "tokenizer; the engine serves real checkpoints only")  # fmt: skip
    targets = {k: v for k, v in (("ttft", w.ttft_ms), ("tpot", w.tpot_ms)) if v}
    shapes = Shapes.from_config(loaded.model.config.to_dict())
    chats = replayed_conversations(conversations or [], config.quick)
    eval_ids = list(loaded.tokenizer(load_eval_text().text)["input_ids"])
    plan = make_plan(
        w.concurrency, config.quick, config.spec_ks or None, config.prompt_lookup,
        draft_model(config, loaded.info.name), tensor_parallel_size(config, device),
    )  # fmt: skip
    target = Target(
        model=model, device=device, dtype=dtype, prompt_tokens=w.prompt_tokens,
        output_tokens=w.output_tokens, shared_prefix_tokens=w.shared_prefix_tokens,
        concurrency=w.concurrency,
        max_model_len=max_model_len(config, loaded.info.max_position_embeddings, chats),
        goodput=targets or None, prompt_sample=list(config.prompt_sample),
        check_prompts=load_prompts().prompts, eval_ids=eval_ids[: plan.eval_tokens],
        gptq_dir=(artifacts or {}).get("gptq-int4"), head_dim=shapes.head_dim,
        conversations=chats, vocab_size=shapes.vocab_size,
        kv_bytes_per_token=shapes.kv_bytes_per_token(dtype),
    )  # fmt: skip
    target.offload_bytes = offload_bytes(
        config, target.conversations, target.kv_bytes_per_token, device
    )
    try:
        return run_engine(target, plan, progress)
    except Exception as exc:  # the eager profile stands whatever the engine part does
        return _failed(config, dtype, repr(exc))


def _failed(config: ProfileConfig, dtype: str, why: str) -> EngineResult:
    return EngineResult(
        name=config.engine, version="", command="", serve_command="", dtype=dtype,
        max_model_len=0, failures=[f"engine failed: {why}"],
    )  # fmt: skip
