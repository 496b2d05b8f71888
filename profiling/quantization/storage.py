"""The real bytes a (quantized) model's weights occupy.

Size helpers such as `model.get_memory_footprint()` count a torchao int8
weight as if it were still float32 (the tensor subclass reports the outer
dtype), so here every weight is taken apart into the tensors that really
hold it: a tensor subclass (torchao `Int8Tensor`, `Float8Tensor`, affine
quantized tensors) through `__tensor_flatten__`, a bitsandbytes 4-bit
weight with its `quant_state` (absmax, code, nested statistics), an 8-bit
one with the row scales its module keeps (`state.SCB`), GPTQ layers through
their buffers (qweight, qzeros, scales, g_idx) and tensor attributes. Count
after a first forward: some kernels repack their weights then. Each storage counts once,
so tied weights are not counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

# How deep a quantized tensor may nest tensor subclasses or quant states.
MAX_DEPTH = 4


@dataclass
class WeightBytes:
    total: int  # every parameter and buffer of the model
    linear: int  # the share held by linear layers (including quantized ones and the LM head)


def leaf_tensors(value: Any, depth: int = 0) -> Iterator[Any]:
    """The plain tensors that hold `value`'s data (itself, for a plain tensor)."""
    if value is None or depth > MAX_DEPTH:
        return
    flatten = getattr(type(value), "__tensor_flatten__", None)
    if isinstance(value, torch.Tensor) and flatten is not None:
        names, _ = value.__tensor_flatten__()
        for name in names:
            yield from leaf_tensors(getattr(value, name), depth + 1)
        return
    if isinstance(value, torch.Tensor):
        yield value
        yield from _quant_state_tensors(getattr(value, "quant_state", None), depth)
        return
    yield from _quant_state_tensors(value, depth)


def _quant_state_tensors(state: Any, depth: int) -> Iterator[Any]:
    """Tensors of a bitsandbytes QuantState (and its nested `state2`)."""
    if state is None or depth > MAX_DEPTH:
        return
    for name in ("absmax", "code", "offset"):
        tensor = getattr(state, name, None)
        if isinstance(tensor, torch.Tensor):
            yield tensor
    yield from _quant_state_tensors(getattr(state, "state2", None), depth + 1)


def module_tensors(module: Any) -> Iterator[Any]:
    """The plain tensors a module holds directly (not its children's): parameters,
    buffers, and tensors kept as plain attributes (GPTQ's CPU kernel repacks its
    weight on the first forward and keeps `scales_and_zeros` that way)."""
    attributes = [v for v in vars(module).values() if isinstance(v, torch.Tensor)]
    for value in [*module._parameters.values(), *module._buffers.values(), *attributes]:
        yield from leaf_tensors(value)
    state = getattr(module, "state", None)  # bitsandbytes Linear8bitLt keeps its scales here
    for name in ("SCB", "CB"):
        yield from leaf_tensors(getattr(state, name, None))


def _storage_key_and_bytes(tensor: Any) -> tuple[tuple[str, int], int]:
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError, AttributeError):
        return (str(tensor.device), id(tensor)), tensor.numel() * tensor.element_size()


def is_linear(module: Any) -> bool:
    """nn.Linear and its quantized subclasses, or a GPTQ layer (it has `qweight`)."""
    return isinstance(module, torch.nn.Linear) or hasattr(module, "qweight")


def weight_bytes(model: Any) -> WeightBytes:
    """Real bytes of the model's weights, and the linear layers' share, each storage once."""
    seen: set[tuple[str, int]] = set()
    total = linear = 0
    for module in model.modules():
        for tensor in module_tensors(module):
            key, nbytes = _storage_key_and_bytes(tensor)
            if key in seen or nbytes == 0:
                continue
            seen.add(key)
            total += nbytes
            linear += nbytes if is_linear(module) else 0
    return WeightBytes(total, linear)


def module_weight_dtype(module: Any) -> str:
    """What a module's weight is stored as: "int8" for torchao/bnb int8, else its dtype."""
    weight = getattr(module, "weight", None)
    if weight is None:
        weight = getattr(module, "qweight", None)
        return "gptq" if weight is not None else "none"
    leaves = list(leaf_tensors(weight))
    return str(leaves[0].dtype).removeprefix("torch.") if leaves else "none"
