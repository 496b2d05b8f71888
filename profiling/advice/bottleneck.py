"""Which of four limits binds the user's workload on their hardware, from measured figures.

In order, the first that holds:
- devices: weights + KV cache for the concurrency do not fit on the user's
  GPUs even with the smallest weights quantization allows (the smallest
  measured variant within the quality tolerance; without that experiment,
  int8 weights, an estimate);
- memory: they do not fit as they are, or fit with less than
  MIN_HEADROOM_SHARE of the usable memory to spare (no room to batch more);
- prompt: prefill is at least PREFILL_DOMINATES of a request's time, or at
  least PREFILL_MATTERS of it while REUSE_MATTERS of the prompt tokens are
  repeated (the caching experiment's prompt sample, else the workload's
  shared prefix), or the TTFT target is missed while the TPOT target is met;
- generation: otherwise decode dominates; its arithmetic intensity against
  the GPU's ridge point shows it is memory-bandwidth-bound.
"""

from __future__ import annotations

from profiling.config import BOTTLENECK_LABELS
from profiling.model.shapes import DTYPE_BYTES
from profiling.profile import Experiments
from profiling.quantization.tolerance import acceptable
from profiling.technique_kit.advice_results import DecidingNumber, QualityTolerance
from profiling.technique_kit.facts import Facts
from profiling.units import size

MIN_HEADROOM_SHARE = 0.10
PREFILL_DOMINATES = 0.50
PREFILL_MATTERS = 0.20
REUSE_MATTERS = 0.30


def prompt_reuse(facts: Facts, ran: Experiments) -> tuple[float, str]:
    """(share of prompt tokens repeated across prompts, where the figure comes from)."""
    caching = ran.caching
    if caching is not None:
        sample = caching.prompt_sample
        if sample is not None:
            return sample.reuse_fraction, "caching.prompt_sample.reuse_fraction"
    workload = facts.workload
    return workload.shared_prefix_tokens / workload.prompt_tokens, "config.workload"


def smallest_weights(
    facts: Facts, ran: Experiments, tolerance: QualityTolerance
) -> tuple[int, str]:
    """The smallest weights quantization offers within the tolerance, and how that is known."""
    result = ran.quantization
    if result is not None:
        ok = acceptable(result, tolerance)
        reference = result.reference_variant
        if ok and reference and reference.weights_bytes:
            best = min(ok, key=lambda i: result.variants[i].weights_bytes or 0)
            ratio = (result.variants[best].weights_bytes or 0) / reference.weights_bytes
            return int(facts.weights_bytes * ratio), f"quantization.variants[{best}]"
        return facts.weights_bytes, "quantization (no variant within the quality tolerance)"
    per_param = DTYPE_BYTES.get(facts.dtype, 2)
    if per_param <= 1:
        return facts.weights_bytes, "already 8-bit"
    return int(facts.weights_bytes / per_param), "int8 weights (estimated)"


def classify(
    facts: Facts, ran: Experiments, tolerance: QualityTolerance
) -> tuple[str, list[DecidingNumber]]:
    """(bottleneck, the numbers it was decided on)."""
    numbers = time_numbers(facts) + memory_numbers(facts)
    reuse, where = prompt_reuse(facts, ran)
    numbers.append(
        DecidingNumber(
            "prompt_reuse_share", reuse, "share", REUSE_MATTERS,
            f"prompt tokens repeated across prompts ({where})",
        )
    )  # fmt: skip
    fit = facts.fit
    if fit is not None:
        small, how = smallest_weights(facts, ran, tolerance)
        after = facts.fit_with_weights(small)
        numbers.append(
            DecidingNumber(
                "fits_after_quantization", float(bool(after and after.fits)), "bool", None,
                f"weights {size(small)} ({how}) + KV cache on {fit.gpu_count}× "
                f"{fit.gpu_kind}",
            )
        )  # fmt: skip
        if not fit.fits:
            return ("memory" if after and after.fits else "devices"), numbers
        if fit.headroom_bytes < MIN_HEADROOM_SHARE * fit.available_bytes:
            return "memory", numbers
    if facts.prefill_share >= PREFILL_DOMINATES:
        return "prompt", numbers
    if reuse >= REUSE_MATTERS and facts.prefill_share >= PREFILL_MATTERS:
        return "prompt", numbers
    if facts.ttft_meets_target is False and facts.tpot_meets_target is not False:
        return "prompt", numbers
    return "generation", numbers


def time_numbers(facts: Facts) -> list[DecidingNumber]:
    key = facts.timing_key
    out = [
        DecidingNumber(
            "prefill_share", facts.prefill_share, "share", PREFILL_DOMINATES,
            f"prefill's share of one request's end-to-end time ({key})",
        ),
        DecidingNumber(
            "decode_share", facts.decode_share, "share", 1 - PREFILL_DOMINATES,
            f"decode's share of one request's end-to-end time ({key})",
        ),
        DecidingNumber("ttft_ms", facts.ttft_seconds * 1e3, "ms", facts.workload.ttft_ms,
                       "time to first token; threshold: your target"),
        DecidingNumber("tpot_ms", facts.tpot_seconds * 1e3, "ms", facts.workload.tpot_ms,
                       "time per output token; threshold: your target"),
    ]  # fmt: skip
    if facts.served is not None:
        rates = "measured" if facts.measured else "datasheet"
        out.append(DecidingNumber(
            "queue_share", facts.queue_share, "share", None,
            "waiting to be scheduled, of one request's time: continuous batching of your "
            f"{facts.workload.concurrency} users simulated on the {rates} rates (projected)",
        ))  # fmt: skip
    if facts.decode_fraction_of_peak is not None:
        out.append(
            DecidingNumber(
                "decode_fraction_of_peak_bandwidth", facts.decode_fraction_of_peak, "share",
                None, "bytes read per decode step / step time, against the GPU's datasheet "
                "bandwidth (decode)",
            )
        )  # fmt: skip
    if facts.prefill_fraction_of_peak is not None:
        out.append(
            DecidingNumber(
                "prefill_fraction_of_peak_flops", facts.prefill_fraction_of_peak, "share",
                None, "model FLOPs / prefill time, against the GPU's datasheet peak (prefill)",
            )
        )  # fmt: skip
    intensity, ridge = facts.decode_intensity(), facts.ridge_point()
    if intensity is not None:
        out.append(
            DecidingNumber(
                "decode_flops_per_byte", intensity, "FLOP/byte", ridge,
                f"arithmetic intensity of a decode step at concurrency "
                f"{facts.workload.concurrency} ({facts.dtype}); below the GPU's ridge point "
                "(peak FLOP/s ÷ bandwidth) decode is memory-bandwidth-bound",
            )
        )  # fmt: skip
    return out


def memory_numbers(facts: Facts) -> list[DecidingNumber]:
    fit = facts.fit
    if fit is None:
        return [
            DecidingNumber(
                "memory_headroom_bytes", None, "bytes", None,
                "no deployment GPU named and none here: capacity not judged",
            )
        ]  # fmt: skip
    where = f"{fit.gpu_count}× {fit.gpu_kind}"
    return [
        DecidingNumber(
            "memory_required_bytes", float(fit.required_bytes), "bytes",
            float(fit.available_bytes),
            f"weights + KV cache for {fit.concurrency} × {fit.context_tokens} tokens, against "
            f"the usable memory of {where} (memory.fit)",
        ),
        DecidingNumber(
            "memory_headroom_share", fit.headroom_bytes / fit.available_bytes
            if fit.available_bytes else 0.0, "share", MIN_HEADROOM_SHARE,
            f"usable memory left after weights and KV cache on {where}",
        ),
        DecidingNumber(
            "max_concurrency", float(fit.max_concurrency), "requests",
            float(fit.concurrency), "requests of this context whose KV cache fits beside the "
            "weights; threshold: your concurrency",
        ),
    ]  # fmt: skip


def label(bottleneck: str) -> str:
    return BOTTLENECK_LABELS[bottleneck]
