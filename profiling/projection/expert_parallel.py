"""Expert parallelism on the step model: one of `ep` ranks of a mixture of experts laid
out as vLLM's data-parallel attention with --enable-expert-parallel (each rank holds
the shared weights whole and 1/ep of the experts). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.projection.precision import dequant, weights_format
from profiling.projection.step_time import StepModel, all_to_all_seconds


@dataclass(frozen=True)
class ExpertParallel:
    """One of `ep` expert-parallel ranks, stepping with the others: its own rows through
    the shared weights, its 1/ep of the experts for every rank's rows (routing taken as
    even: a hot expert would hold every rank back), and the all-to-all exchanges."""

    step: StepModel  # one device: attention is not split
    ep: int

    @property
    def gpu(self) -> GPU | None:
        return self.step.gpu

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        s = self.step.shapes
        flops, bytes_, tokens = self.step.work(rows, context, chunks)
        fewer = self.weights_read(tokens) - s.weights_read(self.format, tokens)
        bytes_ += fewer * (1 + dequant(self.step.dtype))
        seconds = self.step.time_of(flops, bytes_, bool(chunks), rows)
        floor = self.step.moe_floor(s.experts_touched(tokens * self.ep) / self.ep)
        return seconds + floor + all_to_all_seconds(s, tokens, self.ep, self.step.gpu)

    @property
    def format(self) -> str:
        return weights_format(self.step.dtype)

    def weights_read(self, tokens: int) -> float:
        """Weight bytes a rank reads in a step where every rank has `tokens` rows."""
        s = self.step.shapes
        touched = s.experts_touched(tokens * self.ep) / self.ep
        # The vision tower is held but never read by a text step, as `Shapes.weights_read`.
        unread = s.sized.vision * min(2.0, s.bytes_per_param(self.format))
        experts = s.sized.moe_layers * touched * s.expert_bytes(self.format)
        return s.shared_weights_bytes(self.format) - unread + experts

    def weights_held(self) -> float:
        s = self.step.shapes
        return s.shared_weights_bytes(self.format) + s.experts_weights_bytes(self.format) / self.ep
