"""A profiled job's conversations: the estimate's conversation section on the job's
deployment, kept in the profile, and the host tier's outcome among the advice.

The section is `profiling.caching.conversation_estimate`'s, so the report and `estimate` show
the same figures; on the GPU the job ran on, the profile's measured rates and the
worker's measured host link stand in for the datasheet's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling import serde
from profiling.advice.ranking import rank
from profiling.caching.conversation_estimate import (
    engine_check,
    estimate_conversations,
    file_source,
    synthetic_conversations,
    synthetic_source,
    tokenized,
)
from profiling.caching.hit_check import Subject, error_range, run_hit_check
from profiling.config import ConfigError, Workload
from profiling.measure.hardware import GPU, lookup
from profiling.profile import Profile
from profiling.projection.calibration import calibrate
from profiling.projection.conversation_serving import Setup, prepare
from profiling.projection.conversation_workloads import Conversation, parse_conversations
from profiling.projection.step_time import StepModel
from profiling.technique_kit.advice_results import Advice, Recommendation


@dataclass
class Chats:
    """A profile's conversations, read once: the user's file tokenized with the model's
    tokenizer, else the workload's synthetic ones, and where they came from."""

    conversations: list[Conversation]
    source: str


def read_chats(text: str, name: str, tokenizer: Any, workload: Workload) -> Chats:
    """The file's conversations (`text`, tokenized as `estimate --conversations` does),
    else the workload's synthetic ones; a ConfigError or ValueError where the file or the
    tokenizer cannot be used."""
    if not text:
        return Chats(synthetic_conversations(workload), synthetic_source(workload))
    if tokenizer is None:
        raise ConfigError("the model has no tokenizer to count the conversations' tokens with")
    given = tokenized(parse_conversations(text), tokenizer, workload)
    return Chats(given, file_source(name or "of conversations"))


def profile_chats(profile: Profile, tokenizer: Any) -> Chats | None:
    """The profile's conversations, read once for the engine, the section and the hit
    check; None for a workload without them, or (with a warning) a file that cannot be
    read."""
    config = profile.config
    if not config.conversations and (config.workload.conversation_turns or 1) <= 1:
        return None
    try:
        return read_chats(config.conversations, config.conversations_name, tokenizer,
                          config.workload)  # fmt: skip
    except (ConfigError, ValueError) as exc:
        profile.warnings.append(f"the conversations could not be read: {exc}")
        return None


def attach_all(
    profile: Profile, local_gpu: GPU | None, link: float | None, loaded: Any, device: str,
    clock: Any, chats: Chats,
) -> None:  # fmt: skip
    """Everything a profile of conversations gets once its measurements are done: the
    projected section, the hit check measured on the worker, the engine's replay."""
    attach_conversations(profile, local_gpu, link, chats)
    attach_hit_check(profile, loaded, device, clock, chats)
    attach_engine_replay(profile, device, chats.source)


def attach_conversations(
    profile: Profile, local_gpu: GPU | None, measured_link: float | None = None,
    chats: Chats | None = None,
) -> None:  # fmt: skip
    """Set `profile.conversations` for a workload of conversations (`chats`; None: the
    job's turns and think time), on the deployment's GPU (the one named, else the one
    profiled: its measured rates and host link where it is that one, in the dtype
    measured), and put the host tier among the advice's recommendations where it is one.
    A workload with neither is left alone; what cannot be projected becomes a warning,
    never a failed run."""
    config = profile.config
    workload, hw = config.workload, config.hardware
    if chats is None and (workload.conversation_turns or 1) <= 1:
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
    chats = chats or read_chats("", "", None, workload)
    try:
        rates = calibrate(shapes, profile, env.device_name) if profiled else None
        profile.conversations = estimate_conversations(
            shapes, gpu, hw.gpu_count, dtype, workload, hw, device=env.device,
            measured_link=measured_link if profiled else None, rates=rates,
            conversations=chats.conversations, source=chats.source,
        )  # fmt: skip
    except (ConfigError, ValueError, ZeroDivisionError) as exc:
        profile.warnings.append(f"the conversations could not be projected: {exc}")
        return
    if profile.advice is not None and profile.conversations["advice"]["recommended"]:
        tier = serde.from_dict(Recommendation, profile.conversations["advice"])
        add_to_advice(profile.advice, tier, workload, hw.gpu_count)


def attach_hit_check(profile: Profile, loaded: Any, device: str, clock: Any,
                     chats: Chats) -> None:  # fmt: skip
    """Measure, with the `loaded` model (`profiling.model.loading.Loaded`, back from
    every experiment and the engine) on this worker's `device`, the warm TTFT at a few
    of the conversations' hit positions against the projection fitted on this device
    (`profiling.caching.hit_check`), into the conversation section's `hit_check`. The
    check needs no deployment GPU: without one (no section), the section holds the
    check alone, the hits replayed at an unlimited cache."""
    config, shapes, env = profile.config, profile.model.shapes, profile.environment
    if shapes is None:
        return
    section = profile.conversations
    try:
        rates = calibrate(shapes, profile, env.device_name)
        users = section["users_per_copy"] if section else config.workload.concurrency
        prepared = prepare(shapes, rates, env.dtype, chats.conversations, Setup(users))
        capacity = section["served"]["capacity_tokens"] if section else None
        subject = Subject(loaded.model, device, env.device_name or device, clock,
                          shapes.vocab_size, loaded.info.max_position_embeddings,
                          config.quick)  # fmt: skip
        check = run_hit_check(subject, StepModel(shapes, rates, env.dtype),
                              error_range(shapes, profile), chats.conversations,
                              prepared.workload, capacity,
                              _hit_note(capacity, rates.note))  # fmt: skip
    except (ConfigError, ValueError, ZeroDivisionError, RuntimeError) as exc:
        profile.warnings.append(f"the hit check could not run: {exc}")
        return
    _section(profile, device, chats.source)["hit_check"] = check.to_dict()


def attach_engine_replay(profile: Profile, device: str, source: str | None = None) -> None:
    """The engine's replay of the conversations (`profiling.engine.conversation_replay`, in the
    engine section) into the conversation section: its figures as `engine_replay`, its
    lines as `engine_check` and `engine_offload`. A section that is not there yet (no
    GPU named) is made to hold it, saying `source`."""
    engine = profile.engine
    chats = engine.conversations if engine is not None else None
    if chats is None:
        return
    section = _section(profile, device, source or synthetic_source(profile.config.workload))
    section["engine_replay"] = chats.to_dict()
    section["engine_check"] = f"{engine.name} {engine.version}, {chats.reference_line()}"
    section["engine_offload"] = chats.offload_line()


def _section(profile: Profile, device: str, source: str) -> dict[str, Any]:
    """The conversation section; where none was projected (no GPU named), one that holds
    only what was measured on the worker and the engine."""
    if profile.conversations is None:
        profile.conversations = {"source": source, "engine_check": engine_check(device)}
    return profile.conversations


def _hit_note(capacity: int | None, calibration: str) -> str:
    where = (f"at the section's KV capacity of {capacity:,} tokens" if capacity is not None
             else "at an unlimited cache (no GPU named, so no KV capacity to replay at; "
                  "the check times the hits on this device, not its room)")  # fmt: skip
    return (
        f"hit positions from the conversations replayed {where}, turns paced by this "
        f"device's calibration; projected by it ({calibration})"
    )


def add_to_advice(
    advice: Advice,
    recommendation: Recommendation,
    workload: Workload | None = None,
    devices: int | None = None,
) -> None:
    """The tier among the advice's recommendations, ranked as the others are; the
    advice's one line names it where it becomes the first thing to do. (Where it is not
    recommended, the conversations section says why: the advice's list of techniques set
    aside is for the techniques the job measured or estimated for its workload.)"""
    ranked = [*advice.recommendations, recommendation]
    advice.recommendations = rank(ranked, advice.bottleneck, workload, devices)
    if advice.first is recommendation:
        head = advice.summary.split(" First: ")[0].split(" No technique")[0]
        effect, basis = recommendation.expected_effect.text, recommendation.basis
        advice.summary = f"{head} First: {recommendation.setting} ({effect}; {basis})."
