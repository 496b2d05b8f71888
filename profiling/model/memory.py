"""Memory: weights and KV cache in real bytes, and peak tracking.

Every figure that can be measured is measured from real tensors (storage
bytes of the loaded parameters, bytes of the cache a forward pass filled),
with the textbook formula kept beside it as a cross-check. Whether the weights
and the KV cache fit on the target GPUs is `profiling.projection.fit`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import chain
from typing import Any

import psutil
import torch
from transformers import DynamicCache

from profiling.model.sizing import size_config

# Token counts of the two forwards whose cache sizes are differenced. Short,
# so they stay below any sliding window and take milliseconds.
KV_PROBE_TOKENS = (8, 24)


# -- weights --------------------------------------------------------------------


def _storage_key_and_bytes(tensor: Any) -> tuple[tuple[str, int], int]:
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError, AttributeError):
        # Tensor subclasses (some quantized weights) have no plain storage.
        return (str(tensor.device), id(tensor)), tensor.numel() * tensor.element_size()


def weights_bytes(model: Any) -> tuple[int, dict[str, int]]:
    """Bytes held by parameters and buffers, counting each storage once.

    Tied weights (embedding = LM head) share one storage and count once;
    a view into a larger storage counts the whole storage, since that is
    what occupies memory. Returns (total, bytes by dtype name).
    """
    seen: set[tuple[str, int]] = set()
    by_dtype: dict[str, int] = {}
    for tensor in chain(model.parameters(), model.buffers()):
        key, nbytes = _storage_key_and_bytes(tensor)
        if key in seen:
            continue
        seen.add(key)
        name = str(tensor.dtype).removeprefix("torch.")
        by_dtype[name] = by_dtype.get(name, 0) + nbytes
    return sum(by_dtype.values()), by_dtype


# -- KV cache -------------------------------------------------------------------


def kv_bytes_per_token_computed(config: Any, dtype_bytes: int) -> int:
    """The estimate's own figure (`profiling.model.sizing`, one sizing for both): every
    attention layer's K and V, or MLA's one latent of `kv_lora_rank + qk_rope_head_dim`
    (DeepSeek-V3), at `dtype_bytes` per element. Sliding-window layers count as full
    layers: below the window, where the measurement below is taken, they grow as full
    ones do."""
    sized = size_config(config.to_dict() if hasattr(config, "to_dict") else dict(config))
    return (sized.full_layers + sized.window_layers) * sized.kv_elements * dtype_bytes


def cache_bytes(cache: Any) -> int:
    """Bytes of the key/value tensors a transformers cache currently holds."""
    total = 0
    for layer in getattr(cache, "layers", []):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if tensor is not None and hasattr(tensor, "numel"):
                total += tensor.numel() * tensor.element_size()
    return total


def filled_cache_bytes(model: Any, tokens: int, device: str, seed: int = 0) -> int:
    """Cache bytes after one forward of `tokens` random ids at batch 1."""
    vocab = model.config.get_text_config(decoder=True).vocab_size
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, tokens), generator=generator).to(device)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    return cache_bytes(cache)


def kv_bytes_per_token_measured(
    model: Any, device: str, lengths: tuple[int, int] = KV_PROBE_TOKENS
) -> int:
    """KV bytes per token of a real cache: fill it at two lengths, difference.

    The difference cancels any fixed per-cache overhead, leaving the true
    marginal cost of one more token in context.
    """
    short, long = lengths
    grown = filled_cache_bytes(model, long, device) - filled_cache_bytes(model, short, device)
    return round(grown / (long - short))


# -- peak tracking --------------------------------------------------------------


@dataclass
class PeakReading:
    peak_bytes: int | None
    method: str  # "cuda_max_allocated" (absolute, incl. weights) or "rss_delta"
    nvml_used_bytes: int | None = None


class PeakMemory:
    """Context manager recording the memory peak of the code inside it.

    On CUDA: `max_memory_allocated` after `reset_peak_memory_stats` — the
    peak of live tensors, weights included — plus NVML's used bytes (whole
    device, CUDA context included) when NVML works. On CPU: process RSS
    sampled by a background thread; the peak's rise above the RSS at entry
    (tracemalloc cannot see torch's allocations).
    """

    def __init__(self, device: str, interval_s: float = 0.002) -> None:
        self.device = device
        self.interval_s = interval_s
        self.reading = PeakReading(None, "none")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._baseline = 0
        self._peak = 0

    def __enter__(self) -> PeakMemory:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        self._baseline = self._peak = _rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._peak = max(self._peak, _rss())

    def __exit__(self, *exc_info: object) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            self.reading = PeakReading(peak, "cuda_max_allocated", nvml_used_bytes(self.device))
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, _rss())
        self.reading = PeakReading(self._peak - self._baseline, "rss_delta")


def _rss() -> int:
    return psutil.Process().memory_info().rss


def nvml_used_bytes(device: str) -> int | None:
    """Used bytes of the whole GPU as NVML sees it, or None without NVML."""
    try:
        # optional: without NVML (no NVIDIA driver) the value is None
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(_nvml_handle(pynvml, device)).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no NVML, a MIG slice: the figure is optional
        return None


def _nvml_handle(pynvml: Any, device: str) -> Any:
    """The NVML handle of a torch CUDA device, found by UUID: NVML numbers
    all GPUs, while torch numbers only those in CUDA_VISIBLE_DEVICES."""
    try:
        uuid = str(torch.cuda.get_device_properties(torch.device(device)).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # older torch without .uuid, or a MIG UUID: fall back to the index
        index = int(device.split(":")[1]) if ":" in device else 0
        return pynvml.nvmlDeviceGetHandleByIndex(index)
