"""Prefill/decode disaggregation sized from measured times (pure arithmetic).

Colocated, every new request's prefill joins one decode step of the others:
in steady state `concurrency` prefills arrive per `output_tokens` steps, so a
share min(1, concurrency / output_tokens) of the steps is mixed and the mean
token time is alone + share × (mixed − alone); the worst is the mixed step.

Disaggregated, prefill workers run prompts back to back (batch 1) and decode
workers hold `decode batch` requests each, so one prefill worker serves
1 / prefill seconds requests a second and one decode worker serves
batch / (output tokens × step time); their quotient is the number of prefill
workers each decode worker needs. The user's rate follows from Little's law:
concurrency / (prefill + decode seconds per request). Each request's KV cache
(measured bytes per token × prompt tokens) crosses the catalog's GPU-to-GPU
link of the chosen GPU once, which adds to its time to first token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from profiling.config import Workload
from profiling.measure.hardware import GPU
from profiling.parallel.interference import Interference
from profiling.parallel.results import DisaggregationResult
from profiling.results import PhaseVerdict
from profiling.units import size


@dataclass
class Sizes:
    decode_batch: int
    decode_context: int
    prefill_tokens: int


def mixed_step_share(concurrency: int, output_tokens: int) -> float:
    return min(1.0, concurrency / max(1, output_tokens))


def workers_for(ratio: float, decode_workers: int) -> tuple[int, int]:
    """(prefill, decode) worker counts whose prefill capacity covers the decode side."""
    return max(1, math.ceil(ratio * decode_workers - 1e-9)), decode_workers


def _meets(value: float | None, target: float | None) -> bool | None:
    return None if value is None or target is None else value <= target


def _rates(
    measured: Interference, sizes: Sizes, workload: Workload, verdict: PhaseVerdict | None
) -> tuple[str, float, int, float]:
    """(basis, prefill seconds per request, decode batch, decode seconds per request)."""
    if verdict is not None:
        basis = (
            "the baseline's verdict: batch-1 prefill at the user's prompt length and the decode "
            f"step at concurrency {workload.concurrency}, from the measured sweeps"
        )
        return basis, verdict.prefill_seconds, workload.concurrency, verdict.decode_seconds
    scale = workload.prompt_tokens / sizes.prefill_tokens
    basis = (
        f"this experiment's own timings: the prefill of {sizes.prefill_tokens} tokens scaled "
        f"linearly to {workload.prompt_tokens}, the decode step at batch {sizes.decode_batch}"
    )
    decode = workload.output_tokens * measured.decode_alone.median
    return basis, measured.prefill.median * scale, sizes.decode_batch, decode


def disaggregate(
    measured: Interference,
    sizes: Sizes,
    workload: Workload,
    *,
    kv_bytes_per_token: int,
    verdict: PhaseVerdict | None = None,
    gpu: GPU | None = None,
) -> DisaggregationResult:
    alone, mixed = measured.decode_alone.median, measured.mixed.median
    share = mixed_step_share(workload.concurrency, workload.output_tokens)
    tpot_target = workload.tpot_ms / 1000 if workload.tpot_ms else None
    basis, prefill_s, batch, decode_s = _rates(measured, sizes, workload, verdict)
    prefill_rate, decode_rate = 1 / prefill_s, batch / decode_s
    ratio = decode_rate / prefill_rate
    decode_workers = max(1, math.ceil(workload.concurrency / batch))
    prefill_workers, decode_workers = workers_for(ratio, decode_workers)
    kv_bytes = kv_bytes_per_token * workload.prompt_tokens
    link_bw = gpu.interconnect_bytes_per_second if gpu else None
    kv_seconds = kv_bytes / link_bw if link_bw else None
    ttft = prefill_s + kv_seconds if kv_seconds is not None else None
    ttft_target = workload.ttft_ms / 1000 if workload.ttft_ms else None
    result = DisaggregationResult(
        decode_batch=sizes.decode_batch,
        decode_context_tokens=sizes.decode_context,
        prefill_tokens=sizes.prefill_tokens,
        decode_alone_seconds=measured.decode_alone,
        decode_mixed_seconds=measured.mixed,
        prefill_seconds=measured.prefill,
        decode_alone_tpot_seconds=alone,
        decode_mixed_tpot_seconds=mixed,
        tpot_spike=mixed / alone,
        mixed_step_share=share,
        mean_tpot_seconds=alone + (mixed - alone) * share,
        tpot_target_seconds=tpot_target,
        alone_meets_tpot=_meets(alone, tpot_target),
        mixed_meets_tpot=_meets(mixed, tpot_target),
        ratio_basis=basis,
        prefill_seconds_per_request=prefill_s,
        decode_batch_for_ratio=batch,
        decode_seconds_per_request=decode_s,
        request_rate_per_second=workload.concurrency / (prefill_s + decode_s),
        prefill_requests_per_second_per_worker=prefill_rate,
        decode_requests_per_second_per_worker=decode_rate,
        prefill_to_decode_ratio=ratio,
        prefill_workers=prefill_workers,
        decode_workers=decode_workers,
        workers=f"{prefill_workers} prefill : {decode_workers} decode",
        kv_transfer_bytes_per_request=kv_bytes,
        kv_transfer_seconds=kv_seconds,
        link=_link(gpu),
        link_bytes_per_second=link_bw,
        ttft_disaggregated_seconds=ttft,
        ttft_target_seconds=ttft_target,
        disaggregated_meets_ttft=_meets(ttft, ttft_target),
    )
    result.finding = finding(result)
    result.warnings = _warnings(result, gpu)
    return result


def finding(r: DisaggregationResult) -> str:
    spike = (
        f"A prefill of {r.prefill_tokens} tokens joining a decode step of {r.decode_batch} "
        f"requests stretches their token time from {r.decode_alone_tpot_seconds * 1e3:.1f} to "
        f"{r.decode_mixed_tpot_seconds * 1e3:.1f} ms ({r.tpot_spike:.1f}×); "
        f"{r.mixed_step_share:.0%} of steps are mixed at this workload, so colocated the mean "
        f"is {r.mean_tpot_seconds * 1e3:.1f} ms."
    )
    if r.tpot_target_seconds is not None:
        target = r.tpot_target_seconds * 1e3
        if r.alone_meets_tpot and not r.mixed_meets_tpot:
            spike += f" Only the mixed steps miss the {target:g} ms TPOT target: separating "
            spike += "the phases (or chunking prefills) removes the spikes."
        elif not r.alone_meets_tpot:
            spike += f" Even decode alone misses the {target:g} ms TPOT target at this batch: "
            spike += "separating the phases cannot fix that; smaller decode batches or faster "
            spike += "decode can."
        else:
            spike += f" Both meet the {target:g} ms TPOT target."
    split = (
        f" Split, each decode worker needs {r.prefill_to_decode_ratio:.2f} prefill workers "
        f"({r.workers} for the user's rate of {r.request_rate_per_second:.2f} requests/s"
    )
    if r.prefill_to_decode_ratio < 0.5:
        split += f"; one prefill worker keeps up with {int(1 / r.prefill_to_decode_ratio)} decode"
    split += ")"
    if r.kv_transfer_seconds is not None:
        split += (
            f"; each request's KV cache ({size(r.kv_transfer_bytes_per_request)}) takes "
            f"{_ms(r.kv_transfer_seconds)} over {r.link}."
        )
    else:
        split += (
            f"; each request's KV cache is {size(r.kv_transfer_bytes_per_request)} to "
            "move (no GPU chosen, so no link to time it over)."
        )
    return spike + split


def _link(gpu: GPU | None) -> str | None:
    if gpu is None:
        return None
    return f"{gpu.interconnect} between two {gpu.label} (catalog, one way per GPU)"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _warnings(r: DisaggregationResult, gpu: GPU | None) -> list[str]:
    out = []
    for label, samples in (
        ("decode step alone", r.decode_alone_seconds),
        ("mixed step", r.decode_mixed_seconds),
        ("prefill", r.prefill_seconds),
    ):
        if samples.noisy:
            out.append(
                f"interference: the {label} is noisy (p10-p90 spread {samples.spread:.0%} of "
                "the median); other load on the machine may have disturbed it"
            )
    if gpu is not None and gpu.interconnect.startswith("PCIe"):
        out.append(
            f"{gpu.label} GPUs talk over {gpu.interconnect}: KV transfers share that link with "
            "everything else the host moves"
        )
    return out
