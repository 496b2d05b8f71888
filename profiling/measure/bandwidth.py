"""The device's measured memory bandwidth: the roofline decode is held against.

A datasheet states what the memory can do; a copy measures what a kernel gets.
Decode reads every weight and the KV cache once per step, so the share of the
measured bandwidth it reaches says how much is left to gain (a serving engine
reaches 70–90 % on a GPU). Two figures, medians of repeats after warm-ups,
with the device synchronised around each sample:

- copy: a device-to-device tensor copy, counted as bytes read + written (the
  usual GPU figure). A CPU also reads each destination line before writing it,
  so there decode can beat it;
- read: a sum over a tensor, which only reads.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

import torch

from profiling.measure.timing import clock_for

CUDA_BYTES = 1 << 30  # 1 GiB: far past any cache
# 512 MiB: past a server CPU's last-level cache (260 MiB on the machine this was
# checked on, where 64 MiB read back from cache at twice the memory's speed).
CPU_BYTES = 1 << 29
REPEATS = {"cuda": 10, "cpu": 5}


@dataclass
class Bandwidth:
    copy_bytes_per_second: float
    read_bytes_per_second: float
    bytes: int  # the tensor's size


@functools.cache
def measure(device: str, size: int | None = None) -> Bandwidth:
    """Copy and read bandwidth over a tensor of `size` bytes (by default past any cache),
    measured once per process and device: the memory does not change between runs."""
    cuda = device.startswith("cuda")
    size = size or (CUDA_BYTES if cuda else CPU_BYTES)
    repeats = REPEATS["cuda" if cuda else "cpu"]
    src = torch.ones(size // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    clock = clock_for(device)
    for _ in range(2):
        dst.copy_(src)
        src.sum()
    copy = statistics.median(clock.time(lambda: dst.copy_(src)) for _ in range(repeats))
    read = statistics.median(clock.time(lambda: src.sum()) for _ in range(repeats))
    return Bandwidth(2 * size / copy, size / read, size)


HOST_BYTES = 1 << 28  # 256 MiB: many KV blocks' worth, past the copy engine's start-up


@functools.cache
def host_to_device(device: str, size: int = HOST_BYTES) -> float | None:
    """Bytes per second of a pinned host buffer copied to `device` (the path a KV block
    offloaded to host memory takes back), median of repeats; None off CUDA, where host
    and device memory are one."""
    if not device.startswith("cuda"):
        return None

    src = torch.ones(size // 4, dtype=torch.float32).pin_memory()
    dst = torch.empty(size // 4, dtype=torch.float32, device=device)
    clock = clock_for(device)
    for _ in range(2):
        dst.copy_(src, non_blocking=True)
    seconds = statistics.median(
        clock.time(lambda: dst.copy_(src, non_blocking=True)) for _ in range(REPEATS["cuda"])
    )
    return size / seconds
