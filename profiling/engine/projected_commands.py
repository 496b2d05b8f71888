"""The commands that launch a deployable configuration on SGLang or TensorRT-LLM, or why
none does: the engines a projection may stand for (`--serving-engine`) that this project
does not run itself.

The flags are read from each engine's own source, not parsed by its parser here:
- SGLang 0.5.23 (`python -m sglang.launch_server`; its fields in
  `sglang/srt/arg_groups/fields/`, the flag of each field its name in kebab case):
  `--model-path`, `--tp-size`, `--pp-size`, `--dp-size` (data-parallel replicas in one
  server), `--ep-size` and `--attn-dp-size` (expert parallelism, attention data
  parallel inside the TP group: `ep_size` at most `tp_size`), `--dtype`,
  `--quantization fp8` (quantized as it loads), `--kv-cache-dtype fp8_e4m3`, and
  `--speculative-algorithm EAGLE|STANDALONE` with `--speculative-draft-model-path`,
  `--speculative-num-steps K`, `--speculative-eagle-topk 1` and
  `--speculative-num-draft-tokens K + 1` (what `speculative_hook.py` sets it to at top-k
  1). Its radix prefix cache is on by default. With speculative decoding it runs at most
  48 requests unless `--max-running-requests` says otherwise; the projection holds to it.
- TensorRT-LLM (`trtllm-serve MODEL`, `tensorrt_llm/commands/serve.py` at 00209af):
  `--tp_size`, `--pp_size`, `--ep_size`, and `--config FILE` for the LLM-API fields it has
  no flag for (`llm_args.py`): `dtype`, `kv_cache_config: {dtype: fp8}`,
  `enable_attention_dp`. Its block reuse (prefix caching) is on by default
  (`KvCacheConfig.enable_block_reuse`). It serves quantized weights from a checkpoint
  quantized beforehand (its quantization guide: ModelOpt FP8 and NVFP4, GPTQ/AWQ W4A16),
  and speculative decoding from a `speculative_config` whose fields this project does
  not write for it.
"""

from __future__ import annotations

import shlex

from profiling.engine.commands import LaunchCommand, replicas_note
from profiling.options import WEIGHT_FORMATS
from profiling.projection.configurations import Configuration
from profiling.projection.search import DRAFT

SGLANG_VERSION = "0.5.23"
CONFIG_FILE = "config.yaml"


def launch_command(engine: str, model: str, configuration: Configuration) -> LaunchCommand:
    """The command that serves `model` as `configuration` on `engine` ("sglang",
    "trtllm"), or why there is none."""
    if engine == "sglang":
        return _sglang(model, configuration)
    if engine == "trtllm":
        return _trtllm(model, configuration)
    raise ValueError(f"no launch commands for {engine!r} here")


# -- SGLang -----------------------------------------------------------------------------

_SGLANG_PREQUANTIZED = {
    "int8": "GPTQ 8-bit, or W8A8 int8",
    "int4": "GPTQ or AWQ 4-bit",
    "fp4": "NVFP4 from ModelOpt",
}


def _sglang(model: str, c: Configuration) -> LaunchCommand:
    base = ["python", "-m", "sglang.launch_server", "--model-path", model]
    one_server = c.ep == 1 and c.pp == 1  # replicas as its own data parallelism
    flags = _sglang_layout(c, one_server)
    if c.weights in ("bf16", "fp16"):
        flags += ["--dtype", WEIGHT_FORMATS[c.weights]]
    elif c.weights == "fp8":
        flags += ["--quantization", "fp8"]
    if c.kv_cache == "fp8":
        flags += ["--kv-cache-dtype", "fp8_e4m3"]
    reasons = []
    if c.weights in _SGLANG_PREQUANTIZED:
        reasons.append(
            f"SGLang serves {c.weights} weights from a checkpoint of {model} quantized "
            f"beforehand ({_SGLANG_PREQUANTIZED[c.weights]}), reading the format from the "
            f"checkpoint's config: {shlex.join([*base[:4], '<that checkpoint>', *flags])}"
        )
    if c.draft == "ngram":
        reasons.append(
            "SGLang's n-gram speculation (--speculative-algorithm NGRAM) drafts a tree of "
            "tokens, not the chain of k the projection assumed: size it from its own "
            "--speculative-num-draft-tokens"
        )
    elif c.draft:
        head = c.draft == DRAFT
        path = f"<an EAGLE head trained for {model}>" if head else c.draft
        flags += [
            "--speculative-algorithm", "EAGLE" if head else "STANDALONE",
            "--speculative-draft-model-path", path,
            "--speculative-num-steps", str(c.draft_tokens), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(c.draft_tokens + 1),
        ]  # fmt: skip
        if head:
            reasons.append(
                "SGLang needs the checkpoint of an EAGLE head trained for this model: the "
                "projection assumed one at the acceptance given, but none was named; with "
                f"one: {shlex.join([*base, *flags])}"
            )
    if reasons:
        return LaunchCommand([], "", "; ".join(reasons))
    argv = [*base, *flags]
    notes = [f"SGLang {SGLANG_VERSION}'s flags, as its source declares them."]
    if c.draft:
        notes.append(
            "With speculative decoding SGLang runs at most 48 requests at once unless "
            "--max-running-requests is given; the projection holds to its default."
        )
    if not one_server and c.replicas > 1:
        notes.append(replicas_note(c))
    return LaunchCommand(argv, shlex.join(argv), "", " ".join(notes))


def _sglang_layout(c: Configuration, one_server: bool) -> list[str]:
    if c.ep > 1:
        size = str(c.ep)
        return ["--tp-size", size, "--ep-size", size, "--attn-dp-size", size]
    flags = ["--tp-size", str(c.tp)] if c.tp > 1 else []
    flags += ["--pp-size", str(c.pp)] if c.pp > 1 else []
    if one_server and c.replicas > 1:
        flags += ["--dp-size", str(c.replicas)]
    return flags


# -- TensorRT-LLM ---------------------------------------------------------------------------

_TRTLLM_PREQUANTIZED = {
    "fp8": "an FP8 checkpoint made with NVIDIA Model Optimizer (ModelOpt)",
    "int4": "a W4A16 GPTQ or AWQ checkpoint",
    "fp4": "an NVFP4 checkpoint made with ModelOpt",
}


def _trtllm(model: str, c: Configuration) -> LaunchCommand:
    base = ["trtllm-serve", model]
    flags: list[str] = []
    extra: list[str] = []  # the --config file's fields, YAML
    if c.ep > 1:
        flags += ["--tp_size", str(c.ep), "--ep_size", str(c.ep)]
        extra.append("enable_attention_dp: true")
    else:
        flags += ["--tp_size", str(c.tp)] if c.tp > 1 else []
        flags += ["--pp_size", str(c.pp)] if c.pp > 1 else []
    if c.weights in ("bf16", "fp16"):
        extra.append(f"dtype: {WEIGHT_FORMATS[c.weights]}")
    if c.kv_cache == "fp8":
        extra.append("kv_cache_config: {dtype: fp8}")
    if extra:
        flags += ["--config", CONFIG_FILE]
    reasons = []
    if c.weights == "int8":
        reasons.append(
            "TensorRT-LLM's quantization guide lists no int8 weight-only recipe for its "
            "PyTorch backend: serve fp8 or a 4-bit checkpoint instead"
        )
    elif c.weights in _TRTLLM_PREQUANTIZED:
        reasons.append(
            f"TensorRT-LLM serves {c.weights} weights from {_TRTLLM_PREQUANTIZED[c.weights]} "
            f"of {model}, reading the format from the checkpoint: "
            f"{shlex.join(['trtllm-serve', '<that checkpoint>', *flags])}"
        )
    if c.draft:
        draft = "an EAGLE head, none named" if c.draft == DRAFT else c.draft
        reasons.append(
            f"TensorRT-LLM takes speculative decoding ({draft}, {c.draft_tokens} drafted "
            f"tokens a step) from the speculative_config of its {CONFIG_FILE}, whose fields "
            "differ by decoding type and version: write it from its speculative-decoding "
            "guide for your version"
        )
    if reasons:
        return LaunchCommand([], "", "; ".join(reasons))
    argv = [*base, *flags]
    notes = []
    if extra:
        notes.append(f"{CONFIG_FILE} holds {{{', '.join(extra)}}}.")
    if c.replicas > 1:
        notes.append(replicas_note(c))
    return LaunchCommand(argv, shlex.join(argv), "", " ".join(notes))
