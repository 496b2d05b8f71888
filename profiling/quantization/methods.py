"""How each precision is made: one registry dict, precision name → Method.

A Method says whether it can run here (`unavailable` returns the reason it
cannot, or None) and builds a fresh model from the run's source through the
project's own loader (`profiling.model.loading.load`: demo, local directory, Hub
or config-only; safetensors only; no remote code):

- dtype variants load straight in their dtype;
- torchao variants load in the compute dtype and are quantized in place
  with `torchao.quantization.quantize_`, skipping the kept modules;
- bitsandbytes and GPTQ variants quantize while transformers loads the
  weights (`BitsAndBytesConfig`, `GPTQConfig`); GPTQ calibrates on text of
  the project's own corpus first. Config-only models are saved to a
  temporary directory first so these loaders have weights to read.
"""

from __future__ import annotations

import importlib.util
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import torch
from transformers import AutoConfig, BitsAndBytesConfig, GPTQConfig

from profiling.config import ProfileConfig
from profiling.model import demo_corpus
from profiling.model.loading import load, resolve
from profiling.quantization.results import MethodSettings

QUANT_EXTRA = "install the quant extra: pip install 'bottleneck-advisor[quant]'"
GPTQ_EXTRA = "install the gptq extra: pip install 'bottleneck-advisor[gptq]'"
CALIBRATION_SEED = 4242  # a seed of the demo grammar used for neither training nor evaluation
CALIBRATION_CHARS = 24_000


class NotAvailable(Exception):
    """This method cannot run on this worker (or for this model); the message says why."""


@dataclass
class Request:
    """What a method needs to build one variant."""

    config: ProfileConfig  # the run's config: the same source for every variant
    device: str
    compute_dtype: str  # activations and every part left unquantized ("float32", ...)
    kept: list[str] = field(default_factory=list)  # module names left in compute_dtype
    config_only: bool = False
    tokenizer: Any | None = None
    calibration_samples: int = 32


@dataclass
class Built:
    model: Any
    tokenizer: Any | None
    settings: MethodSettings


@dataclass(frozen=True)
class Method:
    kind: str  # "dtype", "torchao", "bitsandbytes", "gptq"
    weight_dtype: str
    bits: int
    make: Callable[[Method, Request], Built]
    unavailable: Callable[[str, Request], str | None]
    group_size: int | None = None
    torchao_config: str = ""  # class name in torchao.quantization
    quantizes_embeddings: bool = False  # the base variant quantizes the token embeddings too

    @property
    def quantized(self) -> bool:
        return self.kind != "dtype"


# -- availability ---------------------------------------------------------------------


def _missing(*modules: str) -> bool:
    return any(importlib.util.find_spec(name) is None for name in modules)


def _dtype_ok(precision: str, request: Request) -> str | None:
    if precision == "bf16" and request.device.startswith("cuda"):  # noqa: SIM102
        if not torch.cuda.is_bf16_supported():
            return "this GPU does not support bfloat16"
    return None


def _torchao_ok(precision: str, request: Request) -> str | None:
    if _missing("torchao"):
        return "torchao is not installed (pip install torchao)"
    if request.device == "mps":
        return "torchao quantization runs on CPU and CUDA, not on MPS"
    return None


def _cuda_only(precision: str, request: Request) -> str | None:
    if not request.device.startswith("cuda"):
        return (
            "torchao int4 weight-only has CUDA kernels only; on CPU every packing fails "
            "(it needs the CUDA-only mslk kernels)"
        )
    return _torchao_ok(precision, request)


def _fp8_gpu(precision: str, request: Request) -> str | None:
    if not request.device.startswith("cuda"):
        return "float8 needs a GPU with fp8 support (compute capability 8.9+: Ada, Hopper, later)"

    major, minor = torch.cuda.get_device_capability(request.device)
    if (major, minor) < (8, 9):
        return f"this GPU (compute capability {major}.{minor}) has no fp8: 8.9+ is needed"
    return _torchao_ok(precision, request)


def _bnb_ok(precision: str, request: Request) -> str | None:
    if _missing("bitsandbytes"):
        return f"bitsandbytes is not installed: {QUANT_EXTRA}"
    if request.device == "mps":
        return "bitsandbytes does not run on MPS"
    return None


def _gptq_ok(precision: str, request: Request) -> str | None:
    if _missing("gptqmodel", "optimum"):
        return f"gptqmodel and optimum are not installed: {GPTQ_EXTRA}"
    if request.device == "mps":
        return "GPTQ kernels do not run on MPS"
    if request.tokenizer is None:
        return "GPTQ calibrates on text, and this model has no tokenizer"
    return None


# -- building -------------------------------------------------------------------------


def library(name: str) -> str:
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


def _settings(method: Method, request: Request, **extra: Any) -> MethodSettings:
    return MethodSettings(
        method=method.kind,
        weight_dtype=method.weight_dtype,
        bits=method.bits,
        group_size=method.group_size,
        compute_dtype=request.compute_dtype,
        kept_modules=list(request.kept),
        **extra,
    )


def _by_dtype(method: Method, request: Request) -> Built:
    loaded = load(request.config, request.device, method.weight_dtype)
    settings = _settings(method, request, library=library("torch"))
    settings.compute_dtype = method.weight_dtype
    return Built(loaded.model, loaded.tokenizer, settings)


def is_kept(name: str, kept: list[str]) -> bool:
    return any(name == k or name.startswith(k + ".") for k in kept)


def kernel_missing(config: str, exc: ImportError) -> str:
    package = getattr(exc, "name", None) or ""
    install = f": pip install {package.split('.')[0]}" if package else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"torchao {config} needs a kernel package that is not installed ({first}){install}"


def _torchao(method: Method, request: Request) -> Built:
    # optional: a torchao that fails to import fails only its own variants
    from torchao import quantization

    loaded = load(request.config, request.device, request.compute_dtype)
    kinds: tuple[type, ...] = (torch.nn.Linear,)
    if method.quantizes_embeddings:
        kinds += (torch.nn.Embedding,)
    names = [
        name
        for name, module in loaded.model.named_modules()
        if isinstance(module, kinds) and not is_kept(name, request.kept)
    ]
    chosen = set(names)
    options = {"group_size": method.group_size} if method.group_size else {}
    try:
        config = getattr(quantization, method.torchao_config)(**options)
        quantization.quantize_(loaded.model, config, filter_fn=lambda m, fqn: fqn in chosen)
    except ImportError as exc:
        # Recent torchao keeps some kernels (int4 on CUDA) in a separate package; its
        # import error names it. Not installed is "not available", not a failed run.
        raise NotAvailable(kernel_missing(method.torchao_config, exc)) from exc
    settings = _settings(method, request, quantized_modules=len(names), library=library("torchao"))
    settings.details["torchao_config"] = method.torchao_config
    return Built(loaded.model, loaded.tokenizer, settings)


def _bitsandbytes(method: Method, request: Request) -> Built:
    if method.bits == 8:
        config = BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=list(request.kept))
    else:
        config = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=getattr(torch, request.compute_dtype),
            llm_int8_skip_modules=list(request.kept),
        )
    built = _load_quantized(method, request, config, library("bitsandbytes"))
    if method.bits == 8:
        built.settings.details["outlier_threshold"] = config.llm_int8_threshold
        if request.device == "cpu":
            built.settings.details["cpu_inputs"] = "cast to float16 for the int8 matmul"
            # bitsandbytes logs this on every matmul; once in the settings is enough
            logging.getLogger("bitsandbytes.autograd._functions").addFilter(_not_cast_notice)
    return built


def _gptq(method: Method, request: Request) -> Built:
    group = gptq_group_size(request)
    config = GPTQConfig(
        bits=4,
        group_size=group,
        dataset=calibration_texts(request.calibration_samples),
        tokenizer=request.tokenizer,
        desc_act=False,
    )
    libraries = f"{library('gptqmodel')}, {library('optimum')}"
    built = _load_quantized(method, request, config, libraries)
    built.settings.group_size = group
    built.settings.details["calibration"] = (
        f"{request.calibration_samples} paragraphs of the demo grammar (seed {CALIBRATION_SEED})"
    )
    return built


def _not_cast_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("MatMul8bitLt: inputs will be cast")


def gptq_group_size(request: Request) -> int:
    """The largest usual group size that divides every quantized layer's input width."""
    source = resolve(request.config)
    path = source.path.parent if source.kind == "config" and source.path else source.path
    text = AutoConfig.from_pretrained(path, local_files_only=True).get_text_config(decoder=True)
    widths = [text.hidden_size, getattr(text, "intermediate_size", text.hidden_size)]
    return next((g for g in (128, 64, 32) if all(w % g == 0 for w in widths)), 16)


def calibration_texts(samples: int) -> list[str]:
    paragraphs = demo_corpus.documents(demo_corpus.generate(CALIBRATION_SEED, CALIBRATION_CHARS))
    return paragraphs[:samples]


def _load_quantized(method: Method, request: Request, quant: Any, lib: str) -> Built:
    """Load through transformers with a quantization config, from real weights
    (config-only models are saved with random weights to a temporary directory first)."""
    if not request.config_only:
        loaded = load(request.config, request.device, request.compute_dtype, quantization=quant)
    else:
        with tempfile.TemporaryDirectory(prefix="quant-") as folder:
            random = load(request.config, "cpu", request.compute_dtype)
            random.model.save_pretrained(folder)
            del random
            local = request.config.replace(model=folder, source="local", allowed_roots=[folder])
            loaded = load(local, request.device, request.compute_dtype, quantization=quant)
    count = sum(1 for _, m in loaded.model.named_modules() if _is_quantized_linear(m))
    settings = _settings(method, request, quantized_modules=count, library=lib)
    return Built(loaded.model, loaded.tokenizer or request.tokenizer, settings)


def _is_quantized_linear(module: Any) -> bool:
    return hasattr(module, "qweight") or type(module).__name__ in ("Linear8bitLt", "Linear4bit")


METHODS: dict[str, Method] = {
    "fp32": Method("dtype", "float32", 32, _by_dtype, _dtype_ok),
    "bf16": Method("dtype", "bfloat16", 16, _by_dtype, _dtype_ok),
    "fp16": Method("dtype", "float16", 16, _by_dtype, _dtype_ok),
    "int8": Method(
        "torchao",
        "int8",
        8,
        _torchao,
        _torchao_ok,
        torchao_config="Int8WeightOnlyConfig",
        quantizes_embeddings=True,
    ),
    "int8-dynamic": Method(
        "torchao",
        "int8",
        8,
        _torchao,
        _torchao_ok,
        torchao_config="Int8DynamicActivationInt8WeightConfig",
    ),
    "int4": Method(
        "torchao", "int4", 4, _torchao, _cuda_only, 128, torchao_config="Int4WeightOnlyConfig"
    ),
    "fp8": Method(
        "torchao", "float8_e4m3fn", 8, _torchao, _fp8_gpu, torchao_config="Float8WeightOnlyConfig"
    ),
    "bnb-int8": Method("bitsandbytes", "int8", 8, _bitsandbytes, _bnb_ok),
    "bnb-nf4": Method("bitsandbytes", "nf4", 4, _bitsandbytes, _bnb_ok, 64),
    "gptq-int4": Method("gptq", "int4", 4, _gptq, _gptq_ok, 128),
}
