"""The command that launches a deployable configuration on vLLM, or why none does.

Every flag comes from the builders the engine run measures with (`vllm.py`), so
the command the report recommends and the one the run started cannot drift
apart. The flags are vLLM `CHECKED_VERSION`'s: the engine test parses every
kind of command with that version's own argument parser.

What vLLM cannot do from a plain checkpoint is said instead of printed as a
command that fails: it quantizes weights to fp8 as it loads them, but int8 and
int4 weight-only need a checkpoint quantized beforehand (GPTQ, AWQ or
compressed-tensors), whose format vLLM reads from the checkpoint's config.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any

from profiling.engine import vllm
from profiling.engine.plan import NGRAM
from profiling.options import WEIGHT_FORMATS
from profiling.projection.configurations import Configuration
from profiling.projection.search import DRAFT

CHECKED_VERSION = "0.32"  # the vLLM whose parser the engine test runs every command through

# Weight formats vLLM serves only from a checkpoint quantized beforehand: the formats
# it reads them in. (vLLM 0.32's on-the-fly int8, `int8_per_channel_weight_only`,
# quantizes a mixture's experts only: `vllm/config/quantization.py`.)
_PREQUANTIZED = {
    "int8": "GPTQ 8-bit or compressed-tensors W8A16",
    "int4": "GPTQ or AWQ 4-bit, or compressed-tensors W4A16",
    "fp4": "NVFP4, compressed-tensors or ModelOpt",
}


@dataclass(frozen=True)
class LaunchCommand:
    """`vllm serve …` for one configuration; for replicas, the command of each one."""

    argv: list[str]  # ["vllm", "serve", MODEL, "--tensor-parallel-size", "2", ...]; [] if none
    text: str  # argv as one shell line; "" when unavailable
    unavailable: str  # "" or why vLLM cannot launch this configuration as it stands
    note: str = ""  # how to run it: once per replica, or flags of another engine version

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchCommand:
        return cls(
            argv=list(data["argv"]), text=data["text"], unavailable=data["unavailable"],
            note=data.get("note", ""),
        )  # fmt: skip


def launch_command(
    model: str, configuration: Configuration, *, engine_version: str | None = None
) -> LaunchCommand:
    """The command that serves `model` as `configuration` on vLLM, or why there is none."""
    c = configuration
    flags = _flags(c, model)
    reasons = []
    if c.weights in _PREQUANTIZED:
        example = f"vllm serve <that checkpoint> {shlex.join(flags)}"
        reasons.append(_prequantized_reason(c.weights, model, example))
    if c.draft == DRAFT:
        example = shlex.join(vllm.serve_argv(model, flags))
        reasons.append(_unnamed_head_reason(c.weights in _PREQUANTIZED, example))
    if reasons:
        return LaunchCommand([], "", "; ".join(reasons))
    argv = vllm.serve_argv(model, flags)
    notes = [n for n in (replicas_note(c), _version_note(engine_version)) if n]
    return LaunchCommand(argv, shlex.join(argv), "", " ".join(notes))


def _flags(c: Configuration, model: str) -> list[str]:
    """The flags of one copy of the configuration, in the order a reader scans them:
    layout, precision, speculation, caching."""
    if c.ep > 1:
        flags = vllm.expert_parallel_flags(c.ep)
    else:
        flags = vllm.tensor_parallel_flags(c.tp)
        if c.pp > 1:
            flags += vllm.pipeline_parallel_flags(c.pp)
    if c.weights in ("bf16", "fp16"):
        flags += vllm.dtype_flags(WEIGHT_FORMATS[c.weights])
    elif c.weights == "fp8":
        flags += vllm.quantization_flags("fp8") or []
    if c.kv_cache == "fp8":
        flags += vllm.quantization_flags("fp8-kv") or []
    if c.draft == "ngram":
        flags += vllm.speculative_flags("ngram", c.draft_tokens, "", NGRAM)
    elif c.draft == DRAFT:  # the projection's EAGLE-style head, named by no checkpoint
        head = f"<an EAGLE head trained for {model}>"
        flags += vllm.speculative_flags("eagle", c.draft_tokens, head, NGRAM)
    elif c.draft:
        flags += vllm.speculative_flags("draft_model", c.draft_tokens, c.draft, NGRAM)
    # vLLM 0.32 caches prefixes unless told not to; a configuration without prefix
    # caching is one where it does not matter (no shared prefix): no flag turns it off.
    if c.prefix_caching:
        flags += vllm.prefix_caching_flags(True)
    return flags


def _unnamed_head_reason(also: bool, example: str) -> str:
    """The search projects speculation with an EAGLE-style head at the acceptance the user
    gave without naming one: vLLM loads the head from a checkpoint."""
    said = (
        "the checkpoint of an EAGLE head trained for this model: the projection assumed one "
        "at the acceptance given, but none was named"
    )
    if also:
        return f"it also needs {said} (the <…> in its speculative config above)"
    return f"vLLM needs {said}; with one: {example}"


def _prequantized_reason(weights: str, model: str, example: str) -> str:
    return (
        f"vLLM does not quantize weights to {weights} as it loads them: it serves a "
        f"checkpoint of {model} quantized beforehand ({_PREQUANTIZED[weights]}, e.g. made "
        f"with llm-compressor), reading the format from the checkpoint's config: {example}"
    )


def replicas_note(c: Configuration) -> str:
    """Replicas are separate servers: vLLM's own data parallelism would not keep them
    apart (a mixture's experts are then sharded over every rank)."""
    if c.replicas == 1:
        return ""
    per = c.gpus // c.replicas
    groups = [",".join(str(r * per + g) for g in range(per)) for r in range(c.replicas)]
    shown = groups if c.replicas <= 3 else [groups[0], groups[1], "…", groups[-1]]
    return (
        f"Run this once per replica, {c.replicas} servers of {per} GPU{'s' * (per > 1)} "
        f"each (CUDA_VISIBLE_DEVICES={' then '.join(shown)}), each with its own --port, "
        "behind a load balancer that spreads the requests evenly."
    )


def _version_note(engine_version: str | None) -> str:
    if not engine_version or _minor(engine_version) == _minor(CHECKED_VERSION):
        return ""
    return (
        f"These are vLLM {CHECKED_VERSION}'s flags; your worker has vLLM {engine_version}: "
        "check them against its `vllm serve --help=all`."
    )


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split("+")[0].split(".")[:2])
