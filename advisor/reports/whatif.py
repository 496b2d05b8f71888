"""What if: the stored result projected to another GPU, GPU count, workload or dtype.

Pure arithmetic on the stored `Profile` (`profiling.projection.estimate`): no job runs and
no model is loaded. The rates come from this profile's measurements when the
target is the device it ran on (a calibration), otherwise from the catalog's
datasheet peaks times assumed efficiencies (an estimate). The advice is run
again on the estimate path (as `python -m profiling estimate` does) with the
what-if workload, to say whether the first recommendation changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from profiling.advice.build import advise
from profiling.config import Workload
from profiling.measure import hardware
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.projection.calibration import Calibration, PhaseRate, assumed, calibrate
from profiling.projection.deployments import FIRST_ONLY
from profiling.projection.engines import DEFAULT_ENGINE, NAMES, limits
from profiling.projection.estimate import Deployment, Projection, Traffic, project
from profiling.projection.precision import PRECISIONS
from profiling.results import FitCheck
from profiling.technique_kit.advice_results import Advice
from profiling.technique_kit.facts import Facts
from profiling.units import UNKNOWN, count, gb_s, ms, pct, size, tflop_s, tok_s

WORKER = ""  # the GPU choice meaning "the device this profile ran on"
# The run's own formats, then the serving precisions a catalog GPU can be asked about.
QUANTIZED = tuple(k for k in PRECISIONS if k not in ("bfloat16", "float16"))
DTYPES = ("float32", "bfloat16", "float16", *QUANTIZED)
KV_FORMATS = (("", "as the weights (16 bits when they are quantized)"), ("float8", "fp8"))
# An older result's shapes rebuilt from its model summary are trusted within this.
SHAPES_TOLERANCE = 0.02


@dataclass(frozen=True)
class Scenario:
    """The what-if inputs (the form's cleaned data)."""

    gpu_kind: str  # a catalog key, or WORKER
    gpu_count: int
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    dtype: str
    kv_dtype: str = ""
    spec_acceptance: float | None = None  # a draft's per-token acceptance, for the estimate
    serving_engine: str = DEFAULT_ENGINE  # whose limits the projection stands for

    @property
    def engine_name(self) -> str:
        return NAMES[self.serving_engine]


@dataclass
class Outcome:
    """One scenario projected: the figures, what they rest on, and the advice again."""

    scenario: Scenario
    where: str
    on_worker: bool
    calibration: Calibration
    projection: Projection
    fit: FitCheck | None
    advice: Advice | None
    notes: list[str] = field(default_factory=list)


def initial(profile: Profile) -> Scenario:
    """The scenario the job was submitted with: its deployment GPU (or the worker's device)."""
    config, env = profile.config, profile.environment
    kind = config.hardware.gpu_kind or WORKER
    if kind != WORKER and kind not in hardware.catalog():
        kind = WORKER
    # As the library projects to a deployment GPU: the measured dtype on the measured
    # device, a half-precision one on another GPU (a float32 CPU run serves in bfloat16).
    half = env.dtype in ("bfloat16", "float16")
    on_worker = kind == WORKER or kind == env.gpu_kind
    dtype = env.dtype if (half or on_worker) and env.dtype in DTYPES else "bfloat16"
    w = config.workload
    acceptance = measured_acceptance(profile)
    return Scenario(kind, config.hardware.gpu_count, w.concurrency, w.prompt_tokens,
                    w.output_tokens, dtype, spec_acceptance=acceptance,
                    serving_engine=config.hardware.serving_engine)  # fmt: skip


def measured_acceptance(profile: Profile) -> float | None:
    """The acceptance per drafted token of the job's fastest measured draft, if it ran one."""
    result = profile.experiments.speculative
    points = [p for p in result.sweeps if p.proposed_tokens] if result is not None else []
    if not points:
        return None
    return round(max(points, key=lambda p: p.speedup).acceptance_rate, 2)


def worker_label(profile: Profile) -> str:
    env = profile.environment
    return f"this profile's device ({env.device_name or env.device}, measured)"


def shapes_of(profile: Profile) -> tuple[Shapes, str]:
    """The model's shapes and where they came from.

    Results written before `ModelInfo.shapes` existed are rebuilt from the model
    summary: a dense MLP, and the tied or untied head whose parameter count is
    nearer the loaded one.
    """
    if profile.model.shapes is not None:
        return profile.model.shapes, "the model's shapes stored with the result"
    m = profile.model
    base = dict(
        num_layers=m.num_layers, hidden_size=m.hidden_size,
        num_attention_heads=m.num_attention_heads, num_key_value_heads=m.num_key_value_heads,
        head_dim=m.head_dim, intermediate_size=m.intermediate_size or 4 * m.hidden_size,
        vocab_size=m.vocab_size,
    )  # fmt: skip
    options = [Shapes(**base, tie_word_embeddings=tied) for tied in (False, True)]
    shapes = min(options, key=lambda s: abs(s.total_params - m.num_parameters))
    note = "rebuilt from the model summary of an older result (dense MLP assumed)"
    off = abs(shapes.total_params - m.num_parameters) / max(m.num_parameters, 1)
    if off > SHAPES_TOLERANCE:
        note += f"; they count {off:.0%} off the loaded parameters, so read the figures as rough"
    return shapes, note


def target(profile: Profile, kind: str) -> tuple[GPU | None, bool]:
    """(the catalog GPU for capacity, whether the target is the profile's own device)."""
    own = profile.environment.gpu_kind
    if kind == WORKER:
        return (hardware.catalog().get(own) if own else None), True
    return hardware.catalog()[kind], kind == own


def workload_of(profile: Profile, s: Scenario) -> Workload:
    base = profile.config.workload
    return dataclasses.replace(
        base,
        prompt_tokens=s.prompt_tokens,
        output_tokens=s.output_tokens,
        concurrency=s.concurrency,
        shared_prefix_tokens=min(base.shared_prefix_tokens, s.prompt_tokens),
    )


def rates_for(
    profile: Profile, shapes: Shapes, gpu: GPU | None, on_worker: bool, dtype: str
) -> Calibration:
    if on_worker:
        return calibrate(shapes, profile, profile.environment.device_name)
    assert gpu is not None
    return assumed(gpu, dtype, shapes.num_layers)


def run(profile: Profile, s: Scenario) -> Outcome:
    """Project one scenario; raises ValueError (or KeyError, TypeError) when it cannot."""
    shapes, shapes_note = shapes_of(profile)
    gpu, on_worker = target(profile, s.gpu_kind)
    workload = workload_of(profile, s)
    calibration = rates_for(profile, shapes, gpu, on_worker, s.dtype)
    traffic = Traffic(s.prompt_tokens, s.output_tokens, s.concurrency, workload.ttft_ms,
                      workload.tpot_ms)  # fmt: skip
    deployment = Deployment(gpu, s.gpu_count, s.kv_dtype,
                            limits(gpu, s.serving_engine, tp=s.gpu_count))  # fmt: skip
    projection = project(shapes, calibration, s.dtype, traffic, deployment)
    fit, advice = None, None
    if gpu is not None:
        stated = profile.config.stated_bottleneck
        facts = Facts.from_projection(
            projection, shapes, calibration, workload, gpu, stated, s.spec_acceptance
        )
        # Answered while the page waits: the first configuration's capacity only.
        fit, advice = facts.fit, advise(facts, capacity_for=FIRST_ONLY)
    env = profile.environment
    name = (env.device_name or env.device) if on_worker or gpu is None else gpu.key
    notes = [f"shapes: {shapes_note}", *projection.notes, *_caveats(profile, s, gpu, on_worker)]
    return Outcome(s, f"{s.gpu_count}× {name}", on_worker, calibration, projection, fit, advice,
                   notes)  # fmt: skip


def _caveats(profile: Profile, s: Scenario, gpu: GPU | None, on_worker: bool) -> list[str]:
    notes = []
    measured_dtype = profile.environment.dtype
    if on_worker and s.dtype != measured_dtype:
        notes.append(f"the rates were measured in {measured_dtype}; {s.dtype} changes the bytes "
                     "moved, not the rates")  # fmt: skip
    if not on_worker and gpu is not None and gpu.peak_flops(s.dtype) is None:
        notes.append(f"the catalog has no {s.dtype} peak for {gpu.key}: its bfloat16 peak is used")
    if gpu is None:
        notes.append("the device is not a catalog GPU: whether it fits is not judged and the "
                     "advice is not run again (pick a GPU to see both)")  # fmt: skip
    return notes


# In words and units, for the template ----------------------------------------------


def rate_rows(calibration: Calibration) -> list[tuple[str, str]]:
    """The calibration's rates: what every projected figure rests on."""

    def phase(name: str, rate: PhaseRate) -> tuple[str, str]:
        parts = []
        if rate.flops_per_second:
            parts.append(tflop_s(rate.flops_per_second))
        if rate.bytes_per_second:
            parts.append(gb_s(rate.bytes_per_second))
        if rate.overhead_seconds:
            parts.append(f"+ {ms(rate.overhead_seconds)} per pass")
        used = f" (fitted to {rate.points} points)" if rate.points else " (assumed)"
        return name, " ".join(parts) + used

    return [phase("Prefill", calibration.prefill), phase("Decode", calibration.decode)]


def figure_rows(before: Outcome | None, after: Outcome) -> list[dict[str, str]]:
    """The projected figures, the submitted scenario's beside the what-if's."""

    def figures(o: Outcome) -> list[tuple[str, str]]:
        p, fit = o.projection, o.fit
        fits = UNKNOWN if fit is None else ("fits" if fit.fits else "does not fit")
        served = p.served
        return [
            ("Time to first token, p50", ms(p.ttft_seconds)),
            ("Time to first token, p99", ms(served.ttft.p99) if served else UNKNOWN),
            ("Time per output token, p50", ms(p.tpot_seconds)),
            ("Time per output token, p99", ms(served.tpot.p99) if served else UNKNOWN),
            ("Inter-token latency, p99", ms(served.itl.p99) if served else UNKNOWN),
            ("End to end, one request (p50)", ms(p.end_to_end_seconds)),
            ("Output throughput (all requests)", tok_s(p.decode_tokens_per_second)),
            (
                "Goodput (requests/s meeting your targets)",
                UNKNOWN
                if served is None or served.goodput_requests_per_second is None
                else f"{served.goodput_requests_per_second:.2f} req/s "
                f"({pct(served.slo_attainment)} of requests)",
            ),
            ("Prefill share of a request", pct(p.prefill_share)),
            ("Queueing share of a request", pct(p.queue_share)),
            ("Mean decode batch", UNKNOWN if served is None else f"{served.mean_batch:.1f}"),
            ("Weights", size(p.weights_bytes)),
            ("KV cache (all requests)", size(p.kv_cache_bytes)),
            ("Memory needed", size(p.weights_bytes + p.kv_cache_bytes)),
            ("Usable memory", UNKNOWN if fit is None else size(fit.available_bytes)),
            ("Fits", fits),
            ("Most requests that fit", UNKNOWN if fit is None else count(fit.max_concurrency)),
        ]

    old = figures(before) if before else []
    return [
        {"name": name, "after": value, "before": old[i][1] if old else UNKNOWN}
        for i, (name, value) in enumerate(figures(after))
    ]


def first_line(advice: Advice | None) -> str:
    if advice is None:
        return UNKNOWN
    first = advice.first
    head = advice.bottleneck_label
    return f"{head}: {first.setting} ({first.technique})" if first else f"{head}: no technique"


def advice_change(
    measured: Advice | None, before: Outcome | None, after: Outcome
) -> dict[str, Any] | None:
    """Whether the what-if's advice differs (bottleneck or first technique) from the advice
    on the same path for the submitted scenario, or, where that has none, the stored one."""
    if after.advice is None:
        return None
    submitted = before.advice if before else None
    reference = submitted or measured
    against = "the submitted workload (estimated the same way)" if submitted else (
        "this report's measured advice")  # fmt: skip

    def key(a: Advice) -> tuple[str, str]:
        return a.bottleneck, a.first.technique if a.first else ""

    return {
        "measured": first_line(measured),
        "reference": first_line(reference),
        "against": against,
        "after": first_line(after.advice),
        "summary": after.advice.summary,
        "changes": None if reference is None else key(reference) != key(after.advice),
    }
