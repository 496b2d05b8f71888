"""The GPU catalog: datasheet memory, bandwidth and peak rates.

Used for "% of peak" on measured points and for projections to a GPU the
worker does not have. Names are matched case-insensitively, by key or alias
(`h100`, `A100-80GB`, `l4`), and a device name reported by the driver
(`NVIDIA H100 80GB HBM3`) is matched by its `match` substrings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class GPU:
    key: str
    label: str
    vendor: str
    memory_bytes: int
    memory_bandwidth_bytes_per_second: float
    bf16_flops_per_second: float | None
    fp16_flops_per_second: float | None
    fp8_flops_per_second: float | None
    int8_ops_per_second: float | None
    interconnect: str
    interconnect_bytes_per_second: float
    fp4_flops_per_second: float | None = None  # dense FP4 tensor peak (NVFP4; MXFP4 on AMD)
    source: str = ""  # the vendor datasheet or product page the figures come from
    memory_source: str = "driver"  # "driver": a reported total; "datasheet": its GB as GiB

    def peak_flops(self, dtype: str) -> float | None:
        """Dense tensor-core peak for a torch dtype name, if the GPU has one."""
        if dtype == "bfloat16":
            return self.bf16_flops_per_second
        if dtype == "float16":
            return self.fp16_flops_per_second or self.bf16_flops_per_second
        return None  # fp32 peaks are not in the catalog: no "% of peak" claimed


class UnknownGPU(KeyError):
    def __str__(self) -> str:
        return f"unknown GPU kind {self.args[0]!r}; known: {', '.join(catalog())}"


def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().upper())


@cache
def _raw() -> dict:
    text = resources.files("profiling").joinpath("data/gpus.json").read_text()
    return json.loads(text)


@cache
def catalog() -> dict[str, GPU]:
    """All GPUs of the catalog, by key, in file order."""
    out = {}
    for key, spec in _raw()["gpus"].items():
        out[key] = GPU(
            key=key,
            label=spec["label"],
            vendor=spec["vendor"],
            memory_bytes=int(spec["memory_bytes"]),
            memory_bandwidth_bytes_per_second=spec["memory_bandwidth_bytes_per_second"],
            bf16_flops_per_second=spec.get("bf16_flops_per_second"),
            fp16_flops_per_second=spec.get("fp16_flops_per_second"),
            fp8_flops_per_second=spec.get("fp8_flops_per_second"),
            int8_ops_per_second=spec.get("int8_ops_per_second"),
            interconnect=spec["interconnect"],
            interconnect_bytes_per_second=spec["interconnect_bytes_per_second"],
            fp4_flops_per_second=spec.get("fp4_flops_per_second"),
            source=spec["source"],
            memory_source=spec["memory_source"],
        )
    return out


@cache
def _aliases() -> dict[str, str]:
    table = {}
    for key, spec in _raw()["gpus"].items():
        for name in (key, *spec.get("aliases", [])):
            table[_norm(name)] = key
    return table


def lookup(name: str) -> GPU:
    """The catalog entry for a user-typed GPU kind; raises `UnknownGPU`."""
    key = _aliases().get(_norm(name))
    if key is None:
        raise UnknownGPU(name)
    return catalog()[key]


def match_device_name(device_name: str) -> GPU | None:
    """The catalog entry for a driver-reported device name, if any. A `match` string is
    a whole model number: "NVIDIA L4" is not the start of "NVIDIA L40", nor "NVIDIA A10"
    of "NVIDIA A100 …"."""
    for key, spec in _raw()["gpus"].items():
        if any(_names(m, device_name) for m in spec.get("match", [])):
            return catalog()[key]
    return None


def _names(match: str, device_name: str) -> bool:
    return re.search(re.escape(match) + r"(?!\d)", device_name, re.I) is not None
