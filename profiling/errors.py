"""Errors a profiling run reports to its user.

Each error has a `kind`, a short stable word the site stores and shows
("bad_model", "out_of_memory", ...), and a message written for the person
who asked for the profile, not for a developer. `ConfigError` (bad input)
lives in `profiling.config` so the web process can raise it without this
module; `error_kind` maps both families onto one vocabulary.
"""

from __future__ import annotations

import sys

from profiling.config import ConfigError

CONFIG_ERROR_KIND = "bad_config"
INTERNAL_ERROR_KIND = "internal"


class ProfilingError(Exception):
    """A run could not be completed for a reason the user can act on."""

    kind = "profiling"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ModelSourceError(ProfilingError):
    """The model id is unknown, not found, or has no safetensors weights."""

    kind = "bad_model"


class RemoteCodeError(ProfilingError):
    """The model would need `trust_remote_code`, which is never enabled."""

    kind = "remote_code"


class PathNotAllowed(ProfilingError):
    """A local directory lies outside the roots this worker may read."""

    kind = "not_allowed"


class OutOfMemory(ProfilingError):
    """The device ran out of memory while loading or measuring."""

    kind = "out_of_memory"


class TooLarge(ProfilingError):
    """The model cannot fit the device: refused before anything is allocated."""

    kind = "too_large"


class DeviceUnavailable(ProfilingError):
    """The requested device (e.g. CUDA) is not present on this machine."""

    kind = "device"


def error_kind(exc: BaseException) -> str:
    """The stable kind word for any exception a run may raise."""
    if isinstance(exc, ProfilingError):
        return exc.kind
    if isinstance(exc, ConfigError):
        return CONFIG_ERROR_KIND
    return INTERNAL_ERROR_KIND


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (first line, or its type name)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


OOM_WORDS = (
    "out of memory",
    "can't allocate memory",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "hiperroroutofmemory",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether an exception means the device or host ran out of memory.

    Checks torch's CUDA OOM type only if torch is already imported, so this
    module stays importable without torch.
    """
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc).lower()
    # torch's CPU allocator raises a plain RuntimeError when malloc fails; a GPU's
    # libraries report theirs in their own words ("CUDA error: out of memory",
    # cuBLAS's and cuDNN's allocation failures, ROCm's hipErrorOutOfMemory).
    return isinstance(exc, RuntimeError) and any(words in text for words in OOM_WORDS)
