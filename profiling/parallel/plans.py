"""Per-device memory of tensor- and pipeline-parallel splits, from the model's real shapes.

Pure arithmetic over bytes by module (no torch import): `parameters_of`
reads them from a loaded model; `shape_of` sorts them into what tensor
parallelism (TP) splits and what it copies, and `plan` sizes one split.

Under TP, as transformers' tensor-parallel plan and the common servers do:
- attention q and o projections and the MLP linears are divided by TP;
- k and v projections and the KV cache are divided by KV heads, but never
  below one head per device: past TP = KV heads each head is replicated
  (TP 8 over 2 KV heads: every device holds 1 head, each head on 4 devices);
  latent (MLA) caches are not split by heads and are replicated whole;
- embeddings and an untied LM head are split by vocabulary (vocab-parallel);
- norms, biases of row-split linears, buffers and anything unrecognised are
  replicated on every device.
Under pipeline parallelism (PP) the layers are cut into PP contiguous stages;
the embeddings sit on the first stage, the LM head on the last (a tied
embedding is held by both), and the largest stage is the one reported.

A device fits a plan when weights + KV for concurrency × context stay within
its memory minus the reserve `profiling.projection.fit.fit_check` holds back for the
runtime (10 % + 1 GiB per GPU) and the activations of the largest prefill chunk.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from profiling.model.shapes import Shapes
from profiling.parallel.results import ParallelPlan
from profiling.projection.fit import (
    RESERVE_FIXED_BYTES,
    RESERVE_SHARE,
    activation_bytes,
    usable_bytes,
)
from profiling.projection.serving import MAX_BATCHED_TOKENS
from profiling.units import size

TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (1, 2, 4)
MAX_DEVICES = 8
_LAYER = re.compile(r"\.(?:layers|h|blocks|layer)\.(\d+)\.")
_KV_PROJ = ("k_proj", "v_proj", ".key.", ".value.")
_ROW_SPLIT = ("o_proj", "down_proj", "out_proj", "c_proj", "dense_4h_to_h", "w2")
_SPLIT = ("attn", "attention", "mlp", "feed_forward", "ffn", "experts")
RESERVE_NOTE = (
    f"each device keeps {RESERVE_SHARE:.0%} of its memory (the serving engine's headroom), "
    f"{size(RESERVE_FIXED_BYTES)} for the CUDA context and runtime, and the activation peak "
    f"of a {MAX_BATCHED_TOKENS:,}-token prefill chunk at its TP degree, as the profile's fit "
    "check does"
)


@dataclass(frozen=True)
class ParamBytes:
    name: str
    nbytes: int
    role: str = ""  # "embed", "head", "buffer" or "" (by name)


@dataclass
class LayerBytes:
    split: int = 0  # divided by TP
    kv_proj: int = 0  # divided by KV heads per device
    replicated: int = 0


@dataclass
class ModelShape:
    layers: list[LayerBytes]
    embed_bytes: int
    head_bytes: int  # 0 when the LM head is tied to the embedding
    other_bytes: int  # outside the layers: final norm, buffers
    attention_heads: int
    kv_heads: int
    kv_bytes_per_token: int
    kv_split_by_heads: bool = True
    tied: bool = False
    # Per TP degree, each device's activation peak (`profiling.projection.fit.activation_bytes`).
    activations: dict[int, int] = field(default_factory=dict)

    @property
    def weights_bytes(self) -> int:
        body = sum(x.split + x.kv_proj + x.replicated for x in self.layers)
        return body + self.embed_bytes + self.head_bytes + self.other_bytes


# -- reading the model (duck-typed: no torch import) ----------------------------


def parameters_of(model: Any) -> list[ParamBytes]:
    """Bytes of every parameter (tied weights once) and buffer of a loaded model."""
    embed = model.get_input_embeddings()
    head = model.get_output_embeddings()
    ids = {id(embed.weight): "embed"}
    if head is not None and head.weight is not embed.weight:
        ids[id(head.weight)] = "head"
    out = [
        ParamBytes(name, p.numel() * p.element_size(), ids.get(id(p), ""))
        for name, p in model.named_parameters()
    ]
    out += [
        ParamBytes(name, b.numel() * b.element_size(), "buffer")
        for name, b in model.named_buffers()
    ]
    return out


def classify(name: str) -> str:
    """ "split", "kv_proj" or "replicated" for a parameter inside a decoder layer."""
    lowered = name.lower()
    if "norm" in lowered or ".ln_" in lowered:
        return "replicated"
    if lowered.endswith(".bias") and any(part in lowered for part in _ROW_SPLIT):
        return "replicated"  # a row-split linear adds its bias once, after the all-reduce
    if any(part in lowered for part in _KV_PROJ):
        return "kv_proj"
    return "split" if any(part in lowered for part in _SPLIT) else "replicated"


def shape_of(
    params: list[ParamBytes],
    *,
    attention_heads: int,
    kv_heads: int,
    kv_bytes_per_token: int,
    kv_split_by_heads: bool = True,
    shapes: Shapes | None = None,
    dtype: str = "bfloat16",
) -> ModelShape:
    """Sort parameter bytes into per-layer split / kv / replicated and the rest."""
    layers: dict[int, LayerBytes] = {}
    embed = head = other = 0
    for p in params:
        match = _LAYER.search(p.name)
        if p.role == "embed":
            embed += p.nbytes
        elif p.role == "head":
            head += p.nbytes
        elif match and p.role != "buffer":
            layer = layers.setdefault(int(match.group(1)), LayerBytes())
            kind = classify(p.name)
            setattr(layer, kind, getattr(layer, kind) + p.nbytes)
        else:
            other += p.nbytes
    return ModelShape(
        layers=[layers[i] for i in sorted(layers)],
        embed_bytes=embed,
        head_bytes=head,
        other_bytes=other,
        attention_heads=attention_heads,
        kv_heads=kv_heads,
        kv_bytes_per_token=kv_bytes_per_token,
        activations={tp: activation_bytes(shapes, dtype, tp) for tp in TP_SIZES},
        kv_split_by_heads=kv_split_by_heads,
        tied=not any(p.role == "head" for p in params),
    )


# -- one plan -------------------------------------------------------------------


def kv_heads_per_device(kv_heads: int, tp: int) -> int:
    """KV heads each device holds: divided by TP, at least one (then replicated)."""
    return max(1, math.ceil(kv_heads / tp))


def stage_sizes(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, as even as contiguous cuts allow (larger first)."""
    stages = min(pp, max(1, layers))
    return [layers // stages + (1 if i < layers % stages else 0) for i in range(stages)]


def available_bytes(device_memory_bytes: int | None, activations: int) -> int | None:
    """Device memory less the runtime reserve and `activations`, as the fit check's."""
    return None if device_memory_bytes is None else usable_bytes(device_memory_bytes, activations)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _stage_weights(shape: ModelShape, tp: int, first: int, count: int, last: bool) -> int:
    heads_kept = kv_heads_per_device(shape.kv_heads, tp)
    total = shape.other_bytes
    for layer in shape.layers[first : first + count]:
        total += _ceil_div(layer.split, tp) + layer.replicated
        total += _ceil_div(layer.kv_proj * heads_kept, shape.kv_heads)
    if first == 0:
        total += _ceil_div(shape.embed_bytes, tp)
    if last:
        tied_copy = shape.embed_bytes if shape.tied and first != 0 else 0
        total += _ceil_div(shape.head_bytes + tied_copy, tp)
    return total


def _stage_kv(shape: ModelShape, tp: int, count: int, tokens: int) -> int:
    kept = kv_heads_per_device(shape.kv_heads, tp) if shape.kv_split_by_heads else shape.kv_heads
    layers = max(1, len(shape.layers))
    return _ceil_div(shape.kv_bytes_per_token * tokens * count * kept, layers * shape.kv_heads)


def plan(
    shape: ModelShape, tp: int, pp: int, kv_tokens: int, device_memory_bytes: int | None
) -> ParallelPlan:
    """What the most loaded device holds with `tp` × `pp` devices and `kv_tokens`
    tokens of KV cache in all (concurrency × context)."""
    layers = len(shape.layers)
    sizes = stage_sizes(layers, pp)
    stages, first = [], 0
    for i, count in enumerate(sizes):
        weights = _stage_weights(shape, tp, first, count, last=i == len(sizes) - 1)
        stages.append((weights + _stage_kv(shape, tp, count, kv_tokens), weights, count))
        first += count
    total, weights, count = max(stages)
    kept = kv_heads_per_device(shape.kv_heads, tp)
    valid, notes = _validity(shape, tp, pp, layers)
    available = available_bytes(device_memory_bytes, shape.activations.get(tp, 0))
    return ParallelPlan(
        tp=tp,
        pp=pp,
        devices=tp * pp,
        valid=valid,
        layers_per_stage=count,
        kv_heads_per_device=kept if shape.kv_split_by_heads else shape.kv_heads,
        kv_replication=max(1, tp * kept // shape.kv_heads) if shape.kv_split_by_heads else tp,
        weights_bytes_per_device=weights,
        kv_cache_bytes_per_device=total - weights,
        bytes_per_device=total,
        available_bytes_per_device=available,
        fits=None if available is None else valid and total <= available,
        note="; ".join(notes + _split_notes(shape, tp, pp)),
    )


def _validity(shape: ModelShape, tp: int, pp: int, layers: int) -> tuple[bool, list[str]]:
    notes = []
    if shape.attention_heads % tp:
        notes.append(f"not valid: {shape.attention_heads} attention heads do not divide by TP {tp}")
    kv = shape.kv_heads
    if kv % tp and tp % kv:
        notes.append(f"not valid: {kv} KV heads neither divide by nor divide TP {tp}")
    if pp > layers:
        notes.append(f"not valid: PP {pp} exceeds the {layers} layers")
    return not notes, notes


def _split_notes(shape: ModelShape, tp: int, pp: int) -> list[str]:
    notes = []
    if not shape.kv_split_by_heads and tp > 1:
        notes.append("latent KV cache: not split by heads, so every TP device holds all of it")
    elif tp > shape.kv_heads:
        copies = tp // shape.kv_heads
        notes.append(
            f"TP {tp} exceeds the {shape.kv_heads} KV heads: each device holds one KV head "
            f"(and its k/v projections), each head replicated on {copies} devices"
        )
    if shape.tied and pp > 1:
        notes.append("the tied embedding is held by both the first and the last stage")
    return notes


# -- all plans ------------------------------------------------------------------


def all_plans(
    shape: ModelShape, kv_tokens: int, device_memory_bytes: int | None, gpu_count: int = 1
) -> list[ParallelPlan]:
    """TP in 1, 2, 4, 8 × PP in 1, 2, 4, up to max(8, the chosen GPU count) devices."""
    limit = max(MAX_DEVICES, gpu_count)
    return [
        plan(shape, tp, pp, kv_tokens, device_memory_bytes)
        for pp in PP_SIZES
        for tp in TP_SIZES
        if tp * pp <= limit
    ]


def fewest_devices(plans: list[ParallelPlan]) -> ParallelPlan | None:
    """The fitting plan with the fewest devices; ties go to the least bytes per
    device, then to more TP (no pipeline bubbles at small batches)."""
    fitting = [p for p in plans if p.fits]
    if not fitting:
        return None
    return min(fitting, key=lambda p: (p.devices, p.bytes_per_device, -p.tp))
