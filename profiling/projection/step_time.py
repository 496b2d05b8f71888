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

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

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
        s = self.shapes.sized
        if not (s.window_layers or s.state_layers) or not tokens:
            return self.kv_token * tokens
        mean = max(256, round(tokens / max(1, sequences) / 256) * 256)
        fmt = kv_format(self.dtype, self.kv_dtype)
        return self.shapes.kv_bytes_per_token(fmt, mean, self.devices) * tokens

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        """`rows` decode rows holding `context` tokens in all; `chunks`: (tokens, offset)
        of each prompt chunk, the offset being the prompt tokens already cached."""
        flops, bytes_, tokens = self.work(rows, context, chunks)
        seconds = self.time_of(flops, bytes_, bool(chunks), rows)
        experts = self.shapes.experts_touched(tokens) / self.devices
        return (
            seconds
            + self.moe_floor(experts)
            + allreduce_seconds(self.shapes, tokens, self.devices, self.gpu)
        )

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
        """(FLOPs, bytes read) on each device of the split, and the step's tokens."""
        s = self.shapes
        prompt_tokens = sum(t for t, _ in chunks)
        flops = s.decode_flops(rows, context / rows) if rows else 0.0  # type: ignore[arg-type]
        flops += sum(s.chunk_flops(tokens, offset) for tokens, offset in chunks)
        kv_moved = context + sum(offset + tokens for tokens, offset in chunks)
        weights = s.weights_read(weights_format(self.dtype), rows + prompt_tokens)
        bytes_ = weights * (1 + dequant(self.dtype)) + self.kv_read(kv_moved, rows + len(chunks))
        n = self.devices
        return flops / n, bytes_ / n, rows + prompt_tokens

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


def kv_capacity_tokens(
    shapes: Shapes,
    dtype: str,
    kv_dtype: str,
    gpu: GPU | None,
    devices: int,
    usable: int | None,
    weights: float | None = None,
    context: float | None = None,
) -> int | None:
    """Tokens of KV cache the memory left by the weights holds (None: not limited);
    `weights`: what the devices hold, where not the whole model; `context`: the
    sequences' length, where window or state layers make the cost per token depend
    on it."""
    if gpu is None or usable is None:
        return None
    held = shapes.weights_bytes(weights_format(dtype)) if weights is None else weights
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
