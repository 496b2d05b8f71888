"""Which modules a variant keeps in the reference precision.

`config.quant_keep` names parts of the model (`lm_head`, `embeddings`,
`edge_blocks`); here they become module names of the loaded model. Models
that tie the LM head to the token embeddings share one weight between them,
so keeping either keeps both, and a method that never quantizes embeddings
leaves a tied head alone too (quantizing it would untie it and store the
weight twice). What happened is written into `details`. A keep choice that
changes nothing for a method (GPTQ never touches the head, bitsandbytes
never the embeddings) is reported as the same model as the base variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    import torch

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


def keep_plan(model: Any, method: Method, keep: list[str]) -> KeepPlan:
    """The kept module names for `keep` (part names) under `method`, on `model`'s layout."""
    tied = is_tied(model)
    parts = set(keep)
    details: dict[str, Any] = {}
    if tied and parts & {"lm_head", "embeddings"}:
        parts |= {"lm_head", "embeddings"}
        details[TIED] = "lm_head and the embeddings share one weight: keeping one keeps both"
    same = _same_as_base(method, keep, tied)
    if tied and not method.quantizes_embeddings and method.kind != "gptq":
        parts.add("lm_head")
        details.setdefault(
            TIED,
            "lm_head shares its weight with the embeddings, which this method does not "
            "quantize: the head stays in the reference precision (quantizing it would untie "
            "it and store the weight twice)",
        )
    elif tied and not parts:
        details[TIED] = (
            "lm_head and the embeddings shared one weight; quantizing both untied them "
            "into two quantized copies"
        )
    if method.kind == "gptq":
        details["gptq_scope"] = "GPTQ quantizes the decoder blocks' linear layers only"
    modules = sorted({name for part in parts for name in part_modules(model, part)})
    return KeepPlan(modules, details, same)


def _same_as_base(method: Method, keep: list[str], tied: bool) -> str | None:
    if not keep:
        return None
    if method.kind == "gptq":
        if "edge_blocks" in keep:
            return "the transformers GPTQ path cannot leave whole blocks unquantized"
        return "GPTQ leaves the LM head and the embeddings unquantized already"
    if keep == ["embeddings"] and not method.quantizes_embeddings and not tied:
        return "this method leaves the token embeddings unquantized already"
    return None
