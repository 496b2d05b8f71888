"""Which modules a variant keeps in the reference precision.

Every quantized variant keeps the LM head and the token embeddings
(`options.DEFAULT_KEPT`); a variant of `config.quant_variants` quantizes one
of them too, or also keeps the first and last decoder blocks (`edge_blocks`).
Here those parts become module names of the loaded model. Models that tie the
LM head to the token embeddings share one weight between them, so quantizing
either quantizes both (untied into two copies), and a method that never
quantizes embeddings leaves a tied head alone too. What happened is written
into `details`. A variant that changes nothing for a method (GPTQ never
touches the head, bitsandbytes never the embeddings) is reported as the same
model as the default variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from profiling.quantization.methods import Method

TIED = "tied_embeddings"


@dataclass
class KeepPlan:
    modules: list[str]  # module names left in the compute dtype
    details: dict[str, Any] = field(default_factory=dict)
    same_as_base: str | None = None  # why this keep choice changes nothing, if it does not


def module_name(model: Any, module: Any) -> str | None:
    return next((name for name, m in model.named_modules() if m is module), None)


def is_tied(model: Any) -> bool:
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or embed is None:
        return False
    return head.weight is embed.weight or head.weight.data_ptr() == embed.weight.data_ptr()


def decoder_blocks(model: Any) -> list[str]:
    """Names of the decoder blocks: the longest ModuleList of the model."""
    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        return []
    name, blocks = max(lists, key=lambda item: len(item[1]))
    return [f"{name}.{i}" for i in range(len(blocks))]


def part_modules(model: Any, part: str) -> list[str]:
    if part == "lm_head":
        found = [module_name(model, model.get_output_embeddings())]
    elif part == "embeddings":
        found = [module_name(model, model.get_input_embeddings())]
    else:  # edge_blocks
        blocks = decoder_blocks(model)
        found = sorted({blocks[0], blocks[-1]}) if blocks else []
    return [name for name in found if name]


def keep_plan(model: Any, method: Method, spec: Any) -> KeepPlan:
    """The module names `spec` (an experiment.Spec) leaves unquantized under `method`,
    on `model`'s layout."""
    tied = is_tied(model)
    parts = set(spec.kept_parts)
    details: dict[str, Any] = {}
    same = _same_as_base(method, spec.variant, tied)
    if tied and spec.quantized_parts and same is None:
        parts -= {"lm_head", "embeddings"}
        details[TIED] = (
            "lm_head and the embeddings share one weight: quantizing one quantizes both, "
            "untied into two quantized copies"
        )
    elif tied:
        details[TIED] = (
            "lm_head and the embeddings share one weight, kept in the reference precision"
        )
    if method.kind == "gptq":
        details["gptq_scope"] = "GPTQ quantizes the decoder blocks' linear layers only"
    modules = sorted({name for part in parts for name in part_modules(model, part)})
    return KeepPlan(modules, details, same)


def _same_as_base(method: Method, variant: str, tied: bool) -> str | None:
    """Why the variant builds the same model as the default one, or None."""
    if not variant:
        return None
    if method.kind == "gptq":
        if variant == "edge_blocks":
            return "the transformers GPTQ path cannot leave whole blocks unquantized"
        return "GPTQ quantizes the decoder blocks' linear layers only, never the head or embeddings"
    if variant in ("lm_head", "embeddings") and tied and not method.quantizes_embeddings:
        return (
            "lm_head shares its weight with the embeddings, which this method does not "
            "quantize: quantizing the head would untie it and store the weight twice"
        )
    if variant == "embeddings" and not method.quantizes_embeddings:
        return "this method does not quantize token embeddings"
    return None
