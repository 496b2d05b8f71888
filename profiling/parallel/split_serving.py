"""Prefill/decode disaggregation, served: the users on a decode worker whose steps carry
no prompt, fed by as many prefill workers as its request rate needs (each below
`MAX_PREFILL_UTILISATION`, its queue an M/D/1 one), each prompt's KV cache sent
over the link once. No torch import; the estimate's disaggregation rule compares
it with aggregated replicas on the same GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.projection.serving import Percentiles, Requests, Served, simulate
from profiling.projection.step_time import StepModel


@dataclass(frozen=True)
class DecodeOnly:
    """A decode worker's step: prompts are prefilled elsewhere, so chunks cost it nothing."""

    step: StepModel

    @property
    def gpu(self) -> GPU | None:
        return self.step.gpu

    def seconds(self, rows: int, context: float, chunks: tuple[tuple[int, int], ...] = ()) -> float:
        return self.step.seconds(rows, context) if rows else 0.0


@dataclass
class Split:
    """Prefill and decode on separate workers (each of the step model's layout), served."""

    decode: Served  # the decode worker's requests; TTFT there counts from the KV's arrival
    prefill_workers: int
    decode_workers: int
    prefill_seconds: float  # one prompt alone on a prefill worker
    prefill_utilisation: float  # of each prefill worker, at the decode side's request rate
    prefill_wait_seconds: float  # mean wait for a prefill worker (M/D/1)
    kv_transfer_seconds: float
    ttft_seconds: float  # p50: wait + prefill + KV transfer + the decode worker's first step
    tpot: Percentiles


# A prefill worker run busier than this queues prompts for long (M/D/1 wait grows as
# ρ / (1 − ρ)); the split adds prefill workers until each is below it.
MAX_PREFILL_UTILISATION = 0.8


def split(
    step: StepModel,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int,
    link_bytes_per_second: float,
    kv_tokens: int | None = None,
) -> Split:
    """Disaggregated serving of the closed-loop workload: a decode worker holding the
    users' requests in pure decode steps, and as many prefill workers as its request
    rate needs, each prompt's KV cache sent over the link once."""
    decode = simulate(DecodeOnly(step), Requests(  # type: ignore[arg-type]
        prompt_tokens, output_tokens, concurrency=concurrency, kv_tokens=kv_tokens))  # fmt: skip
    prefill = step.seconds(0, 0, ((prompt_tokens, 0),))
    load = decode.requests_per_second * prefill
    workers = max(1, math.ceil(load / MAX_PREFILL_UTILISATION))
    rho = load / workers
    wait = rho / (2 * (1 - rho)) * prefill
    transfer = step.kv_token * prompt_tokens / link_bytes_per_second
    return Split(
        decode=decode,
        prefill_workers=workers,
        decode_workers=1,
        prefill_seconds=prefill,
        prefill_utilisation=rho,
        prefill_wait_seconds=wait,
        kv_transfer_seconds=transfer,
        ttft_seconds=wait + prefill + transfer + decode.ttft.p50,
        tpot=decode.tpot,
    )
