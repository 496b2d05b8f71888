"""The time of one serving-engine step, from a calibration's two phase models.

No torch import. A step is one forward over every running request's next token
(decode rows, with the context each holds) plus chunks of prompts being
prefilled. Its work is counted in FLOPs and bytes read (weights once, a mixture
of experts only the experts its rows route to; every row's KV cache; the KV
written), and its time is the slower of the calibration's two phase models on
that work (a measured prefill's compute-bound fit, a measured decode's
memory-bound one; the datasheet estimate's phases both add the step's arithmetic
to its memory traffic: `profiling.projection.calibration`), never below the
per-pass floor. A step of decode rows alone is never faster than its FLOPs at
prefill's compute rate either: hundreds of rows make a decode step compute-bound.
A quantized format's kernels pay their unpacking and scales on the weight bytes
they read (`Precision.dequant`), not on the KV cache, which they do not touch.
Tensor parallelism divides the work and adds a ring all-reduce per half layer
over all the step's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, Protocol

from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.projection.precision import dequant, kv_format, weights_format


class PhaseModel(Protocol):
    def seconds(self, flops: float, bytes_: float) -> float: ...


class Rates(Protocol):
    """What the step model reads of a calibration (`calibration.Calibration`)."""

    prefill: PhaseModel
    decode: PhaseModel


# Tensor parallelism all-reduces the activations twice per layer (after attention and
# after the MLP). A ring moves 2(n−1)/n of the data over each link and pays a fixed
# latency per call (an assumption; NCCL within one node is of this order).
ALLREDUCE_LATENCY_S = 10e-6
ASSUMED_LINK_BYTES_PER_SECOND = 32e9  # PCIe 4.0 x16, where no GPU is named
ACTIVATION_BYTES = 2  # bf16/fp16 activations
# A mixture-of-experts layer's routed-expert kernels (routing, the grouped GEMMs, the
# combine) take a fixed time however few bytes their rows touch: vLLM's Triton fused-MoE
# kernel measured 29.45 µs at batch 1 on one H100 for Qwen3-Next-80B-A3B-FP8 at TP=4
# (E=512, N=128; https://github.com/vllm-project/vllm/pull/44830, baseline column), a
# shape whose expert bytes take ~3 µs at the HBM's speed. A step's MoE layer takes the
# longer of this floor and its expert bytes' time (one GPU-kernel figure for every
# catalog GPU: AMD's are slower still at batch 1, so this errs fast there).
MOE_LAYER_FLOOR_S = 29.45e-6


def link_bytes_per_second(gpu: GPU | None) -> float:
    """The GPU-to-GPU link's bandwidth one way (assumed PCIe 4.0 where no GPU is named)."""
    return gpu.interconnect_bytes_per_second if gpu is not None else ASSUMED_LINK_BYTES_PER_SECOND


def allreduce_seconds(shapes: Shapes, tokens: int, devices: int, gpu: GPU | None) -> float:
    """Seconds of one pass's tensor-parallel all-reduces over `tokens` rows."""
    if devices <= 1:
        return 0.0
    size = tokens * shapes.hidden_size * ACTIVATION_BYTES
    one = 2 * (devices - 1) / devices * size / link_bytes_per_second(gpu) + ALLREDUCE_LATENCY_S
    return 2 * shapes.num_layers * one


def all_to_all_seconds(shapes: Shapes, tokens: int, devices: int, gpu: GPU | None) -> float:
    """Seconds of one pass's expert-parallel exchanges on a rank: in every MoE layer each
    of its `tokens` rows goes to its `experts_per_token` experts, (n−1)/n of them on other
    ranks, and comes back (dispatch and combine), each call paying its latency."""
    if devices <= 1:
        return 0.0
    remote = (devices - 1) / devices
    size = tokens * shapes.experts_per_token * shapes.hidden_size * ACTIVATION_BYTES * remote
    one = size / link_bytes_per_second(gpu) + ALLREDUCE_LATENCY_S
    return 2 * shapes.sized.moe_layers * one


class _Terms(NamedTuple):
    """What a step's time reads of the model, the format, the split and the calibration,
    read once (`StepModel._terms`), each as `Shapes` and `allreduce_seconds` compute it,
    and the parts of steps already priced."""

    row_flops: float  # 2 × (active body + LM head) parameters: a decode row, attention aside
    token_flops: float  # 2 × active body parameters: a prompt token
    head_flops: int  # 2 × LM head parameters: a chunk's last token
    decode_width: float  # 4 × the attention width a decode step computes
    prefill_width: float  # 4 × the attention width
    full_layers: int
    window_layers: int
    window: int
    weights_format: str
    dequant: float  # 1 + the unpacking share on the weight bytes
    kv_per_token: bool  # no window or state layers: the KV read is per token of context
    experts: int
    expert_missed: float  # 1 − k/E: the chance a row does not route to a given expert
    moe_layers: int
    expert_read_seconds: float | None
    hidden_size: int
    allreduces: int  # 2 per layer
    ring_share: float  # 2(n−1)/n of the data over each link
    link: float  # bytes per second
    decode_seconds: Callable[[float, float], float]  # the calibration's phase models
    prefill_seconds: Callable[[float, float], float]
    compute: float | None  # prefill's FLOP rate, where its model has one
    fixed: dict[tuple[int, tuple[tuple[int, int], ...]], _Fixed]  # by (rows, chunks)
    kv_at_mean: dict[int, int]  # `kv_read`'s bytes per token, by the mean context


class _Fixed(NamedTuple):
    """What a step owes to its rows' count and prompt chunks, whatever their context."""

    chunk_flops: float  # the chunks' `Shapes.chunk_flops`, summed
    moved: float  # the chunks' context: cached offset and tokens
    tokens: int  # rows and prompt tokens
    weights: float  # `Shapes.weights_read` at the tokens, unpacking included
    moe_floor: float  # `StepModel.moe_floor` at the tokens' experts
    allreduce: float  # `allreduce_seconds` of the tokens


# The (rows, chunks) whose fixed part the terms keep (a run of the simulated engine meets a
# few hundred), and how many step models' terms are kept.
FIXED_KEPT = 1024
SHARED_TERMS_KEPT = 128
_SHARED_TERMS: dict[tuple[object, ...], tuple[object, _Terms]] = {}


@dataclass(frozen=True)
class StepModel:
    """Seconds of one engine step: decode rows over their summed context, plus prefill chunks."""

    shapes: Shapes
    rates: Rates
    dtype: str  # the weights' (a precision or torch dtype name: `profiling.projection.precision`)
    kv_dtype: str = ""  # the KV cache's ("" = the weights' when 16 bits or wider, else bf16)
    devices: int = 1  # tensor-parallel ranks sharing each step
    gpu: GPU | None = None

    @cached_property
    def kv_token(self) -> int:
        """KV bytes per token of context over the devices (MLA's latent on each)."""
        return self.shapes.kv_bytes_per_token(kv_format(self.dtype, self.kv_dtype),
                                              devices=self.devices)  # fmt: skip

    def kv_read(self, tokens: float, sequences: int) -> float:
        """Bytes of KV cache a step reads for `tokens` of context over `sequences`:
        per token, except where window layers cap what each sequence holds or state
        layers hold a fixed state (read at the mean context, in 256-token steps)."""
        t = self._terms
        if t.kv_per_token or not tokens:
            return self.kv_token * tokens
        mean = max(256, round(tokens / max(1, sequences) / 256) * 256)
        per_token = t.kv_at_mean.get(mean)
        if per_token is None:
            fmt = kv_format(self.dtype, self.kv_dtype)
            per_token = t.kv_at_mean[mean] = self.shapes.kv_bytes_per_token(fmt, mean, self.devices)
        return per_token * tokens

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        """`rows` decode rows holding `context` tokens in all; `chunks`: (tokens, offset)
        of each prompt chunk, the offset being the prompt tokens already cached."""
        flops, bytes_, fixed = self._work(rows, context, chunks)
        t = self._terms  # `time_of`, written out (a test holds them equal)
        if not chunks:
            seconds = t.decode_seconds(flops, bytes_)
            if t.compute:
                seconds = max(seconds, flops / t.compute)
        elif rows:
            seconds = max(t.decode_seconds(flops, bytes_), t.prefill_seconds(flops, bytes_))
        else:
            seconds = t.prefill_seconds(flops, bytes_)
        return seconds + fixed.moe_floor + fixed.allreduce

    def moe_floor(self, experts: float) -> float:
        """What the MoE layers' fixed kernel time adds to a step on a GPU where each layer
        reads `experts` routed experts' worth of bytes per device: the floor less the
        time those bytes already take (`MOE_LAYER_FLOOR_S`); 0 for a dense model or
        without a GPU (a measured CPU fit carries its own per-pass cost)."""
        per_expert = self._expert_read_seconds
        if per_expert is None:
            return 0.0
        return self.shapes.sized.moe_layers * max(0.0, MOE_LAYER_FLOOR_S - experts * per_expert)

    @cached_property
    def _expert_read_seconds(self) -> float | None:
        """Seconds one routed expert's weights take to read on the GPU (unpacking
        included), once per step model: None where no floor applies."""
        s = self.shapes
        rate = getattr(self.rates.decode, "bytes_per_second", None)
        if not s.sized.moe_layers or self.gpu is None or not rate:
            return None
        return s.expert_bytes(weights_format(self.dtype)) * (1 + dequant(self.dtype)) / rate

    def work(
        self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()
    ) -> tuple[float, float, int]:
        """(FLOPs, bytes read) on each device of the split, and the step's tokens: the rows'
        `Shapes.decode_flops` at their mean context, each chunk's `Shapes.chunk_flops`,
        `Shapes.weights_read` and `kv_read` (a test holds them equal)."""
        flops, bytes_, fixed = self._work(rows, context, chunks)
        return flops, bytes_, fixed.tokens

    def _work(
        self, rows: int, context: float, chunks: tuple[tuple[int, int], ...]
    ) -> tuple[float, float, _Fixed]:
        """`work`, and what the step owes to its rows' count and chunks alone: the
        simulated engine prices thousands of steps a run, most of them with a row count
        and chunks it has priced before, over another context."""
        t = self._terms
        fixed = t.fixed.get((rows, chunks))
        if fixed is None:
            fixed = self._fixed(rows, chunks)
        flops = 0.0
        if rows:
            mean = context / rows
            seen = t.full_layers * mean + (t.window_layers * min(mean, t.window) if t.window else 0)
            flops = float(rows * (t.row_flops + t.decode_width * seen))
        flops += fixed.chunk_flops
        kv_moved = context + fixed.moved
        kv = (
            self.kv_token * kv_moved if t.kv_per_token
            else self.kv_read(kv_moved, rows + len(chunks))
        )  # fmt: skip
        n = self.devices
        return flops / n, (fixed.weights + kv) / n, fixed

    def _fixed(self, rows: int, chunks: tuple[tuple[int, int], ...]) -> _Fixed:
        t = self._terms
        chunk_flops, prompt_tokens, moved = 0, 0, 0
        for tokens, offset in chunks:
            mean = offset + tokens / 2
            seen = t.full_layers * mean + (t.window_layers * min(mean, t.window) if t.window else 0)
            attention = t.prefill_width * tokens * seen
            chunk_flops += float(t.token_flops * tokens + t.head_flops + attention)
            prompt_tokens += tokens
            moved += offset + tokens
        tokens = rows + prompt_tokens
        weights = self.shapes.weights_read(t.weights_format, tokens) * t.dequant
        # `moe_floor(shapes.experts_touched(tokens) / devices)` and `allreduce_seconds`.
        floor = 0.0
        if t.expert_read_seconds is not None:
            experts = t.experts * (1 - t.expert_missed ** max(1, tokens)) / self.devices
            floor = t.moe_layers * max(0.0, MOE_LAYER_FLOOR_S - experts * t.expert_read_seconds)
        allreduce = 0.0
        if self.devices > 1:
            size = tokens * t.hidden_size * ACTIVATION_BYTES
            allreduce = t.allreduces * (t.ring_share * size / t.link + ALLREDUCE_LATENCY_S)
        fixed = _Fixed(chunk_flops, moved, tokens, weights, floor, allreduce)
        if len(t.fixed) >= FIXED_KEPT:
            t.fixed.clear()
        t.fixed[(rows, chunks)] = fixed
        return fixed

    @cached_property
    def _terms(self) -> _Terms:
        # Shared by equal step models (the same rates object, not a copy): the capacity
        # search builds one for every number of users it simulates, and each meets the
        # same row counts and chunks.
        key = (self.shapes, id(self.rates), self.dtype, self.kv_dtype, self.devices, self.gpu)
        kept = _SHARED_TERMS.get(key)
        if kept is not None and kept[0] is self.rates:
            return kept[1]
        if len(_SHARED_TERMS) >= SHARED_TERMS_KEPT:
            _SHARED_TERMS.clear()
        terms = self._read_terms()
        _SHARED_TERMS[key] = (self.rates, terms)  # the rates held: their id stays theirs
        return terms

    def _read_terms(self) -> _Terms:
        s, sized = self.shapes, self.shapes.sized
        fmt = weights_format(self.dtype)
        experts, k = sized.experts, sized.experts_per_token
        return _Terms(
            row_flops=2 * (s.active_body_params + s.head_params),
            token_flops=2 * s.active_body_params,
            head_flops=2 * s.head_params,
            decode_width=4.0 * (sized.decode_attention_width or sized.attention_width),
            prefill_width=4.0 * sized.attention_width,
            full_layers=sized.full_layers,
            window_layers=sized.window_layers,
            window=sized.window,
            weights_format=fmt,
            dequant=1 + dequant(self.dtype),
            kv_per_token=not (sized.window_layers or sized.state_layers),
            experts=experts,
            expert_missed=1 - k / experts if experts else 1.0,
            moe_layers=sized.moe_layers,
            expert_read_seconds=self._expert_read_seconds,
            hidden_size=s.hidden_size,
            allreduces=2 * s.num_layers,
            ring_share=2 * (self.devices - 1) / self.devices,
            link=link_bytes_per_second(self.gpu),
            decode_seconds=self.rates.decode.seconds,
            prefill_seconds=self.rates.prefill.seconds,
            compute=getattr(self.rates.prefill, "flops_per_second", None),
            fixed={},
            kv_at_mean={},
        )

    def time_of(self, flops: float, bytes_: float, prefill: bool, rows: int) -> float:
        """The slower of the phase models on this work of `rows` decode rows (and prompt
        chunks where `prefill`); without a prompt, decode's, or its FLOPs at prefill's
        compute rate where those take longer; prompt chunks alone, prefill's: the passes
        its fit was measured on (a decode fit prices FLOPs at decode's rate, which a
        measured profile may put far below prefill's)."""
        if prefill and not rows:
            return self.rates.prefill.seconds(flops, bytes_)
        seconds = self.rates.decode.seconds(flops, bytes_)
        if prefill:
            return max(seconds, self.rates.prefill.seconds(flops, bytes_))
        compute = getattr(self.rates.prefill, "flops_per_second", None)
        return max(seconds, flops / compute) if compute else seconds


def steady_seconds(
    step: object, rows: int, prompt_tokens: int, output_tokens: int, cached: int, budget: int
) -> float:
    """One engine step in steady state: `rows` decode rows half-way through their output,
    with the prompt work of one request per `output_tokens` tokens emitted mixed in (its
    `cached` prefix served from the cache), up to the step's token `budget`."""
    fresh = prompt_tokens - cached
    mixed = min(budget - rows, round(rows * fresh / max(1, output_tokens)))
    chunk = ((mixed, cached + fresh // 2),) if mixed > 0 else ()
    context = rows * (prompt_tokens + output_tokens / 2)
    return step.seconds(rows, context, chunk)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class DeviceMemory:
    """What the KV cache may take: `usable` bytes on each of `devices` (None: not
    limited), less the `weights` they hold (the whole model where None)."""

    devices: int
    usable: int | None
    weights: float | None = None


def kv_capacity_tokens(
    shapes: Shapes,
    dtype: str,
    kv_dtype: str,
    gpu: GPU | None,
    memory: DeviceMemory,
    context: float | None = None,
) -> int | None:
    """Tokens of KV cache the memory left by the weights holds (None: not limited, or no
    GPU); `context`: the sequences' length, where window or state layers make the cost
    per token depend on it."""
    usable, devices = memory.usable, memory.devices
    if gpu is None or usable is None:
        return None
    held = shapes.weights_bytes(weights_format(dtype)) if memory.weights is None else memory.weights
    room = int(usable * devices - held)
    per_token = shapes.kv_bytes_per_token(kv_format(dtype, kv_dtype), context, devices)
    return max(0, room // max(1, per_token))


SEND_LATENCY_S = 10e-6  # one point-to-point send between stages (assumed, as the all-reduce's)


@dataclass(frozen=True)
class Staged:
    """One pass through pp stages of a tp-way split, the rows' activations sent between them."""

    step: StepModel
    pp: int

    @property
    def gpu(self) -> GPU | None:
        return self.step.gpu

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        whole = self.step.seconds(rows, context, chunks)
        if self.pp == 1:
            return whole
        tokens = rows + sum(t for t, _ in chunks)
        size = tokens * self.step.shapes.hidden_size * ACTIVATION_BYTES
        send = size / link_bytes_per_second(self.step.gpu) + SEND_LATENCY_S
        # A token crosses every stage in turn: the whole pass (each stage 1/pp of the
        # layers, tp-way split) plus a send at each stage boundary.
        return whole + (self.pp - 1) * send
