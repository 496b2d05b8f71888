"""One search over deployable configurations, each served at the user's workload.

No torch import. A configuration (`configurations.Configuration`) is a layout of the
user's GPUs (tensor × pipeline stages × replicas, or expert parallelism for a
mixture of experts) × the weights' format × the KV cache's × speculative decoding
(only where an acceptance is known: measured by the job's speculative experiment or
given) × prefix caching (only where the workload shares a prefix). Every one is
first screened on the step model alone (microseconds each: does it fit, its decode
step at the users' batch, one prompt alone); those another configuration beats on
every count (changes, quality risk, TPOT, TTFT, throughput per GPU) are dropped,
and the best of the rest are served by the simulated engine
(`profiling.projection.serving`) at the user's workload, its p90s held against the
targets. Where the job measured a configuration, its figures replace the estimate.

The ranking respects what the user has: configurations meeting the targets on
their GPUs first, by fewest changes from their deployment, then the quality risk,
then throughput; then the ones that miss, nearest the targets first. Only when none
of their GPUs' configurations meets the targets is a search of more GPUs (2×, 4×,
8×, at most `MAX_GPUS`) made, and its best is a separate "with more hardware" line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache

from profiling.config import Workload
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS
from profiling.projection.calibration import Calibration, assumed
from profiling.projection.configurations import Configuration
from profiling.projection.engines import DEFAULT_ENGINE, limits
from profiling.projection.expert_parallel import ExpertParallel
from profiling.projection.fit import activation_bytes, usable_bytes
from profiling.projection.precision import already_quantized, weights_format
from profiling.projection.serving import Requests, Served, simulate
from profiling.projection.speculation import Speculating, best_draft_length, draft_bytes
from profiling.projection.step_time import DeviceMemory, Staged, StepModel, kv_capacity_tokens

SIZES = (1, 2, 4, 8)  # every degree tried (TP, PP, EP), as the layout search's
WEIGHTS = ("auto", "fp8", "int8", "int4")  # bf16/fp16 are "auto" for a 16-bit model
KV_CACHES = tuple(KV_CACHE_FORMATS)
SHORTLIST = 8  # configurations of one GPU count served by the simulated engine
MAX_GPUS = 64
DRAFT = "draft head"  # an EAGLE-style head: what the speculative estimate assumes

# Quality risk: 0 none, 1 small (8-bit), 2 measurable (4-bit); an fp8 KV cache adds 1.
RISK = {"auto": 0, "bf16": 0, "fp16": 0, "fp8": 1, "int8": 1, "int4": 2, "fp4": 2}
STATED_RISK = {
    "fp8": "fp8 weights: usually within 1 % of bf16 on benchmarks (stated, not measured); check it",
    "int8": "int8 weights: usually close to bf16 (stated, not measured); check it",
    "int4": "int4 weights: measurable loss on some tasks (stated, not measured); check it",
    "fp4": "fp4 weights: measurable loss on some tasks (stated, not measured); check it",
}
KV_RISK = (
    "fp8 KV cache: attention reads 8-bit keys and values; small losses on long contexts "
    "are reported (stated, not measured); check it"
)


@dataclass(frozen=True)
class Scenario:
    """What is searched: the model, the user's GPUs and workload, their deployment now."""

    shapes: Shapes
    gpu: GPU
    gpu_count: int
    dtype: str  # the model's own serving dtype ("bfloat16")
    workload: Workload
    current: Configuration
    acceptance: float | None = None  # per drafted token; None: no speculation searched
    acceptance_basis: str = ""  # "measured by the speculative experiment", "given"
    draft: str = DRAFT
    quality: dict[str, str] = field(default_factory=dict, hash=False)  # measured caveats
    measured: dict[Configuration, Measured] = field(default_factory=dict, hash=False)
    # Prompt tokens served from the prefix cache / prompt tokens, as the job measured it at
    # the user's prompts; None: every request's shared prefix is taken as cached.
    prefix_hit_rate: float | None = None
    prefix_basis: str = ""
    engine: str = DEFAULT_ENGINE  # whose limits serve every configuration (engines.ENGINES)


@dataclass(frozen=True)
class Measured:
    """A configuration's figures as the job measured them at the user's workload."""

    ttft_p90_seconds: float
    tpot_p50_seconds: float
    tpot_p90_seconds: float
    throughput: float  # output tokens/s of the whole deployment
    source: str = ""  # "measured on vllm 0.11.0 at concurrency 4, 24 requests"


@dataclass
class Evaluated:
    """One configuration served at the user's workload (or screened only: `served` None)."""

    configuration: Configuration
    on_your_gpus: bool
    fits: bool
    changes: int
    risk: int
    quality_risk: str
    basis: str = "estimated"
    served: Served | None = None
    throughput: float = 0.0  # output tokens/s of the whole deployment
    ttft_p90: float = math.inf
    tpot_p50: float = math.inf
    tpot_p90: float = math.inf
    meets: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def per_gpu(self) -> float:
        return self.throughput / self.configuration.gpus

    def miss(self, w: Workload) -> float:
        """How far past the targets its p90s are: the larger ratio (≤ 1 meets)."""
        ratios = [self.tpot_p90 * 1e3 / w.tpot_ms] if w.tpot_ms else []
        ratios += [self.ttft_p90 * 1e3 / w.ttft_ms] if w.ttft_ms else []
        return max(ratios, default=0.0)


@dataclass(frozen=True)
class Engine:
    """How a configuration is served: the step of one engine, the KV tokens it holds, how
    many such engines one copy runs side by side, and the users on each."""

    step: object
    kv_tokens: int
    engines: int  # per copy: pipeline groups in flight, or expert-parallel ranks
    users: int  # per engine
    cached: int  # prompt tokens the prefix cache serves
    max_seqs: int | None = None  # the serving engine's limits (None: vLLM's on the GPU)
    max_batched_tokens: int | None = None


# What a GPU without fp8 compute does with fp8 weights in vLLM (its FP8 docs: W8A16 with the
# FP8 Marlin kernels on Ampere and Turing), said wherever such a GPU is set aside.
FP8_WEIGHT_ONLY = (
    "vLLM runs fp8 weights there weight-only (W8A16, FP8 Marlin), which the estimate does not model"
)


@cache
def rates_on(gpu: GPU, precision: str, layers: int) -> Calibration | None:
    """The assumed rates of `gpu` serving in `precision`; None where it has no compute
    for that format (fp8 on an A100): it does not run it."""
    try:
        return assumed(gpu, precision, layers)
    except ValueError:
        return None


def precision_of(sc: Scenario, c: Configuration) -> str:
    return WEIGHT_FORMATS[c.weights] or sc.dtype


def engine(sc: Scenario, c: Configuration, concurrency: int | None = None) -> Engine | None:
    """The engine serving `c` to `concurrency` users (the workload's by default); None
    where the GPU lacks the format or the users' KV caches do not fit."""
    s, w, gpu = sc.shapes, sc.workload, sc.gpu
    precision, kv = precision_of(sc, c), KV_CACHE_FORMATS[c.kv_cache]
    rates = rates_on(gpu, precision, s.num_layers)
    if rates is None:
        return None
    per_copy = math.ceil((concurrency or w.concurrency) / c.replicas)
    cached = cached_tokens(sc) if c.prefix_caching else 0
    # An expert-parallel copy runs as tp = ep ranks where the engine counts its layout.
    rule = limits(gpu, sc.engine, tp=max(c.tp, c.ep), pp=c.pp)
    if c.ep > 1:
        base = StepModel(s, rates, precision, kv, 1, gpu)
        step: object = ExpertParallel(base, c.ep)
        held = step.weights_held()  # type: ignore[attr-defined]
        usable = usable_bytes(gpu.memory_bytes, activation_bytes(s, precision, 1), rule, held)
        capacity = kv_capacity_tokens(s, precision, kv, gpu, DeviceMemory(1, usable, held),
                                      w.context_tokens)  # fmt: skip
        engines = c.ep
    else:
        base = StepModel(s, rates, precision, kv, c.tp, gpu)
        step = Staged(base, c.pp) if c.pp > 1 else base
        held = float(s.weights_bytes(weights_format(precision)))
        if c.draft:
            held += draft_bytes(s, precision)
            step = Speculating(base, sc.acceptance or 0.0, c.draft_tokens)
        usable = usable_bytes(gpu.memory_bytes, activation_bytes(s, precision, c.tp), rule,
                              held / (c.tp * c.pp))  # fmt: skip
        memory = DeviceMemory(c.tp * c.pp, usable, held)
        capacity = kv_capacity_tokens(s, precision, kv, gpu, memory, w.context_tokens)
        engines = max(1, min(c.pp, per_copy))
    users = math.ceil(per_copy / engines)
    # An expert-parallel rank's capacity is its own device's; pipeline groups share theirs.
    kv_tokens = (capacity or 0) if c.ep > 1 else (capacity or 0) // engines
    need = users * w.context_tokens - (users - 1) * cached  # the shared prefix held once
    if capacity is None or kv_tokens < need:
        return None
    return Engine(step, kv_tokens, engines, users, cached, rule.seqs(bool(c.draft)),
                  rule.max_batched_tokens)  # fmt: skip


def cached_tokens(sc: Scenario) -> int:
    """Prompt tokens of each request the prefix cache serves: the measured hit rate's
    share of the prompt, else the whole shared prefix (never the whole prompt)."""
    w = sc.workload
    hits = w.shared_prefix_tokens if sc.prefix_hit_rate is None else round(
        sc.prefix_hit_rate * w.prompt_tokens)  # fmt: skip
    return max(0, min(hits, w.prompt_tokens - 1))


def screen(sc: Scenario, c: Configuration) -> Evaluated:
    """The step model's figures alone: the decode step at the users' batch (TPOT), one
    prompt alone (TTFT), the throughput they give; no queueing, no mixed steps."""
    e = _blank(sc, c)
    found = engine(sc, c)
    if found is None:
        return e
    w = sc.workload
    context = found.users * (w.prompt_tokens + w.output_tokens / 2)
    tpot = found.step.seconds(found.users, context)  # type: ignore[attr-defined]
    ttft = found.step.seconds(0, 0, ((w.prompt_tokens - found.cached, found.cached),))  # type: ignore[attr-defined]
    e.fits, e.ttft_p90, e.tpot_p50, e.tpot_p90 = True, ttft, tpot, tpot
    e.throughput = found.users * found.engines * c.replicas / tpot
    return e


def serve(sc: Scenario, c: Configuration, concurrency: int | None = None) -> Evaluated:
    """`c` served by the simulated engine to `concurrency` users (the workload's by
    default), or the job's measurement of it at the workload where there is one."""
    e = _blank(sc, c)
    w = sc.workload
    users = concurrency or w.concurrency
    found = engine(sc, c, users)
    if found is None:
        return e
    rate = w.request_rate if concurrency is None and w.request_rate else 0.0
    served = _simulate(found, w, rate / (c.replicas * found.engines))
    e.fits, e.served = True, served
    e.throughput = served.output_tokens_per_second * found.engines * c.replicas
    e.ttft_p90, e.tpot_p50, e.tpot_p90 = served.ttft.p90, served.tpot.p50, served.tpot.p90
    measured = sc.measured.get(c) if concurrency is None else None
    if measured is not None:
        e.basis, e.throughput = "measured", measured.throughput
        e.ttft_p90, e.tpot_p50 = measured.ttft_p90_seconds, measured.tpot_p50_seconds
        e.tpot_p90 = measured.tpot_p90_seconds
        e.notes.append(measured.source or "measured")
    if w.ttft_ms or w.tpot_ms:
        e.meets = e.miss(w) <= 1.0
    if c.draft:
        e.notes.append(f"acceptance {sc.acceptance:.2f} per drafted token ({sc.acceptance_basis})")
    if c.prefix_caching:
        share = found.cached / w.prompt_tokens
        e.notes.append(f"{share:.0%} of each prompt from the prefix cache ("
                       + (f"hit rate {sc.prefix_basis})" if sc.prefix_hit_rate is not None
                          else "its shared prefix, assumed always cached)"))  # fmt: skip
    return e


def _simulate(found: Engine, w: Workload, rate: float) -> Served:
    return simulate(found.step, Requests(  # type: ignore[arg-type]
        w.prompt_tokens, w.output_tokens,
        concurrency=0 if rate else found.users, rate=rate, kv_tokens=found.kv_tokens,
        max_seqs=found.max_seqs, max_batched_tokens=found.max_batched_tokens,
        ttft_slo=w.ttft_ms / 1e3 if w.ttft_ms else None,
        tpot_slo=w.tpot_ms / 1e3 if w.tpot_ms else None, cached_tokens=found.cached,
    ))  # fmt: skip


def _blank(sc: Scenario, c: Configuration) -> Evaluated:
    risks = [sc.quality.get(c.weights) or STATED_RISK.get(c.weights, "")]
    risks.append(sc.quality.get("kv_fp8", KV_RISK) if c.kv_cache == "fp8" else "")
    return Evaluated(
        configuration=c,
        on_your_gpus=c.gpus == sc.gpu_count,
        fits=False,
        changes=changes(sc.current, c),
        risk=RISK.get(c.weights, 0) + (c.kv_cache == "fp8"),
        quality_risk="; ".join(r for r in risks if r),
    )


def changes(current: Configuration, c: Configuration) -> int:
    """Settings an engineer changes to go from `current` to `c` (more GPUs count one)."""
    same = [
        (current.tp, current.pp, current.replicas, current.ep) == (c.tp, c.pp, c.replicas, c.ep),
        current.weights == c.weights,
        current.kv_cache == c.kv_cache,
        current.draft == c.draft,
        current.prefix_caching == c.prefix_caching,
        current.gpus == c.gpus,
    ]
    return sum(not s for s in same)


def layouts(sc: Scenario, gpus: int) -> list[tuple[int, int, int, int]]:
    """(tp, pp, replicas, ep) using all `gpus`."""
    s = sc.shapes
    out = [
        (tp, pp, gpus // (tp * pp), 1)
        for tp in SIZES
        for pp in SIZES
        if not gpus % (tp * pp) and tp <= s.num_attention_heads and pp <= s.num_layers
    ]
    if s.num_experts:
        out += [(1, 1, gpus // ep, ep) for ep in SIZES[1:] if not gpus % ep
                and not s.num_experts % ep]  # fmt: skip
    return out


def configurations(sc: Scenario, gpus: int) -> list[Configuration]:
    """Every configuration of `gpus` GPUs the search tries."""
    w = sc.workload
    prefix = (False, True) if w.shared_prefix_tokens else (False,)
    out, lengths = [], {}  # the draft length by (tp, replicas, weights, KV cache)
    for tp, pp, replicas, ep in layouts(sc, gpus):
        for weights in weight_formats(sc):
            for kv in KV_CACHES:
                for cached in prefix:
                    c = Configuration(sc.gpu.key, tp, pp, replicas, ep, weights, kv,
                                      prefix_caching=cached)  # fmt: skip
                    out.append(c)
                    if sc.acceptance is not None and pp == ep == 1:
                        key = (tp, replicas, weights, kv)
                        lengths[key] = lengths.get(key) or _draft_length(sc, c)
                        out.append(replace(c, draft=sc.draft, draft_tokens=lengths[key]))
    return out


def weight_formats(sc: Scenario) -> tuple[str, ...]:
    """The weight formats the search tries: the model's own, and where it is 16-bit the
    usual quantizations (fp4 only where the GPU has FP4 tensor cores). A checkpoint that
    ships quantized is never quantized again."""
    if already_quantized(sc.shapes, sc.dtype):
        return ("auto",)
    return WEIGHTS + (("fp4",) if sc.gpu.fp4_flops_per_second else ())


def _draft_length(sc: Scenario, c: Configuration) -> int:
    """The draft length that decodes fastest for `c` at the users' batch."""
    rates = rates_on(sc.gpu, precision_of(sc, c), sc.shapes.num_layers)
    w = sc.workload
    if rates is None:
        return 1  # the GPU lacks the format: screened out anyway
    step = StepModel(sc.shapes, rates, precision_of(sc, c), KV_CACHE_FORMATS[c.kv_cache], c.tp,
                     sc.gpu)  # fmt: skip
    rows = max(1, math.ceil(w.concurrency / c.replicas))
    return best_draft_length(step, rows, rows * (w.prompt_tokens + w.output_tokens / 2),
                             sc.acceptance or 0.0)  # fmt: skip


def rank_key(e: Evaluated, w: Workload) -> tuple:
    """Meeting the targets first (fewest changes, then quality risk, then throughput);
    the rest nearest the targets first; without targets, throughput first."""
    if not (w.ttft_ms or w.tpot_ms):
        return (0, -round(e.throughput, 6), e.changes, e.risk)
    if e.miss(w) <= 1.0:
        return (0, e.changes, e.risk, -e.throughput)
    return (1, round(e.miss(w), 3), e.changes, e.risk)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """The indices of the points no other point beats on both axes (ties kept), by x."""
    front = [
        i for i, (x, y) in enumerate(points)
        if not any(ox >= x and oy >= y and (ox, oy) != (x, y) for ox, oy in points)
    ]  # fmt: skip
    return sorted(front, key=lambda i: points[i])


def dominated(e: Evaluated, others: list[Evaluated]) -> bool:
    """Another is no worse on every count and better on one (screened figures)."""
    mine = (e.changes, e.risk, e.tpot_p50, e.ttft_p90, -e.per_gpu)
    for o in others:
        theirs = (o.changes, o.risk, o.tpot_p50, o.ttft_p90, -o.per_gpu)
        if o is not e and all(a <= b for a, b in zip(theirs, mine, strict=True)) and theirs != mine:
            return True
    return False


def shortlist(sc: Scenario, gpus: int, size: int = SHORTLIST) -> tuple[list[Evaluated], int]:
    """The configurations of `gpus` GPUs worth serving, served, ranked; and how many
    were screened."""
    tried = configurations(sc, gpus)
    fitting = [e for e in (screen(sc, c) for c in tried) if e.fits]
    kept = [e for e in fitting if not dominated(e, fitting)]
    kept.sort(key=lambda e: rank_key(e, sc.workload))
    chosen = [e.configuration for e in kept[:size]]
    if gpus == sc.gpu_count and sc.current not in chosen:
        chosen.append(sc.current)  # what they run now, to compare against
    # What the job measured, served too: its figures replace the estimate's.
    chosen += [c for c in sc.measured if c.gpus == gpus and c not in chosen]
    served = [e for e in (serve(sc, c) for c in chosen) if e.fits]
    return sorted(served, key=lambda e: rank_key(e, sc.workload)), len(tried)


def search(sc: Scenario) -> tuple[list[Evaluated], int | None, list[str]]:
    """(the ranked configurations, the index of the "with more hardware" line or None,
    notes): those of the user's GPUs first, then the more-hardware line where needed."""
    ranked, tried = shortlist(sc, sc.gpu_count)
    notes = [f"{tried} configurations of your {sc.gpu_count}× {sc.gpu.key} screened on the "
             f"step model; {len(ranked)} served by the simulated engine (the rest did not "
             "fit, or another beat them on every count)"]  # fmt: skip
    w = sc.workload
    if not (w.ttft_ms or w.tpot_ms) or any(e.meets for e in ranked):
        return ranked, None, notes
    more = sc.gpu_count * 2
    while more <= min(MAX_GPUS, sc.gpu_count * 8):
        found, _ = shortlist(sc, more, size=4)
        best = next((e for e in found if e.meets), None)
        if best is not None:
            notes.append(f"no configuration of your {sc.gpu_count}× {sc.gpu.key} meets your "
                         "targets, with any layout, precision or technique searched")  # fmt: skip
            return [*ranked, best], len(ranked), notes
        more *= 2
    notes.append(f"no configuration of up to {min(MAX_GPUS, sc.gpu_count * 8)}× "
                 f"{sc.gpu.key} meets your targets")  # fmt: skip
    return ranked, None, notes
