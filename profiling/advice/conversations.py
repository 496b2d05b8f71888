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
from profiling.caching.conversations import estimate_conversations, file_source, tokenized
from profiling.config import ConfigError, Workload
from profiling.measure.hardware import GPU, lookup
from profiling.profile import Profile
from profiling.projection.calibration import calibrate
from profiling.projection.conversations import Conversation, parse_conversations


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
