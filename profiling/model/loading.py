"""Where a model comes from, and loading it safely.

`resolve` classifies what the user typed (demo name, local directory, Hub id,
config only) and checks it without loading anything heavy; `load` turns it
into a model on a device. Every source ends in the same local-directory path:
a demo is built into a cache directory, a Hub repo is downloaded into the Hub
cache, and both are then loaded exactly like a directory the user gave.

Safety rules, enforced here and nowhere else:
- `trust_remote_code` is never enabled; a config that asks for custom code
  (an `auto_map`, or an architecture transformers does not ship) is refused.
- Only safetensors weights are loaded; pickle `.bin` files are never read,
  nor downloaded.
- A local directory must lie under one of `config.allowed_roots` (None: any;
  an empty list: none),
  judged on the fully resolved path so a symlink cannot point outside.
- A Hub id is validated as a repo id and never used as a filesystem path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.utils import is_accelerate_available

from profiling.config import ProfileConfig, is_repo_id
from profiling.errors import (
    DeviceUnavailable,
    ModelSourceError,
    PathNotAllowed,
    RemoteCodeError,
    TooLarge,
    one_line,
)
from profiling.measure.progress import span
from profiling.model.hub import download, download_config, revision
from profiling.model.info import ModelInfo
from profiling.model.shapes import DTYPE_BYTES
from profiling.model.sizing import SizingError, size_config

Progress = Callable[[str, float, str], None]

DEMO_NAMES = ("demo", "demo-draft")  # fallback when profiling.model.demo is absent
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
_REMOTE_CODE = "this model needs trust_remote_code, which Bottleneck Advisor never enables"


@dataclass(frozen=True)
class Source:
    """A classified, checked model reference."""

    kind: str  # "demo", "hub", "local", "config"
    name: str  # what the user gave
    path: Path | None = None  # resolved directory, or config.json for config-only
    repo_id: str | None = None  # set for Hub models (and config-only Hub ids)


@dataclass
class Loaded:
    model: Any  # a transformers PreTrainedModel, in eval mode
    tokenizer: Any | None
    info: ModelInfo
    source: Source
    path: Path | None = None  # the directory the weights came from


def _noop(phase: str, fraction: float, message: str) -> None:
    pass


# -- device and dtype ---------------------------------------------------------


def pick_device(requested: str) -> str:
    """ "auto" → cuda if present, else mps, else cpu; a missing device raises."""
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if requested == "auto":
        return "cuda:0" if cuda else "mps" if mps else "cpu"
    if requested == "cuda" and not cuda:
        raise DeviceUnavailable("CUDA was requested but no CUDA GPU is visible on this machine")
    if requested == "mps" and not mps:
        raise DeviceUnavailable("MPS was requested but is not available on this machine")
    return "cuda:0" if requested == "cuda" else requested


def pick_dtype(requested: str, device: str) -> str:
    """ "auto" → bfloat16 on CUDA (what servers run; float16 on GPUs without
    bfloat16), float32 elsewhere."""
    if requested != "auto":
        return requested
    if not device.startswith("cuda"):
        return "float32"

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


# -- resolve --------------------------------------------------------------------


def demo_names() -> tuple[str, ...]:
    try:
        # optional: a version without the demo models
        from profiling.model.demo import DEMO_MODELS
    except ImportError:
        return DEMO_NAMES
    return tuple(DEMO_MODELS)


def resolve(config: ProfileConfig, progress: Progress | None = None) -> Source:
    """Classify and check `config.model`; builds a demo model if needed
    (reporting that build through `progress`)."""
    name, source = config.model, config.source
    if source == "config":
        return _resolve_config_only(name, config.allowed_roots)
    if source == "demo" or (source == "auto" and name in demo_names()):
        return _resolve_demo(name, progress or _noop)
    if source == "local" or (source == "auto" and _looks_local(name)):
        path = local_dir(name, config.allowed_roots)
        require_weights(path)
        return Source("local", name, path)
    if not is_repo_id(name):
        raise ModelSourceError(
            f"{name!r} is neither a Hugging Face repo id (namespace/name) nor an absolute "
            "directory path"
        )
    return Source("hub", name, repo_id=name)


def _looks_local(name: str) -> bool:
    return os.path.isabs(name) or name.startswith(("./", "../", "~")) or os.path.exists(name)


def _resolve_demo(name: str, progress: Progress) -> Source:
    if name not in demo_names():
        raise ModelSourceError(f"unknown demo model {name!r}; choose {' or '.join(demo_names())}")
    try:
        # optional: a version without the demo models
        from profiling.model.demo import ensure_demo
    except ImportError as exc:
        raise ModelSourceError("the demo models are not available in this version") from exc
    # The demo directory is ours, not the user's: the allowed roots do not apply.
    path = Path(ensure_demo(name, progress=progress)).resolve(strict=True)
    require_weights(path)
    return Source("demo", name, path)


def _resolve_config_only(name: str, roots: list[str] | None) -> Source:
    if is_repo_id(name) and not _looks_local(name):
        return Source("config", name, repo_id=name)
    path = local_dir(name, roots, want_dir=False)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ModelSourceError(f"no config.json in {name}")
    return Source("config", name, path)


def local_dir(name: str, roots: list[str] | None, want_dir: bool = True) -> Path:
    """The resolved path of a local model, checked against the allowed roots.

    The roots check comes first and uses the resolved path (symlinks
    followed), so a link inside a root that points outside is refused, and a
    path outside the roots is refused before its existence is revealed.
    """
    if roots is not None and not roots:
        raise PathNotAllowed(f"{name}: this worker loads no local directories (no roots allowed)")
    path = Path(name).expanduser().resolve()
    if roots and not any(path.is_relative_to(Path(r).expanduser().resolve()) for r in roots):
        raise PathNotAllowed(f"{name} is outside the directories this worker may read")
    try:
        path = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ModelSourceError(f"model path {name} does not exist") from exc
    if want_dir and not path.is_dir():
        raise ModelSourceError(f"{name} is not a directory")
    return path


def require_weights(path: Path) -> None:
    """A loadable directory has config.json and at least one .safetensors file."""
    if not (path / "config.json").is_file():
        raise ModelSourceError(f"no config.json in {path}")
    if any(path.glob("*.safetensors")):
        return
    pickles = any(p.suffix in _PICKLE_SUFFIXES for p in path.iterdir())
    found = " (only pickle weights were found)" if pickles else ""
    raise ModelSourceError(
        f"{path} has no safetensors weights{found}; pickle .bin files are never loaded"
    )


def check_remote_code(config_dict: dict[str, Any]) -> None:
    """Refuse configs whose model class is not built into transformers."""
    if config_dict.get("auto_map"):
        raise RemoteCodeError(f"{_REMOTE_CODE} (its config.json has an auto_map)")
    model_type = config_dict.get("model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise RemoteCodeError(f"{_REMOTE_CODE} (model type {model_type!r} is not in transformers)")
    for arch in config_dict.get("architectures") or []:
        if not hasattr(transformers, arch):
            raise RemoteCodeError(f"{_REMOTE_CODE} (architecture {arch} is not in transformers)")


def refuse_if_too_large(raw: dict[str, Any], name: str, device: str, dtype: str,
                        verb: str) -> None:
    """Refuse, before allocating anything, a model whose weights in `dtype` (a quantized
    checkpoint loaded as it ships: its own bytes) exceed what `device` has free: the
    free memory of every visible GPU together on CUDA, the available host memory
    elsewhere. Sized from the config alone (`profiling.model.sizing`)."""
    try:
        sizing = size_config(raw)
    except SizingError:
        return  # the build itself then says what is wrong with the config
    per = DTYPE_BYTES.get(dtype, 2)
    need = sizing.checkpoint_bytes() if sizing.checkpoint and verb == "load" \
        else sizing.total_params * per  # fmt: skip
    free, where = free_bytes(device)
    if free is not None and need > free:
        raise TooLarge(
            f"{name} needs {need / 2**30:,.1f} GiB for its weights "
            f"({sizing.total_params / 1e9:,.2f} B parameters in {dtype}) but {where} has "
            f"{free / 2**30:,.1f} GiB free: nothing was {'built' if verb == 'build' else 'loaded'}"
            "; estimate it instead (python -m profiling estimate) or use a larger device"
        )


def free_bytes(device: str) -> tuple[int | None, str]:
    """(bytes free to hold weights, where): all visible GPUs on CUDA, else host memory."""
    if device.startswith("cuda"):
        count = torch.cuda.device_count()
        free = sum(torch.cuda.mem_get_info(i)[0] for i in range(count))
        return free, f"{count} visible GPU{'s' * (count != 1)}"
    try:
        # optional: psutil missing or restricted leaves the field empty
        import psutil
    except ImportError:
        return None, "this machine"
    return psutil.virtual_memory().available, "this machine's memory"


def read_config_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelSourceError(f"cannot read {path.name}: {one_line(exc)}") from exc
    if not isinstance(data, dict):
        raise ModelSourceError(f"{path.name} is not a JSON object")
    return data


# -- load -----------------------------------------------------------------------


def load(
    config: ProfileConfig,
    device: str,
    dtype: str,
    progress: Progress | None = None,
    quantization: Any = None,
) -> Loaded:
    """Resolve, fetch and load the model of `config` onto `device` in `dtype`.

    `quantization` is a transformers quantization config (bitsandbytes, GPTQ)
    applied while the weights load; config-only models cannot take one.
    """
    progress = progress or _noop

    progress("load", 0.0, f"finding {config.model}")
    source = resolve(config, span(progress, 0.0, 0.5))  # a first demo build takes a while
    if source.kind == "config":
        if quantization is not None:
            raise ModelSourceError("a config-only model has no weights to quantize while loading")
        return _load_config_only(source, device, dtype, progress)
    path = source.path
    if path is None:
        progress("load", 0.05, f"downloading {source.repo_id}")
        path = download(source.repo_id or source.name)
        require_weights(path)
    progress("load", 0.5, f"loading weights from {path.name}")
    raw = read_config_json(path / "config.json")
    check_remote_code(raw)
    refuse_if_too_large(raw, source.name, device, dtype, "load")
    model = _from_pretrained(path, device, dtype, source.name, quantization)
    tokenizer = _load_tokenizer(path)
    info = model_info(model, source, config_only=False, revision=revision(path))
    progress("load", 1.0, f"loaded {info.num_parameters / 1e6:,.1f} M parameters")
    return Loaded(model, tokenizer, info, source, path)


def _torch_dtype(dtype: str) -> Any:
    return getattr(torch, dtype)


def _from_pretrained(
    path: Path, device: str, dtype: str, name: str, quantization: Any = None
) -> Any:
    kwargs: dict[str, Any] = {
        "dtype": _torch_dtype(dtype),
        "trust_remote_code": False,
        "use_safetensors": True,
        "local_files_only": True,
    }
    # transformers needs `accelerate` for any device_map; without it the
    # weights go through host memory and are moved to the device after.
    direct = (device != "cpu" and is_accelerate_available()) or quantization is not None
    if quantization is not None:  # quantized weights are placed while loading, never moved
        kwargs["quantization_config"] = quantization
    if direct:
        kwargs["device_map"] = device
    spread = _several_gpus(path, device) if quantization is None else None
    if spread and is_accelerate_available():
        # Larger than one GPU: its layers over every visible GPU, in order (each step
        # passes through them one after another; the profile says so).
        kwargs["device_map"], kwargs["max_memory"] = "auto", spread
    try:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelSourceError(f"could not load {name} as a causal LM: {one_line(exc)}") from exc
    if not direct:
        model.to(device)
    return model.eval()


# Of a GPU's memory the weights may take before they go over several: the rest holds
# the KV cache, activations and the framework's own reserve.
ONE_GPU_SHARE = 0.8


def spread_over(weights_bytes: int, per_gpu_bytes: list[int]) -> dict[int, int] | None:
    """{gpu index: bytes it may hold} when the weights do not fit the first GPU but fit
    the visible ones together; None when one GPU holds them (or all of them cannot)."""
    if len(per_gpu_bytes) < 2 or weights_bytes <= ONE_GPU_SHARE * per_gpu_bytes[0]:
        return None
    room = {i: int(ONE_GPU_SHARE * b) for i, b in enumerate(per_gpu_bytes)}
    return room if weights_bytes <= sum(room.values()) else None


def _several_gpus(path: Path, device: str) -> dict[int, int] | None:
    if not device.startswith("cuda"):
        return None

    count = torch.cuda.device_count()
    if count < 2:
        return None
    weights = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    return spread_over(weights, [torch.cuda.mem_get_info(i)[1] for i in range(count)])


def _load_tokenizer(path: Path) -> Any | None:
    """The model's tokenizer, or None (the profile then uses random token ids)."""
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        return None

    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    except Exception:  # a broken tokenizer must not stop a timing run
        return None


def _load_config_only(source: Source, device: str, dtype: str, progress: Progress) -> Loaded:
    path = source.path or download_config(source.repo_id or source.name)
    raw = read_config_json(path)
    check_remote_code(raw)
    refuse_if_too_large(raw, source.name, device, dtype, "build")
    progress("load", 0.3, "building the model with random weights")
    try:
        cfg = AutoConfig.from_pretrained(path, trust_remote_code=False, local_files_only=True)
        with torch.device(device):  # allocate on the device directly, not via the host
            model = AutoModelForCausalLM.from_config(cfg, dtype=_torch_dtype(dtype))
    except (OSError, ValueError, KeyError) as exc:
        message = f"cannot build {source.name} from its config: {one_line(exc)}"
        raise ModelSourceError(message) from exc
    info = model_info(model.eval(), source, config_only=True, revision=revision(path.parent))
    progress("load", 1.0, f"built {info.num_parameters / 1e6:,.1f} M random parameters")
    return Loaded(model, None, info, source, path.parent)


def model_info(model: Any, source: Source, *, config_only: bool, revision: str | None) -> ModelInfo:
    """ModelInfo from the model's (text) config and its parameter count."""
    cfg = model.config
    text = cfg.get_text_config(decoder=True)
    heads = text.num_attention_heads
    return ModelInfo(
        name=source.name,
        source=source.kind,
        architecture=(getattr(cfg, "architectures", None) or [type(model).__name__])[0],
        config_only=config_only,
        num_parameters=sum(p.numel() for p in model.parameters()),
        num_layers=text.num_hidden_layers,
        hidden_size=text.hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=getattr(text, "num_key_value_heads", None) or heads,
        head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads,
        vocab_size=text.vocab_size,
        intermediate_size=getattr(text, "intermediate_size", None),
        max_position_embeddings=getattr(text, "max_position_embeddings", None),
        revision=revision,
    )
