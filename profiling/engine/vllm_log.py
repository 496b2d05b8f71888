"""What a vLLM server's log and `/metrics` say of it: its KV cache, its weights, its
threads and, when it stops, why (the engine interface's readers, re-exported by
`profiling.engine.vllm`)."""

from __future__ import annotations

import re

from profiling.engine.metrics import series as metrics_series

CACHE_CONFIG_INFO = "vllm:cache_config_info"  # a gauge whose labels are the CacheConfig's

_KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU) KV cache size: ([\d,]+) tokens")
_WEIGHTS_GIB = re.compile(r"Model loading took ([\d.]+) GiB")
_THREADS = re.compile(r"Reducing Torch threads from (\d+) to (\d+)")
_BLOCK_SIZE = re.compile(r"block_size=(\d+)")


def kv_cache_tokens(log: str) -> int | None:
    found = _KV_TOKENS.findall(log)
    return int(found[-1].replace(",", "")) if found else None


def kv_cache_blocks(metrics_text: str, log: str) -> tuple[int, int, str] | None:
    """(block size, blocks, where read) of the KV cache: the cache config's labels on
    `/metrics` (`block_size`, `num_gpu_blocks`, set on the CPU build too), else the log's
    "KV cache size: N tokens" over the block size."""
    for labels, _ in metrics_series(metrics_text, CACHE_CONFIG_INFO):
        size, blocks = labels.get("block_size", ""), labels.get("num_gpu_blocks", "")
        if size.isdigit() and blocks.isdigit():
            return int(size), int(blocks), f"{CACHE_CONFIG_INFO} (block_size × num_gpu_blocks)"
    tokens = kv_cache_tokens(log)
    sizes = _BLOCK_SIZE.findall(log)
    if tokens and sizes:
        size = int(sizes[-1])
        return size, tokens // size, "the server's log (KV cache size in tokens)"
    return None


def weights_bytes(log: str) -> int | None:
    found = _WEIGHTS_GIB.findall(log)
    return int(float(found[-1]) * 2**30) if found else None


def threads(log: str) -> str:
    """ "1 of 2 torch threads" when the engine says it reduced its threads (it keeps
    threads free for its other processes)."""
    found = _THREADS.findall(log)
    if not found:
        return ""
    cores, kept = found[-1]
    return f"{kept} of {cores} torch threads"


_ERROR_LINE = re.compile(
    r"((?:[A-Z][A-Za-z]*(?:Error|Exception)|torch\.OutOfMemoryError)\s*:\s*.+)$"
)
_BARE = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception))\s*$")  # "AssertionError"
_OOM = re.compile(r"out of memory|insufficient memory|not enough memory|cannot allocate", re.I)


_WARNING = re.compile(r"\b(WARNING|INFO|DEBUG) [\d-]+ [\d:]+ |Warning: ")
# Errors that only wrap the real one ("see root cause above").
_WRAPPERS = ("root cause", "initialization failed", "check the stack trace", "core proc")


def failure_reason(log: str) -> str:
    """The reason a server gave for stopping: its root error, trimmed to one sentence."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "address already in use" in line.lower():
            return "address already in use (port taken)"
    errors = [(i, e) for i in range(len(lines)) if (e := _error_at(lines, i))]
    specific = [(i, e) for i, e in errors if not any(w in e.lower() for w in _WRAPPERS)]
    for i, error in specific[:1] or errors[-1:]:
        if "validation error" in error and i + 1 < len(lines):
            # pydantic puts the reason on the next line: "Value error, <reason> [type=...]"
            detail = lines[i + 1].split(" [type=")[0].removeprefix("Value error, ")
            return _clip(f"{error}: {detail}")
        return _clip(error)
    for line in reversed(lines):
        if _OOM.search(line):
            return _clip(line)
    return _clip(lines[-1]) if lines else "the engine exited without a message"


def _error_at(lines: list[str], i: int) -> str | None:
    """The exception line `i` states ("ValueError: why"), with the code line that raised
    a bare one ("AssertionError at `assert a == b`"); None for any other line."""
    if _WARNING.search(lines[i]):
        return None
    if match := _ERROR_LINE.search(lines[i]):
        return match.group(1)
    if not (match := _BARE.search(lines[i])):
        return None
    for line in reversed(lines[max(0, i - 3) : i]):
        code = _clip(line)
        if code and not code.startswith(("File ", "^")) and not set(code) <= {"^", " "}:
            return f"{match.group(1)} at `{code}`"
    return match.group(1)


def _clip(text: str, limit: int = 400) -> str:
    text = re.sub(r"^.*?\b(ERROR|WARNING|INFO) [\d-]+ [\d:]+ \[[^\]]+\]\s*", "", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
