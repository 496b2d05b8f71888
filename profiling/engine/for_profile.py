"""The engine profile as the runner calls it: the user's config and loaded model → Target."""

from __future__ import annotations

from typing import Any

from profiling.config import ProfileConfig
from profiling.engine.experiment import Progress, Target, run_engine
from profiling.engine.plan import CHECK_TOKENS, EVAL_WINDOW, make_plan
from profiling.engine.results import EngineResult
from profiling.model.shapes import Shapes

MIN_MODEL_LEN = 1024  # room for the evaluation windows and the greedy checks


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
    from profiling.model.loading import resolve
    from profiling.speculative.experiment import default_draft_name

    name = config.draft or default_draft_name(target_name)
    if not name:
        return None
    source = resolve(config.replace(model=name, source="auto"))
    return str(source.path) if source.path is not None else source.repo_id


def max_model_len(config: ProfileConfig, positions: int | None) -> int:
    need = max(config.workload.context_tokens, MIN_MODEL_LEN, EVAL_WINDOW + CHECK_TOKENS)
    return min(need, positions) if positions else need


def tensor_parallel_size(config: ProfileConfig, device: str) -> int:
    if config.tp_measure is not None:
        return config.tp_measure
    if device.startswith("cuda"):
        import torch

        return 2 if torch.cuda.device_count() >= 2 else 0
    return 0


def run_for_profile(
    config: ProfileConfig,
    loaded: Any,
    device: str,
    dtype: str,
    progress: Progress,
    artifacts: dict[str, str] | None = None,
) -> EngineResult:
    """`artifacts`: what the experiments left for the engine ("gptq-int4": a checkpoint)."""
    from profiling.model.prompts import load_eval_text, load_prompts

    model = engine_model(loaded)
    w = config.workload
    if model is None:
        return _failed(config, dtype, "a config-only model has random weights and no "
                       "tokenizer; the engine serves real checkpoints only")  # fmt: skip
    targets = {k: v for k, v in (("ttft", w.ttft_ms), ("tpot", w.tpot_ms)) if v}
    shapes = Shapes.from_config(loaded.model.config.to_dict())
    eval_ids = list(loaded.tokenizer(load_eval_text().text)["input_ids"])
    plan = make_plan(
        w.concurrency, config.quick, config.spec_ks or None, config.prompt_lookup,
        draft_model(config, loaded.info.name), tensor_parallel_size(config, device),
    )  # fmt: skip
    target = Target(
        model=model, device=device, dtype=dtype, prompt_tokens=w.prompt_tokens,
        output_tokens=w.output_tokens, shared_prefix_tokens=w.shared_prefix_tokens,
        concurrency=w.concurrency,
        max_model_len=max_model_len(config, loaded.info.max_position_embeddings),
        goodput=targets or None, prompt_sample=list(config.prompt_sample),
        check_prompts=load_prompts().prompts, eval_ids=eval_ids[: plan.eval_tokens],
        gptq_dir=(artifacts or {}).get("gptq-int4"), head_dim=shapes.head_dim,
    )  # fmt: skip
    try:
        return run_engine(target, plan, progress)
    except Exception as exc:  # the eager profile stands whatever the engine part does
        return _failed(config, dtype, repr(exc))


def _failed(config: ProfileConfig, dtype: str, why: str) -> EngineResult:
    return EngineResult(
        name=config.engine, version="", command="", serve_command="", dtype=dtype,
        max_model_len=0, failures=[f"engine failed: {why}"],
    )  # fmt: skip
