"""A model sized from its own architecture: every parameter counted by role from
transformers' class for its config, built on the meta device, and the checkpoint's
precision read from its `quantization_config`.

No weights are built and nothing is downloaded: the class is instantiated under
`torch.device("meta")` (shapes only, no storage), `trust_remote_code` stays off, and a
config whose class transformers does not ship is refused by name. Counting real
modules replaces hand formulas, so MLA's projections, shared experts, interleaved or
first-dense MoE layers, biases, sinks and vision towers are all counted as the model
has them.

A sizing is cached per config (in this process, and as JSON on disk under
`ADVISOR_SIZING_DIR`, default ~/.cache/bottleneck-advisor/sizing), so only the first
sizing of a config imports torch and builds the class; later ones read a small file.
Importing this module imports neither.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import pathlib
import re
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from importlib.metadata import version
from typing import Any

from profiling import serde

# Bump when what a sizing holds or how it is counted changes: older cache files are
# then ignored.
SIZING_VERSION = 3
ENV_VAR = "ADVISOR_SIZING_DIR"
DEFAULT_CACHE = pathlib.Path("~/.cache/bottleneck-advisor/sizing")

ROLES = ("embedding", "lm_head", "attention", "dense_mlp", "routed_experts",
         "shared_experts", "router", "norms", "vision", "other")  # fmt: skip


class SizingError(ValueError):
    """A config this library cannot size; the message names what is missing."""


@dataclass(frozen=True)
class Checkpoint:
    """The precision a checkpoint ships in (`quantization_config`)."""

    method: str  # "fp8-block", "fp8", "mxfp4", "nvfp4", "gptq", "awq", "int8", "bitsandbytes"
    label: str  # for people: "block fp8 (128×128 scales)"
    bits: float  # storage bits per quantized parameter, its scales included
    quantized_params: int  # parameters stored at `bits`
    quantized_routed_params: int  # of which routed experts'
    compute: str  # the matmuls' format when served: "float8", "fp4", "int8" or "bfloat16"
    kv: str = ""  # the KV cache format the checkpoint asks for ("float8"); "" none


@dataclass(frozen=True)
class Sizing:
    """Parameters by role, the layers' kinds and the checkpoint's format."""

    architecture: str  # the transformers class that was built
    transformers_version: str
    # Parameters by role (the model a server loads; `mtp` apart: checkpoint only).
    embedding: int = 0
    lm_head: int = 0  # 0 when tied to the embedding
    attention: int = 0  # q/k/v/o, MLA's down/up projections, linear-attention and SSM mixers
    dense_mlp: int = 0
    routed_experts: int = 0
    shared_experts: int = 0
    router: int = 0
    norms: int = 0
    vision: int = 0  # vision tower and projector
    other: int = 0
    mtp: int = 0  # multi-token-prediction layers: in the checkpoint, loaded only to draft
    # The decoder's layers.
    num_layers: int = 0
    moe_layers: int = 0  # layers with routed experts
    experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    full_layers: int = 0  # attention over the whole context
    window_layers: int = 0  # sliding-window or chunked attention, capped at `window`
    window: int = 0
    state_layers: int = 0  # linear attention / state-space: a fixed state per sequence
    kv_elements: int = 0  # cached elements per token per attention layer (K+V, or MLA latent)
    kv_replicated: bool = False  # MLA: each tensor-parallel rank holds the whole latent
    state_elements: int = 0  # per sequence, all state layers together
    attention_width: int = 0  # per attention layer: heads × (q·k dims + v dims) / 2
    decode_attention_width: int = 0  # the same as a decode step computes it; 0: as above
    hidden_size: int = 0
    vocab_size: int = 0
    unquantized_bytes: float = 2.0  # bytes per parameter the checkpoint keeps unquantized
    checkpoint: Checkpoint | None = None

    @property
    def total_params(self) -> int:
        """What a server loads: every role but the multi-token-prediction layers."""
        return sum(getattr(self, role) for role in ROLES)

    @property
    def edge_params(self) -> int:
        return self.embedding + self.lm_head

    @property
    def body_params(self) -> int:
        return self.total_params - self.edge_params

    @property
    def expert_params(self) -> float:
        """One routed expert of one layer."""
        return self.routed_experts / (self.moe_layers * self.experts) if self.experts else 0.0

    @property
    def active_params(self) -> float:
        """Parameters one token passes through: the routed experts it is sent to, every
        other weight (shared experts and dense layers included), the vision tower not."""
        unrouted = self.routed_experts * (1 - self.experts_per_token / self.experts) \
            if self.experts else 0.0  # fmt: skip
        return self.total_params - self.vision - unrouted

    def checkpoint_bytes(self, with_mtp: bool = False) -> float:
        """The weights as the checkpoint stores them, scales included."""
        total = self.total_params + (self.mtp if with_mtp else 0)
        c = self.checkpoint
        if c is None:
            return total * self.unquantized_bytes
        return c.quantized_params * c.bits / 8 + (total - c.quantized_params) * 2.0

    def checkpoint_expert_bytes(self) -> float:
        """One routed expert of one layer, as the checkpoint stores it."""
        c = self.checkpoint
        if c is None or not self.routed_experts:
            return self.expert_params * self.unquantized_bytes
        share = c.quantized_routed_params / self.routed_experts
        return self.expert_params * (share * c.bits / 8 + (1 - share) * 2.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- sizing a config -----------------------------------------------------------------


def size_config(raw: dict[str, Any]) -> Sizing:
    """The sizing of a transformers config dict; `SizingError` names what cannot be
    sized. Cached in this process and on disk."""
    key = _key(raw)
    return _cached(key, json.dumps(raw, sort_keys=True, default=str))


@lru_cache(maxsize=256)
def _cached(key: str, text: str) -> Sizing:
    path = _cache_dir() / f"{key}.json"
    try:
        return serde.from_dict(Sizing, json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    sizing = _measure(json.loads(text))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(sizing.to_dict()))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: size again next time
    return sizing


def _cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(ENV_VAR) or DEFAULT_CACHE).expanduser()


def _key(raw: dict[str, Any]) -> str:
    text = json.dumps(raw, sort_keys=True, default=str)
    salt = f"{SIZING_VERSION}:{version('transformers')}"
    return hashlib.sha256(f"{salt}\n{text}".encode()).hexdigest()[:32]


def _transformers_config(raw: dict[str, Any]) -> tuple[Any, type]:
    """(the transformers config object, the model class to build) for a config dict."""
    # heavy: transformers, only when a config is sized
    import transformers
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    data = {k: v for k, v in raw.items() if not k.startswith("_")}
    data.pop("quantization_config", None)  # read apart; the class is built unquantized
    data.pop("auto_map", None)  # remote code is never run
    model_type = data.get("model_type")
    named = [a for a in data.get("architectures") or [] if hasattr(transformers, a)]
    cls = getattr(transformers, named[0]) if named else None
    if model_type in CONFIG_MAPPING:
        config = CONFIG_MAPPING[model_type].from_dict(data)
    elif cls is not None and getattr(cls, "config_class", None) is not None:
        # A model type that needs remote code but whose architecture transformers has
        # (Kimi-K2 is `DeepseekV3ForCausalLM`, as vLLM also maps it).
        config = cls.config_class.from_dict(data)
    else:
        names = ", ".join(data.get("architectures") or []) or "none"
        raise SizingError(
            f"model_type {model_type!r} (architectures: {names}) needs code that transformers "
            f"{transformers.__version__} does not ship, and remote code is never run: "
            "this model cannot be sized"
        )
    if cls is None:
        name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
        cls = getattr(transformers, name) if name else AutoModelForCausalLM
    wanted = getattr(cls, "config_class", None)
    if isinstance(wanted, type) and not isinstance(config, wanted):
        config = config.get_text_config(decoder=True)  # a text class for a multimodal config
    return config, cls


def _measure(raw: dict[str, Any]) -> Sizing:
    # torch: torch and transformers, only when a config is sized
    import torch
    import transformers

    try:
        config, cls = _transformers_config(raw)
    except SizingError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers' own validation of the config
        raise SizingError(f"transformers does not accept this config ({type(exc).__name__}: "
                          f"{exc})") from None  # fmt: skip
    try:
        with torch.device("meta"):
            model = cls._from_config(config)
    except Exception as exc:  # noqa: BLE001 - any class error is a config we cannot size
        raise SizingError(f"transformers' {cls.__name__} cannot be built from this config "
                          f"({type(exc).__name__}: {exc})") from None  # fmt: skip
    text = config.get_text_config(decoder=True)
    counts = dict.fromkeys(ROLES, 0)
    linear: dict[str, int] = {}  # quantizable weights: nn.Linear weights and fused experts
    moe_layers: set[str] = set()
    seen: set[int] = set()  # a tied head is the embedding's tensor: counted once
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            name = f"{module_name}.{param_name}" if module_name else param_name
            role = role_of(name)
            counts[role] += param.numel()
            if role == "routed_experts":
                moe_layers.add(re.sub(r"\.experts\..*", "", name))
            if (isinstance(module, torch.nn.Linear) and param_name == "weight") or (
                role == "routed_experts" and param.dim() == 3
            ):
                linear[name] = param.numel()
    sizing = Sizing(
        architecture=cls.__name__,
        transformers_version=transformers.__version__,
        **counts,
        mtp=_mtp_params(model, text),
        **_layers(text),
        **_experts(text, counts["routed_experts"], len(moe_layers)),
        hidden_size=int(text.hidden_size),
        vocab_size=int(text.vocab_size),
        unquantized_bytes=_dtype_bytes(raw),
    )
    quant = raw.get("quantization_config") or (raw.get("text_config") or {}).get(
        "quantization_config"
    )
    if quant:
        sizing = replace(sizing, checkpoint=read_checkpoint(quant, linear))
    return sizing


# -- roles -------------------------------------------------------------------------

_VISION = ("vision", "visual", "multi_modal_projector", "image_newline", "audio")
_EMBEDDINGS = {"embed_tokens", "embeddings", "wte", "word_embeddings"}
_MLP_BLOCKS = {"mlp", "feed_forward", "block_sparse_moe", "mixer", "ffn"}
_DENSE_MLP = {"gate_proj", "up_proj", "down_proj", "fc1", "fc2", "w1", "w2", "w3",
              "dense_h_to_4h", "dense_4h_to_h"}  # fmt: skip


def role_of(name: str) -> str:
    """The role of a parameter, from its name in the transformers module tree."""
    parts = name.split(".")
    if any(v in name for v in _VISION):
        return "vision"
    if "lm_head" in parts:
        return "lm_head"
    in_layer = "layers" in parts or "h" in parts or "blocks" in parts
    if not in_layer:
        if any(p in _EMBEDDINGS for p in parts):
            return "embedding"
        return "norms" if "norm" in parts[-2].lower() or "ln_f" in parts else "other"
    if any("shared_expert" in p for p in parts):
        return "shared_experts"
    if "experts" in parts:
        return "routed_experts"
    for block, sub in zip(parts, parts[1:], strict=False):
        if block in _MLP_BLOCKS and sub in ("gate", "router"):
            return "router"
    owner = parts[-2] if len(parts) >= 2 else ""
    mixers = ("self_attn", "linear_attn", "mixer")
    if "norm" in owner.lower() and not any(p in mixers for p in parts):
        return "norms"
    if any(p in ("self_attn", "attention", "attn", "linear_attn") for p in parts):
        return "attention"
    if "mixer" in parts:
        # Hybrid stacks name every block a mixer: an MLP's projections, else attention or SSM.
        return "dense_mlp" if owner in _DENSE_MLP else "attention"
    if any(p in _MLP_BLOCKS for p in parts):
        return "dense_mlp"
    return "other"


def _mtp_params(model: Any, text: Any) -> int:
    """DeepSeek-V3-style multi-token-prediction layers, which transformers does not build:
    each is, as vLLM's `DeepSeekMultiTokenPredictorLayer` holds it, one more decoder layer
    (the last one's shape), a 2h→h projection, three norms, and its own embedding and
    head in the checkpoint."""
    n = int(getattr(text, "num_nextn_predict_layers", 0) or 0)
    if not n:
        return 0
    layers = _decoder_layers(model)
    if layers is None:
        return 0
    h, vocab = int(text.hidden_size), int(text.vocab_size)
    layer = sum(p.numel() for p in layers[-1].parameters())
    return n * (layer + 2 * h * h + 3 * h + 2 * vocab * h)


def _decoder_layers(model: Any) -> Any:
    for name, module in model.named_modules():
        if name.endswith("layers") and hasattr(module, "__len__") and "vision" not in name:
            return module
    return None


def _layer_types(text: Any) -> list[str]:
    n = int(text.num_hidden_layers)
    types = getattr(text, "layer_types", None) or getattr(text, "layers_block_type", None)
    if types:
        return list(types)[:n] if len(types) >= n else list(types)
    return ["full_attention"] * n


def _layers(text: Any) -> dict[str, Any]:
    """The decoder's layer kinds and what each caches, as vLLM allocates it."""
    types = _layer_types(text)
    known = {"full_attention", "sliding_attention", "chunked_attention", "linear_attention",
             "moe", "mlp", "attention", "mamba"}  # fmt: skip
    unknown = sorted(set(types) - known)
    if unknown:
        raise SizingError(f"layer type(s) {', '.join(unknown)} are not modelled: "
                          "their cache cannot be sized")  # fmt: skip
    heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    out: dict[str, Any] = {"num_layers": int(text.num_hidden_layers)}
    window = 0
    if "sliding_attention" in types:
        # vLLM's SlidingWindowSpec: a request holds its last `sliding_window` tokens.
        window = int(text.sliding_window)
    elif "chunked_attention" in types:
        # vLLM's ChunkedLocalAttentionSpec: a request holds at most one chunk per layer.
        window = int(text.attention_chunk_size)
    full = sum(t in ("full_attention", "attention") for t in types)
    windowed = sum(t in ("sliding_attention", "chunked_attention") for t in types)
    if (
        not getattr(text, "layer_types", None)
        and getattr(text, "sliding_window", None)
        and getattr(text, "use_sliding_window", True)
        and text.model_type in ("mistral",)
    ):
        full, windowed, window = 0, len(types), int(text.sliding_window)  # fmt: skip
    out.update(full_layers=full, window_layers=windowed, window=window)
    if getattr(text, "kv_lora_rank", None):
        # MLA: vLLM's MLAAttentionSpec caches one latent of kv_lora_rank + qk_rope_head_dim
        # per token per layer, one "head", whole on every tensor-parallel rank.
        # Prefill runs it as multi-head attention over the up-projected keys and values
        # (q·k over nope + rope dims, v over v_head_dim); decode over the latent itself,
        # every head scoring kv_lora_rank + rope dims and summing kv_lora_rank ones (vLLM's
        # MLA common backend: "compute friendly" prefill, "data-movement friendly" decode).
        rope, latent = int(text.qk_rope_head_dim), int(text.kv_lora_rank)
        out.update(kv_elements=latent + rope, kv_replicated=True,
                   attention_width=heads * (int(text.qk_nope_head_dim) + rope
                                            + int(text.v_head_dim)) // 2,
                   decode_attention_width=heads * (latent + rope + latent) // 2)  # fmt: skip
    else:
        head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
        kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
        out.update(kv_elements=2 * kv_heads * head_dim, attention_width=heads * head_dim)
    states = sum(t in ("linear_attention", "mamba") for t in types)
    out.update(state_layers=states, state_elements=states * _state_elements(text) if states else 0)
    return out


def _state_elements(text: Any) -> int:
    """One state layer's fixed state per sequence, in elements, as vLLM's
    `MambaStateShapeCalculator` shapes it (tensor parallel size 1)."""
    if getattr(text, "linear_num_value_heads", None):  # Qwen3-Next: gated delta net
        k_heads, v_heads = int(text.linear_num_key_heads), int(text.linear_num_value_heads)
        k_dim, v_dim = int(text.linear_key_head_dim), int(text.linear_value_head_dim)
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (int(text.linear_conv_kernel_dim) - 1)
        return conv + v_heads * v_dim * k_dim
    if getattr(text, "mamba_num_heads", None) and getattr(text, "ssm_state_size", None):
        heads, head_dim = int(text.mamba_num_heads), int(text.mamba_head_dim)
        state, groups = int(text.ssm_state_size), int(getattr(text, "n_groups", 1) or 1)
        kernel = int(getattr(text, "conv_kernel", 4))
        conv = (heads * head_dim + 2 * groups * state) * (kernel - 1)  # mamba2_state_shape
        return conv + heads * head_dim * state
    raise SizingError(f"{text.model_type}: its linear-attention or state-space layers are "
                      "not modelled: their state cannot be sized")  # fmt: skip


def _experts(text: Any, routed: int, layers: int) -> dict[str, int]:
    if not routed:
        return {"moe_layers": 0, "experts": 0, "experts_per_token": 0}
    names = ("n_routed_experts", "num_local_experts", "num_experts")
    experts = int(next((getattr(text, n) for n in names if getattr(text, n, None)), 0))
    per_token = int(getattr(text, "num_experts_per_tok", None) or 1)
    if not experts:
        raise SizingError(f"{text.model_type}: routed experts but no expert count in its config")
    return {"moe_layers": layers, "experts": experts, "experts_per_token": per_token}


def _dtype_bytes(raw: dict[str, Any]) -> float:
    name = (
        raw.get("torch_dtype")
        or raw.get("dtype")
        or (raw.get("text_config") or {}).get("torch_dtype")
    )
    return 4.0 if name == "float32" else 2.0


# -- the checkpoint's precision -------------------------------------------------------


def _excluded(name: str, patterns: list[str]) -> bool:
    module = name.rsplit(".", 1)[0]
    for pattern in patterns:
        if pattern.startswith("re:"):
            if re.search(pattern[3:], module):
                return True
        elif "*" in pattern:
            if fnmatch.fnmatch(module, pattern) or fnmatch.fnmatch(module, pattern + ".*"):
                return True
        elif pattern == module or f".{pattern}." in f".{module}." or module.endswith(pattern):
            return True
    return False


def read_checkpoint(quant: dict[str, Any], linear: dict[str, int]) -> Checkpoint:
    """The checkpoint's format from its `quantization_config`: which weights it stores
    quantized (the linear layers and fused experts of the decoder, never the embedding
    or the LM head, less `modules_to_not_convert` / `ignore`) and at how many bits,
    their scales included. Unknown methods are refused by name."""
    method = str(quant.get("quant_method", "")).lower()
    nested = quant.get("quantization") or {}  # ModelOpt's hf_quant_config.json layout
    skip = list(quant.get("modules_to_not_convert") or quant.get("ignore")
                or quant.get("exclude_modules") or nested.get("exclude_modules") or [])  # fmt: skip
    fmt = _format(method, quant)
    picked = {n: c for n, c in linear.items()
              if "lm_head" not in n and role_of(n) not in ("vision", "embedding")
              and not _excluded(n, skip)}  # fmt: skip
    routed = sum(c for n, c in picked.items() if role_of(n) == "routed_experts")
    return Checkpoint(
        method=fmt["method"], label=fmt["label"], bits=fmt["bits"],
        quantized_params=sum(picked.values()), quantized_routed_params=routed,
        compute=fmt["compute"], kv=fmt.get("kv", ""),
    )  # fmt: skip


def _format(method: str, q: dict[str, Any]) -> dict[str, Any]:
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            b0, b1 = (int(x) for x in block)
            # One float32 scale per block (DeepSeek-V3, Kimi-K2, Qwen3-FP8).
            return {"method": "fp8-block", "label": f"block fp8 ({b0}×{b1} scales)",
                    "bits": 8 + 32 / (b0 * b1), "compute": "float8"}  # fmt: skip
        return {"method": "fp8", "label": "fp8", "bits": 8.0, "compute": "float8"}
    if method == "mxfp4":
        # OCP MX: 32 fp4 (e2m1) values share one 8-bit (e8m0) scale; gpt-oss quantizes
        # only its experts. vLLM multiplies them with bf16 activations (weight-only: its
        # get_mxfp4_backend picks FlashInfer's MXFP4×BF16 on Blackwell unless told to
        # quantize activations to MXFP8, Marlin or Triton elsewhere).
        return {"method": "mxfp4", "label": "MXFP4", "bits": 4 + 8 / 32, "compute": "bfloat16"}
    if method in ("modelopt", "modelopt_fp4", "modelopt_fp8"):
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo", ""))
        kv = str(q.get("kv_cache_quant_algo") or
                 (q.get("quantization") or {}).get("kv_cache_quant_algo") or "")  # fmt: skip
        kv_fmt = "float8" if kv.upper() == "FP8" else ""
        if algo.upper() == "NVFP4":
            # NVFP4: 16 fp4 values share one fp8 (e4m3) scale, plus one fp32 per tensor.
            return {"method": "nvfp4", "label": "NVFP4", "bits": 4 + 8 / 16,
                    "compute": "fp4", "kv": kv_fmt}  # fmt: skip
        if algo.upper() == "FP8":
            return {"method": "fp8", "label": "fp8 (ModelOpt)", "bits": 8.0,
                    "compute": "float8", "kv": kv_fmt}  # fmt: skip
        raise SizingError(f"quantization_config: ModelOpt algorithm {algo!r} is not modelled")
    if method in ("gptq", "awq"):
        bits, group = (
            int(q.get("bits") or q.get("w_bit") or 4),
            int(q.get("group_size") or q.get("q_group_size") or 128),
        )
        group = group if group > 0 else 4096  # per channel: one scale per row, amortised
        # A 16-bit scale and a packed `bits` zero point per group.
        # Weight-only: the activations stay 16-bit (W4A16, W8A16).
        return {"method": method, "label": f"{method.upper()} int{bits} (group {group})",
                "bits": bits + (16 + bits) / group, "compute": "bfloat16"}  # fmt: skip
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            return {"method": "bitsandbytes", "label": "bitsandbytes 4-bit", "bits": 4 + 32 / 64,
                    "compute": "bfloat16"}  # fmt: skip
        return {"method": "bitsandbytes", "label": "bitsandbytes int8", "bits": 8.0,
                "compute": "int8"}  # fmt: skip
    raise SizingError(f"quantization_config: method {method or '(none)'!r} is not modelled: "
                      "its bytes cannot be sized")  # fmt: skip


def _compressed_tensors(q: dict[str, Any]) -> dict[str, Any]:
    fmt = str(q.get("format", ""))
    groups = q.get("config_groups") or {}
    weights = next((g.get("weights") for g in groups.values() if g.get("weights")), None) or {}
    bits = int(weights.get("num_bits") or 8)
    kind = str(weights.get("type", "int"))
    group = int(weights.get("group_size") or 0)
    if "nvfp4" in fmt:
        return {"method": "nvfp4", "label": "NVFP4 (compressed-tensors)", "bits": 4 + 8 / 16,
                "compute": "fp4"}  # fmt: skip
    scale_bits = 16 / group if group else 0.0
    if kind == "float" and bits == 8:
        return {"method": "fp8", "label": "fp8 (compressed-tensors)", "bits": 8 + scale_bits,
                "compute": "float8"}  # fmt: skip
    acts = next((g.get("input_activations") for g in groups.values()
                 if g.get("input_activations")), None)  # fmt: skip
    compute = "int8" if bits == 8 and acts else "bfloat16"
    return {"method": f"int{bits}", "label": f"int{bits} (compressed-tensors)",
            "bits": bits + scale_bits, "compute": compute}  # fmt: skip
