"""One set of weights on the GPU at a time.

The reference model stays loaded for the whole profile, but some phases load
weights of their own: each quantized variant, the tensor-parallel ranks, the
serving engine. With the reference still on the GPU they would hold two or
three copies (and run out of memory for a model over a third of the device).
`set_aside` moves the reference to host memory for such a phase and back after.
On a CPU there is nothing to free: the weights stay where they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def can_move(model: Any, device: str) -> bool:
    """A model on one CUDA device that `.to()` can move (not one dispatched over several
    devices by `device_map`, whose hooks pin each part)."""
    return device.startswith("cuda") and not getattr(model, "hf_device_map", None)


@contextmanager
def set_aside(model: Any, device: str) -> Iterator[bool]:
    """Yields whether the weights left the device for the block."""
    if not can_move(model, device):
        yield False
        return
    # torch: kept out of the site's imports
    import torch

    model.to("cpu")
    torch.cuda.empty_cache()
    try:
        yield True
    finally:
        model.to(device)
