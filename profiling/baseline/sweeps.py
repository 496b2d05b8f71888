"""The baseline experiment: measured prefill and decode sweeps.

Prefill: one forward pass over a batch of prompts, computing logits for the
last token only (`logits_to_keep=1`), as a server does before sampling the
first token. Decode: the context is prefilled once into a KV cache (a static
one, compiled on CUDA, see `decode_path`), then single decode steps (one token
per row) are timed; before each step, outside the timing, the cache is cropped
back to the context (`cache.crop(-n)`, transformers >= 5.20 semantics), so
every sample sees the same context length without copying the cache. Each
decode point records the path that ran. Everything runs under `torch.inference_mode()`.

FLOPs of a prefill of T tokens at batch B (documented so "% of peak" can be
checked by hand):
    2 × body_params × T × B          every non-embedding weight, once per token
  + 2 × vocab × hidden × B           the LM head, for the last token only
  + 2 × layers × (heads × head_dim) × T² × B
                                     causal attention: QKᵀ and AV, 2 × 2 × d × T²
                                     each layer, halved by the causal mask
and of one decode step at batch B over a context of C tokens:
    B × (2 × body_params + 2 × vocab × hidden + 4 × layers × (heads × head_dim) × C)
Bytes a prefill moves: the weights once and the KV cache it writes; a decode
step: the weights once and the KV cache it reads.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from profiling.baseline.plan import Plan
from profiling.errors import OutOfMemory, is_out_of_memory
from profiling.measure import decode_path
from profiling.measure.hardware import GPU
from profiling.measure.progress import Progress, no_progress
from profiling.measure.timing import Clock, measure, noisy_warnings
from profiling.model.info import ModelInfo
from profiling.model.memory import PeakMemory, PeakReading
from profiling.results import DecodePoint, PrefillPoint, Samples

OnSample = Callable[[int, int], None]

# Fixed prompt text for models with a tokenizer; repeated to any length.
PROMPT_TEXT = (
    "Serving a language model has two phases. The prompt is read in one pass, which keeps "
    "the GPU's arithmetic units busy; then tokens are generated one at a time, and every step "
    "reads all the weights and the whole key-value cache from memory. Which phase dominates "
    "depends on the prompt length, the number of generated tokens and how many requests share "
    "the device at once. "
)


@dataclass
class Subject:
    """The loaded model and the figures the sweeps need about it."""

    model: Any
    tokenizer: Any | None
    info: ModelInfo
    device: str
    dtype: str
    weights_bytes: int
    kv_bytes_per_token: int
    gpu: GPU | None = None  # the catalog GPU this device is, for "% of peak"
    seed: int = 0
    decode_path: str = "auto"  # decode_path.PATHS
    copy_bandwidth: float | None = None  # measured on the device (profiling.measure.bandwidth)
    compiled: dict[str, Any] = field(default_factory=dict)  # the compiled forward, once


@dataclass
class BaselineResult:
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]
    peak: PeakReading
    peak_prompt_tokens: int = 0
    peak_batch_size: int = 0
    warnings: list[str] = field(default_factory=list)


# -- inputs and formulas --------------------------------------------------------


def input_ids(subject: Subject, batch: int, tokens: int, offset: int = 0) -> Any:
    """A [batch, tokens] id tensor: the fixed text if there is a tokenizer,
    else seeded random ids. Rows differ (shifted) so no batch is degenerate."""
    vocab = subject.info.vocab_size
    base: list[int] = []
    if subject.tokenizer is not None:
        base = list(subject.tokenizer(PROMPT_TEXT, add_special_tokens=False)["input_ids"])
    if base:
        need = tokens + batch + offset
        ids = torch.tensor((base * (need // len(base) + 1))[:need]) % vocab
        rows = [ids[offset + r : offset + r + tokens] for r in range(batch)]
        return torch.stack(rows).to(subject.device)
    generator = torch.Generator().manual_seed(subject.seed + offset)
    return torch.randint(0, vocab, (batch, tokens), generator=generator).to(subject.device)


def body_and_head_params(model: Any) -> tuple[int, int]:
    """(non-embedding parameters excluding an untied LM head, LM head size)."""
    total = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings().weight
    head_module = model.get_output_embeddings()
    head = head_module.weight if head_module is not None else embed
    tied = head.data_ptr() == embed.data_ptr()
    return total - embed.numel() - (0 if tied else head.numel()), head.numel()


def prefill_flops(info: ModelInfo, body: int, head: int, tokens: int, batch: int) -> float:
    """Model FLOPs of one prefill; the formula is in the module docstring."""
    attention = 2 * info.num_layers * info.num_attention_heads * info.head_dim * tokens**2
    return float(batch * (2 * body * tokens + 2 * head + attention))


def decode_flops(info: ModelInfo, body: int, head: int, batch: int, context: int) -> float:
    """Model FLOPs of one decode step; the formula is in the module docstring."""
    attention = 4 * info.num_layers * info.num_attention_heads * info.head_dim * context
    return float(batch * (2 * body + 2 * head + attention))


def _fraction(achieved: float, peak: float | None) -> float | None:
    return achieved / peak if peak else None


# -- the sweeps -----------------------------------------------------------------


def prefill_point(
    subject: Subject,
    plan: Plan,
    clock: Clock,
    tokens: int,
    batch: int,
    params: tuple[int, int],
    on_sample: OnSample | None = None,
) -> PrefillPoint:
    ids = input_ids(subject, batch, tokens)

    def forward() -> None:
        subject.model(input_ids=ids, use_cache=True, logits_to_keep=1)

    seconds = measure(
        forward,
        warmup=plan.warmup,
        repeats=plan.repeats,
        clock=clock,
        min_seconds=plan.min_seconds,
        on_sample=on_sample,
    )
    flops = prefill_flops(subject.info, *params, tokens, batch)
    achieved = flops / seconds.median
    peak = subject.gpu.peak_flops(subject.dtype) if subject.gpu else None
    moved = float(subject.weights_bytes + subject.kv_bytes_per_token * tokens * batch)
    return PrefillPoint(
        prompt_tokens=tokens,
        batch_size=batch,
        seconds=seconds,
        tokens_per_second=tokens * batch / seconds.median,
        flops=flops,
        achieved_flops_per_second=achieved,
        peak_flops_per_second=peak,
        fraction_of_peak=_fraction(achieved, peak),
        bytes_moved=moved,
        achieved_bytes_per_second=moved / seconds.median,
        fraction_of_copy=_fraction(moved / seconds.median, subject.copy_bandwidth),
    )


def decode_point(
    subject: Subject,
    plan: Plan,
    clock: Clock,
    batch: int,
    context: int,
    params: tuple[int, int] | None = None,
    on_sample: OnSample | None = None,
) -> DecodePoint:
    """Time one decode step at `batch` rows over a cache of `context` tokens."""
    prepared = decode_path.prepare(
        subject.model,
        input_ids(subject, batch, context),
        input_ids(subject, batch, 1, offset=context),
        subject.decode_path,
        subject.device,
        subject.compiled,
    )
    step, setup = decode_path.rolled_back(prepared.step, prepared.cache)
    seconds = measure(
        step,
        warmup=plan.warmup,
        repeats=plan.repeats,
        clock=clock,
        min_seconds=plan.min_seconds,
        on_sample=on_sample,
        setup=setup,
    )
    point = decode_point_from(subject, batch, context, seconds, params)
    point.path, point.path_reason = prepared.path, prepared.reason
    return point


def decode_point_from(
    subject: Subject,
    batch: int,
    context: int,
    seconds: Samples,
    params: tuple[int, int] | None = None,
) -> DecodePoint:
    """A DecodePoint from measured step times: bytes read per step and bandwidth, and
    (given the body and head parameter counts) FLOPs per step and their rate."""
    bytes_per_step = float(subject.weights_bytes + subject.kv_bytes_per_token * batch * context)
    achieved = bytes_per_step / seconds.median
    peak = subject.gpu.memory_bandwidth_bytes_per_second if subject.gpu else None
    point = DecodePoint(
        batch_size=batch,
        context_tokens=context,
        seconds_per_token=seconds,
        tokens_per_second=batch / seconds.median,
        bytes_per_step=bytes_per_step,
        achieved_bytes_per_second=achieved,
        peak_bytes_per_second=peak,
        fraction_of_peak=_fraction(achieved, peak),
        fraction_of_copy=_fraction(achieved, subject.copy_bandwidth),
    )
    if params is not None:
        flops = decode_flops(subject.info, *params, batch, context)
        point.flops_per_step = flops
        point.achieved_flops_per_second = flops / seconds.median
        peak_flops = subject.gpu.peak_flops(subject.dtype) if subject.gpu else None
        point.fraction_of_peak_flops = _fraction(flops / seconds.median, peak_flops)
    return point


def _free_device_memory(device: str) -> None:
    """Return cached CUDA blocks (after an OOM, before a peak reading).

    Not on CPU: a full `gc.collect()` with transformers loaded costs a large
    share of a quick run, and the CPU allocator returns big blocks anyway.
    """
    if device.startswith("cuda"):
        gc.collect()
        torch.cuda.empty_cache()


def _sweep(
    points: list[tuple[int, int]],
    run: Callable[[int, int], Any],
    device: str,
    label: Callable[[int, int], str],
    warnings: list[str],
) -> list[Any]:
    """Run points in order of size; after an out-of-memory, skip the larger ones.

    The first point running out of memory is fatal (nothing could be measured).
    """
    out: list[Any] = []
    failed_size: int | None = None
    for a, b in sorted(points, key=lambda p: (p[0] * p[1], p)):
        if failed_size is not None and a * b >= failed_size:
            continue
        try:
            out.append(run(a, b))
        except Exception as exc:
            if not is_out_of_memory(exc) or not out:
                raise
            failed_size = a * b
            warnings.append(f"{label(a, b)} ran out of memory; larger points were skipped")
        if failed_size == a * b:  # outside `except`, so the failed tensors are gone
            _free_device_memory(device)
    return out


def run_baseline(
    subject: Subject, plan: Plan, clock: Clock, progress: Progress | None = None
) -> BaselineResult:
    """Measure the prefill and decode sweeps of `plan` on `subject`."""
    progress = progress or no_progress
    total = plan.num_points + 1
    done = [0]
    warnings: list[str] = []

    def start(phase: str, message: str) -> OnSample:
        """Report the start of the next point; the callback reports its samples."""
        base = done[0]
        done[0] += 1
        progress(phase, base / total, message)
        return lambda i, n: progress(phase, (base + i / n) / total, message)

    params = body_and_head_params(subject.model)

    def one_prefill(tokens: int, batch: int) -> PrefillPoint:
        on_sample = start("prefill", f"prefill {tokens} tokens × batch {batch}")
        return prefill_point(subject, plan, clock, tokens, batch, params, on_sample)

    def one_decode(batch: int, context: int) -> DecodePoint:
        on_sample = start("decode", f"decode batch {batch} at context {context}")
        return decode_point(subject, plan, clock, batch, context, params, on_sample)

    with torch.inference_mode():
        prefill_pairs = [(t, b) for t in plan.prefill_tokens for b in plan.prefill_batches]
        prefill = _sweep(
            prefill_pairs,
            one_prefill,
            subject.device,
            lambda t, b: f"prefill of {t} tokens × batch {b}",
            warnings,
        )
        decode_pairs = [(b, c) for b in plan.decode_batches for c in plan.decode_contexts]
        decode = _sweep(
            decode_pairs,
            one_decode,
            subject.device,
            lambda b, c: f"decode at batch {b}, context {c}",
            warnings,
        )
        start("memory", "peak memory of the largest prefill")
        largest = max(prefill, key=lambda p: (p.prompt_tokens * p.batch_size, p.prompt_tokens))
        peak = _peak_prefill(subject, largest.prompt_tokens, largest.batch_size)
    progress("memory", 1.0, "baseline measured")
    prefill.sort(key=lambda p: (p.batch_size, p.prompt_tokens))
    decode.sort(key=lambda p: (p.batch_size, p.context_tokens))
    warnings += _noisy_warnings(prefill, decode)
    return BaselineResult(
        prefill, decode, peak, largest.prompt_tokens, largest.batch_size, warnings
    )


def _peak_prefill(subject: Subject, tokens: int, batch: int) -> PeakReading:
    ids = input_ids(subject, batch, tokens)
    _free_device_memory(subject.device)
    tracker = PeakMemory(subject.device)
    try:
        with tracker:
            subject.model(input_ids=ids, use_cache=True, logits_to_keep=1)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise OutOfMemory(
                f"ran out of memory re-running a prefill of {tokens} tokens × batch {batch}"
            ) from exc
        raise
    return tracker.reading


def _noisy_warnings(prefill: list[PrefillPoint], decode: list[DecodePoint]) -> list[str]:
    labelled = [
        (f"prefill {p.prompt_tokens} tokens × batch {p.batch_size}", p.seconds) for p in prefill
    ]
    labelled += [
        (f"decode batch {d.batch_size} at context {d.context_tokens}", d.seconds_per_token)
        for d in decode
    ]
    return noisy_warnings(labelled)
