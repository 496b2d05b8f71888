"""The verdict at the user's workload from the engine's own measurement.

Where the engine served the user's concurrency, its figures win over the
eager-mode sweep's for every serving claim: this verdict replaces the eager one
(kept as `Profile.eager_verdict`), so the summary, the advice's "before"
figures and the verdict card all read the engine's numbers.
"""

from __future__ import annotations

from profiling.config import Workload
from profiling.engine.results import EngineResult, ServingPoint
from profiling.projection.verdict import meets, summary
from profiling.results import FitCheck, PhaseVerdict


def point_at(engine: EngineResult, concurrency: int) -> ServingPoint | None:
    """The sweep's point at `concurrency`, if it ran and some request streamed."""
    for point in engine.serving:
        if (
            point.concurrency == concurrency
            and point.requests
            and (not point.streamed or any(point.streamed))
        ):
            return point
    return None


def engine_verdict(
    engine: EngineResult, workload: Workload, fit: FitCheck | None
) -> PhaseVerdict | None:
    point = point_at(engine, workload.concurrency)
    if point is None:
        return None
    ttft_ms, tpot_ms = point.ttft_ms.p50, point.tpot_ms.p50
    prefill = ttft_ms / 1e3
    decode = max(workload.output_tokens - 1, 0) * tpot_ms / 1e3
    total = prefill + decode
    left_out = (
        f"; {point.coalesced} of {point.requests} requests reached the client in one burst "
        "(the machine was busy) and are left out"
        if point.coalesced
        else ""
    )
    basis = (
        f"measured on {engine.name} {engine.version}: medians over {point.requests} requests "
        f"at concurrency {point.concurrency} from the engine's own benchmark client (TTFT "
        f"from sending the request to its first token, queueing included; TPOT over the "
        f"{workload.output_tokens - 1} tokens after it){left_out}. The eager-mode estimate "
        "from the prefill and decode sweeps is in those sections"
    )
    out = PhaseVerdict(
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        concurrency=workload.concurrency,
        prefill_seconds=prefill,
        decode_seconds=decode,
        end_to_end_seconds=total,
        prefill_share=prefill / total if total else 0.0,
        decode_share=decode / total if total else 0.0,
        dominant="prefill" if prefill >= decode else "decode",
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        ttft_meets_target=meets(ttft_ms, workload.ttft_ms),
        tpot_meets_target=meets(tpot_ms, workload.tpot_ms),
        interpolated=False,
        basis=basis,
        fits=fit.fits if fit else None,
    )
    out.summary = summary(out, fit)
    return out
