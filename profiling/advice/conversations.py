"""A profiled job's conversations: the estimate's conversation section on the job's
deployment, kept in the profile, and the host tier's outcome among the advice.

The section is `profiling.caching.conversations`'s, so the report and `estimate` show
the same figures; on the GPU the job ran on, the profile's measured rates and the
worker's measured host link stand in for the datasheet's.
"""

from __future__ import annotations

from typing import Any

from profiling import serde
from profiling.advice.deployments import rank
from profiling.advice_kit.advice_results import Advice, Recommendation
from profiling.caching.conversations import (
    engine_check,
    estimate_conversations,
    file_source,
    synthetic_conversations,
    synthetic_source,
    tokenized,
)
from profiling.config import ConfigError, ProfileConfig, Workload
from profiling.measure.hardware import GPU, lookup
from profiling.profile import Profile
from profiling.projection.calibration import calibrate
from profiling.projection.conversation_serving import prepare
from profiling.projection.conversations import Conversation, parse_conversations
from profiling.projection.step_time import StepModel


def attach_all(
    profile: Profile, local_gpu: GPU | None, link: float | None, loaded: Any, device: str,
    clock: Any, file_text: str = "",
) -> None:  # fmt: skip
    """Everything a profile of conversations gets once its measurements are done: the
    projected section, the hit check measured on the worker, the engine's replay."""
    attach_conversations(profile, local_gpu, link, file_text=file_text,
                         tokenizer=loaded.tokenizer)  # fmt: skip
    attach_hit_check(profile, loaded, device, clock, file_text=file_text)
    attach_engine_replay(profile, device)


def attach_conversations(
    profile: Profile, local_gpu: GPU | None, measured_link: float | None = None,
    file_text: str = "", tokenizer: Any = None,
) -> None:  # fmt: skip
    """Set `profile.conversations` for a workload of conversations (the user's file,
    `file_text`, tokenized with the model's `tokenizer` as `estimate --conversations`
    does; else the job's turns and think time), on the deployment's GPU (the one named,
    else the one profiled: its measured rates and host link where it is that one, in the
    dtype measured), and put the host tier among the advice's recommendations where it
    is one. A workload with neither is left alone; what cannot be projected becomes a
    warning, never a failed run."""
    config = profile.config
    workload, hw = config.workload, config.hardware
    if not file_text and (workload.conversation_turns or 1) <= 1:
        return
    shapes, env = profile.model.shapes, profile.environment
    gpu = lookup(hw.gpu_kind) if hw.gpu_kind else local_gpu
    if shapes is None or gpu is None:
        missing = "the model's shapes were not read" if shapes is None else "no GPU was named"
        profile.warnings.append(f"the conversations were not replayed through the prefix "
                                f"cache: {missing}, and its capacity is the GPU's KV "
                                "memory")  # fmt: skip
        return
    dtype = hw.serving_dtype(env.dtype if env.dtype in ("bfloat16", "float16") else "bfloat16")
    profiled = local_gpu is not None and gpu.key == local_gpu.key and dtype == env.dtype
    try:
        given, source = _from_file(file_text, config.conversations_name, tokenizer, workload)
        rates = calibrate(shapes, profile, env.device_name) if profiled else None
        profile.conversations = estimate_conversations(
            shapes, gpu, hw.gpu_count, dtype, workload, hw, device=env.device,
            measured_link=measured_link if profiled else None, rates=rates,
            conversations=given, source=source,
        )  # fmt: skip
    except (ConfigError, ValueError, ZeroDivisionError) as exc:
        profile.warnings.append(f"the conversations could not be projected: {exc}")
        return
    if profile.advice is not None and profile.conversations["advice"]["recommended"]:
        add_to_advice(profile.advice, serde.from_dict(Recommendation,
                                                      profile.conversations["advice"]))  # fmt: skip


def attach_hit_check(profile: Profile, loaded: Any, device: str, clock: Any,
                     file_text: str = "") -> None:  # fmt: skip
    """Measure, with the `loaded` model (`profiling.model.loading.Loaded`, back from
    every experiment and the engine) on this worker's `device`, the warm TTFT at a few
    of the conversations' hit positions against the projection fitted on this device
    (`profiling.caching.hit_check`), into the conversation section's `hit_check`. The
    check needs no deployment GPU: without one (no section), the section holds the
    check alone, the hits replayed at an unlimited cache."""
    from profiling.caching.hit_check import Subject, error_range, run_hit_check

    config, shapes, env = profile.config, profile.model.shapes, profile.environment
    if shapes is None or (not file_text and (config.workload.conversation_turns or 1) <= 1):
        return
    section = profile.conversations
    try:
        given, source = _from_file(file_text, config.conversations_name, loaded.tokenizer,
                                   config.workload)  # fmt: skip
        conversations = given or synthetic_conversations(config.workload)
        rates = calibrate(shapes, profile, env.device_name)
        users = section["users_per_copy"] if section else config.workload.concurrency
        prepared = prepare(shapes, rates, env.dtype, conversations, users)
        capacity = section["served"]["capacity_tokens"] if section else None
        subject = Subject(loaded.model, device, env.device_name or device, clock,
                          shapes.vocab_size, loaded.info.max_position_embeddings,
                          config.quick)  # fmt: skip
        check = run_hit_check(subject, StepModel(shapes, rates, env.dtype),
                              error_range(shapes, profile), conversations, prepared.workload,
                              capacity, _hit_note(capacity, rates.note))  # fmt: skip
    except (ConfigError, ValueError, ZeroDivisionError, RuntimeError) as exc:
        profile.warnings.append(f"the hit check could not run: {exc}")
        return
    if section is None:
        source = source or synthetic_source(config.workload)
        section = profile.conversations = {"source": source, "engine_check": engine_check(device)}
    section["hit_check"] = check.to_dict()


def profile_conversations(config: ProfileConfig, tokenizer: Any) -> list[Conversation] | None:
    """The conversations a profile replays (the user's file, tokenized with the model's
    `tokenizer`, else the workload's synthetic ones), or None for a workload without
    turns or a file that cannot be read (the section says why)."""
    if not config.conversations and (config.workload.conversation_turns or 1) <= 1:
        return None
    try:
        given, _ = _from_file(config.conversations, config.conversations_name, tokenizer,
                              config.workload)  # fmt: skip
    except (ConfigError, ValueError):
        return None
    return given or synthetic_conversations(config.workload)


def attach_engine_replay(profile: Profile, device: str) -> None:
    """The engine's replay of the conversations (`profiling.engine.conversations`, in the
    engine section) into the conversation section: its figures as `engine_replay`, its
    lines as `engine_check` and `engine_offload`. A section that is not there yet (no
    GPU named) is made to hold it."""
    engine = profile.engine
    chats = engine.conversations if engine is not None else None
    if chats is None:
        return
    section = profile.conversations
    if section is None:
        config = profile.config
        source = (file_source(config.conversations_name or "of conversations")
                  if config.conversations_name else synthetic_source(config.workload))  # fmt: skip
        section = profile.conversations = {"source": source, "engine_check": engine_check(device)}
    section["engine_replay"] = chats.to_dict()
    section["engine_check"] = f"{engine.name} {engine.version}, {chats.reference_line()}"
    section["engine_offload"] = chats.offload_line()


def _hit_note(capacity: int | None, calibration: str) -> str:
    where = (f"at the section's KV capacity of {capacity:,} tokens" if capacity is not None
             else "at an unlimited cache (no GPU named, so no KV capacity to replay at; "
                  "the check times the hits on this device, not its room)")  # fmt: skip
    return (
        f"hit positions from the conversations replayed {where}, turns paced by this "
        f"device's calibration; projected by it ({calibration})"
    )


def _from_file(
    text: str, name: str, tokenizer: Any, workload: Workload
) -> tuple[list[Conversation] | None, str | None]:
    """(the file's conversations, where they came from), or (None, None) without one."""
    if not text:
        return None, None
    if tokenizer is None:
        raise ConfigError("the model has no tokenizer to count the conversations' tokens with")
    given = tokenized(parse_conversations(text), tokenizer, workload)
    return given, file_source(name or "of conversations")


def add_to_advice(advice: Advice, recommendation: Recommendation) -> None:
    """The tier among the advice's recommendations, ranked as the others are; the
    advice's one line names it where it becomes the first thing to do. (Where it is not
    recommended, the conversations section says why: the advice's list of techniques set
    aside is for the techniques the job measured or estimated for its workload.)"""
    advice.recommendations = rank([*advice.recommendations, recommendation], advice.bottleneck)
    if advice.first is recommendation:
        head = advice.summary.split(" First: ")[0].split(" No technique")[0]
        effect, basis = recommendation.expected_effect.text, recommendation.basis
        advice.summary = f"{head} First: {recommendation.setting} ({effect}; {basis})."
