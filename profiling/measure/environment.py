"""Where a profile ran: device, driver, library versions, host, times.

Also `list_devices`, which a worker prints when it starts so the site knows
which GPU kinds it can serve.
"""

from __future__ import annotations

import os
import platform
import socket
from datetime import UTC, datetime
from typing import Any

import torch

from profiling.measure import hardware
from profiling.results import Environment


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or a generic name."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _nvml(query: str) -> Any:
    """One NVML value (`driver`), or None when NVML is unavailable."""
    try:
        # optional: without NVML (no NVIDIA driver) the value is None
        import pynvml

        pynvml.nvmlInit()
        try:
            if query == "driver":
                value = pynvml.nvmlSystemGetDriverVersion()
                return value.decode() if isinstance(value, bytes) else value
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVIDIA driver on this machine: the field stays empty
        return None
    return None


def _total_ram() -> int | None:
    try:
        # optional: psutil missing or restricted leaves the field empty
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or restricted: the field is optional
        return None


def device_description(device: str) -> tuple[str, int | None]:
    """(name, memory in bytes) of a torch device name."""
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return props.name, int(props.total_memory)
    if device == "mps":
        return "Apple MPS", _total_ram()
    return cpu_name(), _total_ram()


def collect(device: str, dtype: str, started_at: str) -> Environment:
    """The Environment of a run on `device`, finishing now."""
    # heavy: transformers, only for a finished run (`devices` needs torch alone)
    import transformers

    name, memory = device_description(device)
    gpu = hardware.match_device_name(name) if device.startswith("cuda") else None
    return Environment(
        device=device,
        device_name=name,
        device_memory_bytes=memory,
        gpu_kind=gpu.key if gpu else None,
        driver=_nvml("driver") if device.startswith("cuda") else None,
        cuda=torch.version.cuda,
        torch=torch.__version__,
        transformers=transformers.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        hostname=socket.gethostname(),
        cpu_count=os.cpu_count(),
        torch_threads=torch.get_num_threads(),
        dtype=dtype,
        started_at=started_at,
        finished_at=utc_now(),
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    )


def list_devices() -> list[dict[str, Any]]:
    """Devices this machine can profile on; the CPU is always listed first."""
    out = [_device_entry("cpu")]
    if torch.cuda.is_available():
        out += [_device_entry(f"cuda:{i}") for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append(_device_entry("mps"))
    return out


def _device_entry(device: str) -> dict[str, Any]:
    name, memory = device_description(device)
    gpu = hardware.match_device_name(name) if device.startswith("cuda") else None
    return {
        "device": device,
        "name": name,
        "memory_bytes": memory,
        "gpu_kind": gpu.key if gpu else None,
    }
