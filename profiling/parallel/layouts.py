"""Ways to lay a model over N GPUs, each served by the simulated engine, and the best one.

A layout is tensor parallelism over `tp` GPUs, pipeline stages over `pp`, and
`replicas` independent copies of that engine behind a load balancer
(tp × pp × replicas = the GPUs used), the users split evenly over the copies.
Each layout that fits is served at the user's workload (`profiling.projection.serving`):
tensor parallelism pays its all-reduces per layer; a pipeline stage holds
1/pp of the layers, so a step is the slowest stage's share plus a
point-to-point send of the rows' activations between stages, and a request's
token passes every stage in turn (pipelining overlaps different requests'
steps, not one request's, so per-user latency does not drop with pp while
throughput rises as the stages fill). A mixture of experts is also laid out
expert-parallel over `ep` GPUs (vLLM's data-parallel attention with
--enable-expert-parallel): each GPU holds the shared weights whole, serves its
own users with their whole KV cache, and holds 1/ep of the experts; the ranks
step together, each reading its share of the experts all their rows touch and
sending each row to its experts and back (all-to-all) in every layer. The
front is the set of layouts no
other beats on both throughput per GPU and per-user TPOT; the pick is the
highest-throughput layout whose requests meet the user's targets (at the
90th percentile), or the highest-throughput one when no target is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from profiling.config import Workload
from profiling.measure.hardware import GPU
from profiling.model.shapes import Shapes
from profiling.parallel.plans import TP_SIZES
from profiling.projection.calibration import Calibration
from profiling.projection.engines import DEFAULT_ENGINE, limits
from profiling.projection.expert_parallel import ExpertParallel
from profiling.projection.fit import activation_bytes, usable_bytes
from profiling.projection.precision import weights_format
from profiling.projection.serving import Requests, Served, simulate
from profiling.projection.step_time import DeviceMemory, Staged, StepModel, kv_capacity_tokens

SIZES = TP_SIZES  # every degree the search tries (TP, PP, EP) is one of the TP sizes
# Data-parallel attention with expert parallelism, as each engine asks for it (the flags of
# `profiling.engine.commands` and `profiling.engine.projected_commands`).
EXPERT_FLAGS = {
    "vllm": "vLLM's --data-parallel-size {ep} --enable-expert-parallel",
    "sglang": "SGLang's --tp-size {ep} --ep-size {ep} --attn-dp-size {ep}",
    "trtllm": "TensorRT-LLM's --tp_size {ep} --ep_size {ep} and enable_attention_dp in its "
    "--config file",
}
TIE = 0.02  # throughputs this close are one throughput


@dataclass
class Layout:
    tp: int
    pp: int
    replicas: int
    users: int  # per copy
    fits: bool
    ep: int = 1  # expert-parallel ranks per copy (tp = pp = 1 then)
    served: Served | None = None
    throughput: float = 0.0  # output tokens/s over all copies
    meets: bool | None = None  # the targets at p90 (None: no target given)
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.ep * self.replicas

    @property
    def name(self) -> str:
        copies = f"{self.replicas} replicas of " if self.replicas > 1 else ""
        if self.ep > 1:
            return f"{copies}DP={self.ep} attention + EP={self.ep} experts"
        parts = [f"TP={self.tp}"]
        if self.pp > 1:
            parts.append(f"PP={self.pp}")
        return f"{copies}{' × '.join(parts)}"

    @property
    def per_gpu(self) -> float:
        return self.throughput / self.gpus if self.gpus else 0.0


def search(
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    workload: Workload,
    gpu: GPU,
    gpus: int,
    kv_dtype: str = "",
    engine: str = DEFAULT_ENGINE,
) -> list[Layout]:
    """Every tp × pp × replicas using all `gpus`, served at the workload (those that fit),
    the KV cache in `kv_dtype` ("": the weights' rule, `precision.kv_format`), on
    `engine`'s limits (`profiling.projection.engines`)."""
    out = []
    for tp in SIZES:
        for pp in SIZES:
            if gpus % (tp * pp) or tp > shapes.num_attention_heads:
                continue
            replicas = gpus // (tp * pp)
            users = math.ceil(workload.concurrency / replicas)
            layout = Layout(tp, pp, replicas, users, fits=False)
            out.append(_serve(layout, shapes, calibration, dtype, workload, gpu, kv_dtype,
                              engine))  # fmt: skip
    for ep in SIZES[1:] if shapes.num_experts else ():
        if gpus % ep or shapes.num_experts % ep:
            continue
        users = math.ceil(workload.concurrency / (gpus // ep))
        layout = Layout(1, 1, gpus // ep, users, fits=False, ep=ep)
        out.append(_serve_experts(layout, shapes, calibration, dtype, workload, gpu, kv_dtype,
                                  engine))  # fmt: skip
    return out


def _serve(
    layout: Layout,
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    w: Workload,
    gpu: GPU,
    kv: str = "",
    engine: str = DEFAULT_ENGINE,
) -> Layout:
    devices = layout.tp * layout.pp
    rule = limits(gpu, engine, tp=layout.tp, pp=layout.pp)
    weights = shapes.weights_bytes(weights_format(dtype)) / devices
    usable = usable_bytes(gpu.memory_bytes, activation_bytes(shapes, dtype, layout.tp), rule,
                          weights)  # fmt: skip
    capacity = kv_capacity_tokens(shapes, dtype, kv, gpu, DeviceMemory(devices, usable),
                                  context=w.context_tokens)  # fmt: skip
    if capacity is None or capacity < w.context_tokens * layout.users:
        return layout  # its users' KV caches do not fit beside the weights
    # The pp stages hold pp groups of users in flight, one group per stage: each group
    # is served like a tp-way engine whose pass also crosses the stage boundaries.
    groups = min(layout.pp, layout.users)
    step = Staged(StepModel(shapes, calibration, dtype, kv, layout.tp, gpu), layout.pp)
    ttft, tpot = _targets(w)
    served = simulate(step, Requests(  # type: ignore[arg-type]
        w.prompt_tokens, w.output_tokens, concurrency=math.ceil(layout.users / groups),
        kv_tokens=capacity // groups, max_seqs=rule.max_seqs,
        max_batched_tokens=rule.max_batched_tokens, ttft_slo=ttft, tpot_slo=tpot,
    ))  # fmt: skip
    _served(layout, served, groups, ttft, tpot)
    if layout.pp > layout.users:
        layout.notes.append(f"{layout.pp - layout.users} of {layout.pp} stages idle: fewer "
                            "users than stages (pipeline bubbles)")  # fmt: skip
    return layout


def _serve_experts(
    layout: Layout,
    shapes: Shapes,
    calibration: Calibration,
    dtype: str,
    w: Workload,
    gpu: GPU,
    kv: str = "",
    engine: str = DEFAULT_ENGINE,
) -> Layout:
    """Each of the ep ranks serves its share of the copy's users, its KV cache in the
    memory the shared weights and its experts leave."""
    step = ExpertParallel(StepModel(shapes, calibration, dtype, kv, 1, gpu), layout.ep)
    rule = limits(gpu, engine, tp=layout.ep)
    usable = usable_bytes(gpu.memory_bytes, activation_bytes(shapes, dtype, 1), rule,
                          step.weights_held())  # fmt: skip
    memory = DeviceMemory(1, usable, step.weights_held())
    capacity = kv_capacity_tokens(shapes, dtype, kv, gpu, memory, w.context_tokens)
    users = math.ceil(layout.users / layout.ep)
    if capacity is None or capacity < w.context_tokens * users:
        return layout
    ttft, tpot = _targets(w)
    served = simulate(
        step,  # type: ignore[arg-type]
        Requests(
            w.prompt_tokens,
            w.output_tokens,
            concurrency=users,
            kv_tokens=capacity,
            max_seqs=rule.max_seqs,
            max_batched_tokens=rule.max_batched_tokens,
            ttft_slo=ttft,
            tpot_slo=tpot,
        ),
    )
    _served(layout, served, layout.ep, ttft, tpot)
    how = EXPERT_FLAGS[engine].format(ep=layout.ep)
    layout.notes.append(
        f"serve with {how}; routing is taken as even and the experts' grouped matrix products "
        "as running at the datasheet rates, as for the other layouts"
    )
    return layout


def _targets(w: Workload) -> tuple[float | None, float | None]:
    """The user's TTFT and TPOT targets in seconds (None where not given)."""
    return (w.ttft_ms / 1e3 if w.ttft_ms else None, w.tpot_ms / 1e3 if w.tpot_ms else None)


def _served(
    layout: Layout, served: Served, engines: int, ttft: float | None, tpot: float | None
) -> None:
    """Record what `engines` engines of one copy, each as `served`, give over all copies,
    and whether they meet the targets at p90."""
    layout.fits = True
    layout.served = served
    layout.throughput = served.output_tokens_per_second * engines * layout.replicas
    if ttft is not None or tpot is not None:
        layout.meets = (ttft is None or served.ttft.p90 <= ttft) and (
            tpot is None or served.tpot.p90 <= tpot
        )


def front(layouts: list[Layout]) -> list[Layout]:
    """Layouts no other beats on both throughput per GPU and TPOT p50."""
    fitting = [x for x in layouts if x.fits and x.served is not None]
    out = []
    for x in fitting:
        assert x.served is not None
        beaten = any(
            y is not x
            and y.served is not None
            and y.per_gpu >= x.per_gpu
            and y.served.tpot.p50 <= x.served.tpot.p50
            and (y.per_gpu > x.per_gpu or y.served.tpot.p50 < x.served.tpot.p50)
            for y in fitting
        )
        if not beaten:
            out.append(x)
    return sorted(out, key=lambda x: -x.per_gpu)


def best(layouts: list[Layout]) -> Layout | None:
    """The highest-throughput layout meeting the targets (any, when none is given); among
    layouts within `TIE` of that throughput, the one faster per user, then the smaller
    engine (a simulated throughput is no finer than that)."""
    pool = [x for x in layouts if x.fits and x.served is not None and x.meets is not False]
    if not pool:
        return None
    top = max(x.throughput for x in pool)
    close = [x for x in pool if x.throughput >= top * (1 - TIE)]
    return min(close, key=lambda x: (x.served.tpot.p50, x.served.ttft.p90, x.tp * x.pp * x.ep))  # type: ignore[union-attr]
