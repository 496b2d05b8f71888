"""The fleet: the fewest GPUs of each catalog kind that carry a target load within the
targets, as replicas × GPUs per replica, ranked by what they cost an hour.

No torch import. The load is a number of closed-loop users or a request rate, split
evenly over the replicas behind a load balancer; the targets are the workload's p90
TTFT and TPOT. A replica carries its share where its capacity (`deployments.capacity`:
the most users whose p90s meet the targets in the simulated engine's steady state, and
the requests per second they complete) is at least that share; so the replicas are
ceil(load / one replica's capacity), and one fewer would leave a replica more than its
capacity. A request rate is carried as that steady closed loop completes it: bursty
(Poisson) arrivals at the same mean rate queue more, so where a row's headroom is small
the rate may miss the targets in an open-loop benchmark.

For each GPU kind and each replica size within one node (the search's degrees: 1, 2,
4, 8 GPUs), every configuration of one replica the search tries
(`search.configurations`: layout, weights, KV cache, speculation, prefix caching) is
first sized on the step model alone (no simulation): the users one replica holds
with its steady step (`step_time.steady_seconds`, prompt work mixed in) within the TPOT
target, and the requests per second they complete, hence the GPUs the load would need.
The simulated engine then finds the capacity of the candidates in that order, its
search started at the estimate; a further candidate only where its estimate, scaled by
the simulation's bias on the last one served (a few % on one kind), could beat the best
found so far (fewer GPUs, or as many with less quality risk), at most `SERVED_PER_KIND`
of them: the estimate orders, the simulation decides. The row's figures at the load are
one more simulation of one replica at its share.

Each kind stands on its datasheet (`calibration.assumed`, as the search's figures do),
and its row says so; where the job measured the chosen configuration on its own GPU
kind, the row puts the measured p90s beside the estimate's at the load they were
measured at. Replicas stay within one node: the catalog has no interconnect between
nodes, so a model whose weights do not fit one node of a kind is said not to fit it.
Cost: the user's own price per kind, else the catalog's with its source and date, ×
GPUs; $ per million output tokens at the load. Power: the datasheet's power per GPU
(`hardware_power`: its TDP or board power, the top of a configurable range) × GPUs, a
ceiling for the GPUs alone (no host, CPU or network), so the output tokens per joule at
the load are a floor; a kind whose datasheet gives none says so. Kinds are ranked by
$/hour, those without a price after them (by GPUs), those that cannot carry the load
last, with why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from profiling import serde
from profiling.config import Workload
from profiling.fleet_options import MAX_GPUS
from profiling.measure.hardware import GPU, catalog
from profiling.measure.hardware_power import power
from profiling.measure.hardware_prices import price, usd_per_million_tokens
from profiling.projection.configurations import Configuration
from profiling.projection.deployments import SPAN, Capacity, capacity
from profiling.projection.engines import limits
from profiling.projection.search import (
    FP8_WEIGHT_ONLY,
    RISK,
    Evaluated,
    Scenario,
    configurations,
    engine,
    pareto_front,
    precision_of,
    rates_on,
    screen,
    serve,
)
from profiling.projection.step_time import steady_seconds

SIZES = (1, 2, 4, 8)  # GPUs per replica: the search's degrees, up to one node
NODE_GPUS = 8
SERVED_PER_KIND = 3  # candidates of one kind whose capacity is simulated, at most
ESTIMATE_STEPS = 12  # step-model evaluations refining one replica's users, at most
SPREAD = 4  # the chart's simulations below the capacity: a quarter of its users, …
TIE = 0.005  # $/hour within this share of each other: a tie, said in words


@dataclass(frozen=True)
class Load:
    """What the fleet must carry: users (closed loop) or requests per second."""

    request_rate: float | None = None
    users: int | None = None

    def __post_init__(self) -> None:
        if (self.request_rate is None) == (self.users is None):
            raise ValueError("a load is a request rate or a number of users: give one")
        if (self.request_rate or self.users or 0) <= 0:
            raise ValueError("a load is above zero")

    @classmethod
    def of(cls, request_rate: float | None, users: int | None) -> Load | None:
        """The load a job's or the CLI's two options give (a rate first), or None."""
        if request_rate is not None:
            return cls(request_rate=request_rate)
        return cls(users=users) if users is not None else None

    @property
    def amount(self) -> float:
        return float(self.users if self.users is not None else self.request_rate)  # type: ignore[arg-type]

    @property
    def text(self) -> str:
        if self.request_rate is not None:
            return f"{self.request_rate:g} requests/s"
        return f"{self.users:,} users"

    def per_replica(self, cap: Capacity) -> float | None:
        """One replica's capacity in this load's unit (users, or requests/s)."""
        return cap.users if self.users is not None else cap.request_rate


@dataclass(frozen=True)
class FleetRequest:
    """What is sized: `scenario` gives the model, its dtype, the workload's request shape
    and targets, the speculation and prefix hits to assume (its GPU kind is the one its
    `measured` configurations ran on); the load; the kinds (catalog keys; none: every
    kind); the user's own USD per GPU-hour by kind; the most GPUs of one kind; the
    formats the replicas may use ("": any the search tries)."""

    scenario: Scenario
    load: Load
    kinds: tuple[str, ...] = ()
    prices: dict[str, float] = field(default_factory=dict, hash=False)
    max_gpus: int = MAX_GPUS
    weights: str = ""
    kv_cache: str = ""


@dataclass
class Point:
    """The replicas at the load, as the simulated engine serves one of them at its share."""

    users_per_replica: int
    meets: bool
    ttft_p90_seconds: float | None
    tpot_p50_seconds: float | None
    tpot_p90_seconds: float | None
    throughput_tokens_per_second: float  # output tokens/s of all the replicas
    request_rate: float  # requests/s all the replicas complete

    @property
    def per_user_tokens_per_second(self) -> float | None:
        return 1 / self.tpot_p50_seconds if self.tpot_p50_seconds else None


@dataclass
class FrontPoint:
    """One simulation the sizing of a kind made: one replica of `replica` at `users`, what
    it gives every user (1 / TPOT p50) and every GPU (output tokens/s over its GPUs)."""

    replica: str  # the configuration's name
    gpus_per_replica: int
    users: int  # on the replica
    per_user_tokens_per_second: float
    per_gpu_tokens_per_second: float
    meets: bool  # its p90s within the targets


@dataclass
class FleetRow:
    """One GPU kind: the fewest GPUs carrying the load (`replicas` 0: none does, `reason`)."""

    gpu: str
    gpu_label: str
    replicas: int = 0
    gpus_per_replica: int = 0
    replica: Configuration | None = None  # one replica's layout and formats
    risk: int = 0
    quality_risk: str = ""
    capacity_users: int = 0  # one replica's: the most users meeting the targets
    capacity_request_rate: float = 0.0  # what they complete, requests/s
    capacity_at_least: bool = False  # the capacity search stopped there still meeting
    at_load: Point | None = None
    usd_per_hour: float | None = None  # the whole fleet's
    price_source: str = "no price"
    usd_per_million_output_tokens: float | None = None
    watts: float | None = None  # the fleet's GPUs at their datasheet power (a ceiling)
    power_source: str = "no power figure"
    output_tokens_per_joule: float | None = None  # at the load, over `watts` (a floor)
    basis: str = "datasheet"
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    command: dict[str, Any] | None = None  # one replica's launch command (set by the caller)
    # The kind's front: of every simulation its capacity searches made, those no other
    # beats on both tokens/s per user and tokens/s per GPU, by tokens/s per user.
    front: list[FrontPoint] = field(default_factory=list)

    @property
    def carries(self) -> bool:
        return self.replicas > 0

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def layout(self) -> str:
        """ "3 × TP=2, fp8 weights" (or "")."""
        return f"{self.replicas} × {self.replica.name}" if self.replica else ""

    @property
    def per_gpu_at_load(self) -> float | None:
        """Output tokens/s per GPU of the whole fleet at the load."""
        if self.at_load is None or not self.gpus:
            return None
        return self.at_load.throughput_tokens_per_second / self.gpus

    def headroom(self, load: Load) -> float | None:
        """More load the same replicas carry, as a share of `load` (0.25: 25 % more)."""
        cap = self.capacity_users if load.users is not None else self.capacity_request_rate
        return self.replicas * cap / load.amount - 1 if self.carries else None

    def headroom_text(self, load: Load) -> str:
        share = self.headroom(load)
        if share is None:
            return ""
        return f"+{share:.0%}" + (" or more" if self.capacity_at_least else "")

    def json_extra(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "layout": self.layout, "carries": self.carries,
                "per_gpu_at_load": self.per_gpu_at_load}  # fmt: skip


@dataclass
class Fleet:
    """The kinds, ranked: carried and priced by $/hour, carried unpriced, not carried."""

    load: Load
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    max_gpus: int
    rows: list[FleetRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> FleetRow | None:
        return self.rows[0] if self.rows and self.rows[0].carries else None

    def to_dict(self) -> dict[str, Any]:
        out = serde.to_dict(self)
        for row, data in zip(self.rows, out["rows"], strict=True):
            data["headroom"] = row.headroom(self.load)
            data["headroom_text"] = row.headroom_text(self.load)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fleet:
        return serde.from_dict(cls, data)


@dataclass
class _Static:
    """One replica on the step model alone (`_one_replica`)."""

    users: int  # the most meeting the TPOT target in steady state
    request_rate: float  # what they complete
    engines: int  # serving side by side in the replica (pipeline groups, expert ranks)
    alone_seconds: float  # one prompt, nothing else running
    step: Callable[[int], float]  # rows of one engine -> its steady step

    def users_for(self, request_rate: float, output_tokens: int) -> int:
        """The fewest users completing `request_rate` (Little's law over the steady step),
        at most `users`."""
        low, high = 0, self.users  # `high` completes it (or is the most there is)
        while high - low > 1:
            middle = (low + high) // 2
            rows = math.ceil(middle / self.engines)
            e2e = self.alone_seconds + self.step(rows) * max(output_tokens - 1, 0)
            low, high = (middle, high) if middle / e2e < request_rate else (low, middle)
        return max(1, high)


@dataclass
class _Candidate:
    replica: Configuration
    replicas: int  # the step model's estimate of the replicas the load needs
    risk: int
    static: _Static

    @property
    def gpus(self) -> int:
        return self.replicas * self.replica.gpus


@dataclass
class _Sized:
    """What the step model says of one kind: its candidates, fewest estimated GPUs first,
    and, where there are none, why."""

    candidates: list[_Candidate] = field(default_factory=list)
    fits: bool = False  # some replica of up to a node holds the weights and one request
    # The serving formats the kind has no compute for (fp8 on an A100), where it has none
    # for every format searched: it runs none of them, whatever its memory.
    lacks: set[str] = field(default_factory=set)
    runs_one: bool = False  # it has compute for some format searched
    unloaded: tuple[float, float, float] | None = None  # (miss, prompt alone s, step s): best
    fewest_gpus: int | None = None  # the fewest GPUs estimated, where past the most searched


def fleet(req: FleetRequest) -> Fleet:
    """Every kind of `req.kinds` (or of the catalog) sized for the load, ranked by cost."""
    w = req.scenario.workload
    if not (w.ttft_ms or w.tpot_ms):
        raise ValueError("sizing a fleet needs a target: a TTFT or a TPOT")
    kinds = [catalog()[k] for k in req.kinds] if req.kinds else list(catalog().values())
    rows = _ranked([_kind(req, gpu) for gpu in kinds])
    out = Fleet(req.load, w.prompt_tokens, w.output_tokens, w.ttft_ms, w.tpot_ms, req.max_gpus,
                rows)  # fmt: skip
    out.notes += _notes(req, rows)
    return out


def _kind(req: FleetRequest, gpu: GPU) -> FleetRow:
    """The fewest GPUs of `gpu`'s kind carrying the load, with their cost."""
    row = FleetRow(gpu.key, gpu.label)
    sized = _candidates(req, gpu)
    best: tuple[_Candidate, int, Capacity] | None = None
    simulated: list[tuple[int, Evaluated]] = []  # every simulation of the capacity searches
    bias = 1.0  # the simulation's capacity over the step model's, as the last one served
    for cand in sized.candidates[:SERVED_PER_KIND]:
        if best is not None:
            # Its estimate, corrected by that bias (within a few % on one kind), cannot beat
            # what is found: fewer GPUs, or as many with less quality risk.
            guess = _estimate(req, cand.static, bias) * cand.replica.gpus
            if (guess, cand.risk) >= (best[1] * best[0].replica.gpus, best[0].risk):
                break
        # The capacity search starts at the step model's users.
        cap = replica_capacity(req, gpu, cand.replica, cand.static.users, simulated)
        replicas = replicas_needed(req.load, cap)
        if replicas is None or replicas * cand.replica.gpus > req.max_gpus:
            continue
        bias = (req.load.per_replica(cap) or 0.0) / _per_replica(req, cand.static)
        gpus = replicas * cand.replica.gpus
        if best is None or (gpus, cand.risk) < (best[1] * best[0].replica.gpus, best[0].risk):
            best = (cand, replicas, cap)
    if best is None:
        row.reason = _why_not(req, gpu, sized)
        return row
    _fill(req, gpu, row, *best)
    seen = {users for users, e in simulated if e.configuration == best[0].replica}
    simulated += _spread(req, gpu, best[0].replica, best[2], seen)
    row.front = front(simulated)
    return row


def _spread(
    req: FleetRequest, gpu: GPU, replica: Configuration, cap: Capacity, seen: set[int]
) -> list[tuple[int, Evaluated]]:
    """One replica of `replica` served at a quarter of its capacity's users, a sixteenth,
    … down to one user: its front from fast to full (the capacity search only simulates
    near the capacity), but for the users in `seen`, simulated already."""
    out, users = [], cap.users or 1
    while users > 1:
        users = max(1, users // SPREAD)
        if users in seen:
            continue
        sc = _scenario(req, gpu, replica.gpus, _users(req, users))
        out.append((users, serve(sc, replica)))
    return out


def front(simulated: list[tuple[int, Evaluated]]) -> list[FrontPoint]:
    """The simulations (users on one replica, what it gave) no other beats on both tokens/s
    per user and per GPU (one of equal figures kept), by tokens/s per user."""
    points: dict[tuple[float, float], FrontPoint] = {}
    for users, e in simulated:
        if e.served is None or not 0 < e.tpot_p50 < math.inf or e.throughput <= 0:
            continue
        c = e.configuration
        p = FrontPoint(c.name, c.gpus, users, 1 / e.tpot_p50, e.per_gpu, e.meets is True)
        points.setdefault((p.per_user_tokens_per_second, p.per_gpu_tokens_per_second), p)
    kept = list(points.values())
    return [kept[i] for i in pareto_front(list(points))]


def _per_replica(req: FleetRequest, static: _Static) -> float:
    """One replica's capacity on the step model, in the load's unit."""
    return static.users if req.load.users is not None else static.request_rate


def _estimate(req: FleetRequest, static: _Static, bias: float = 1.0) -> int:
    """The replicas the step model says the load needs, its capacity scaled by `bias`."""
    return max(1, math.ceil(req.load.amount / (_per_replica(req, static) * bias) - 1e-9))


def _users_at(req: FleetRequest, cand: _Candidate, replicas: int) -> int:
    """One replica's users at the load split over `replicas`: the load's own, or those
    completing its share of the rate on the step model."""
    if req.load.users is not None:
        return math.ceil(req.load.users / replicas)
    share = (req.load.request_rate or 0.0) / replicas
    return cand.static.users_for(share, req.scenario.workload.output_tokens)


def _scenario(req: FleetRequest, gpu: GPU, size: int, workload: Workload) -> Scenario:
    """The search's scenario for one replica of `size` GPUs of `gpu`'s kind at `workload`
    (no measured figures: they stand for the user's own load, not this one)."""
    return replace(req.scenario, gpu=gpu, gpu_count=size, workload=workload,
                   current=Configuration(gpu.key, tp=size), measured={})  # fmt: skip


def _users(req: FleetRequest, users: int) -> Workload:
    """The workload's requests and targets with `users` closed-loop users."""
    return replace(req.scenario.workload, concurrency=max(1, users), request_rate=None)


def _allowed(req: FleetRequest, c: Configuration) -> bool:
    return (not req.weights or c.weights == req.weights) and (
        not req.kv_cache or c.kv_cache == req.kv_cache
    )


def _candidates(req: FleetRequest, gpu: GPU) -> _Sized:
    """Every configuration of one replica of up to a node, with the replicas the step
    model alone says the load needs; fewest GPUs first, then the least quality risk."""
    out = _Sized()
    for size in SIZES:
        sc = _scenario(req, gpu, size, _users(req, 1))
        for c in configurations(sc, size):
            if c.replicas != 1 or not _allowed(req, c):
                continue
            precision = precision_of(sc, c)
            if rates_on(gpu, precision, sc.shapes.num_layers) is None:
                out.lacks.add(precision)
                continue
            out.runs_one = True
            one = _one_replica(sc, c)
            if one is None:
                continue
            out.fits = True
            if isinstance(one, tuple):  # even one request misses the targets
                if out.unloaded is None or one[0] < out.unloaded[0]:
                    out.unloaded = one
                continue
            risk = RISK.get(c.weights, 0) + (c.kv_cache == "fp8")
            cand = _Candidate(c, _estimate(req, one), risk, one)
            if cand.gpus > req.max_gpus:
                out.fewest_gpus = min(out.fewest_gpus or cand.gpus, cand.gpus)
                continue
            out.candidates.append(cand)
    out.candidates.sort(key=lambda c: (c.gpus, c.risk, c.replica.gpus))
    return out


def _one_replica(sc: Scenario, c: Configuration) -> _Static | tuple[float, float, float] | None:
    """One replica of `c` on the step model alone: the most users its KV cache and the
    engine's limit hold whose steady step meets the TPOT target, and what they complete
    (Little's law over one prompt alone plus the steps). Where even one request misses the
    targets, (the larger of one prompt alone over the TTFT target and one row's step over
    the TPOT target, the prompt's seconds, the step's); None where the weights and one
    request's KV cache do not fit."""
    w = sc.workload
    found = engine(sc, c, max(c.pp, c.ep))  # every engine of the replica busy
    if found is None:
        return None
    cached, lim = found.cached, limits(sc.gpu)
    budget = found.max_batched_tokens or lim.max_batched_tokens

    def step(rows: int) -> float:
        return steady_seconds(found.step, rows, w.prompt_tokens, w.output_tokens, cached,
                              budget)  # fmt: skip

    alone = found.step.seconds(0, 0, ((w.prompt_tokens - cached, cached),))  # type: ignore[attr-defined]
    one = step(1)
    unloaded = max(alone * 1e3 / w.ttft_ms if w.ttft_ms else 0.0,
                   one * 1e3 / w.tpot_ms if w.tpot_ms else 0.0)  # fmt: skip
    held = (found.kv_tokens - cached) // max(1, w.context_tokens - cached)
    most = min(found.max_seqs or lim.max_seqs, held)
    if unloaded > 1.0 or most < 1:
        return unloaded, alone, one
    rows, top = most, step(most)
    target = (w.tpot_ms or 0.0) / 1e3
    if w.tpot_ms and top > target:
        # Within ~3 % (an estimate that orders the candidates: the simulation decides):
        # regula falsi where the step is about linear in its rows, every other step
        # halving where it is not (a mixture's experts: steep at first, then flat).
        low, high, at_low, at_high = 1, most, one, top
        for turn in range(ESTIMATE_STEPS):
            if high - low <= max(1, high // 32):
                break
            guess = (low + round((target - at_low) * (high - low) / (at_high - at_low))
                     if turn % 2 == 0 else (low + high) // 2)  # fmt: skip
            guess = min(high - 1, max(low + 1, guess))
            seconds = step(guess)
            if seconds <= target:
                low, at_low = guess, seconds
            else:
                high, at_high = guess, seconds
        rows = low
    users = rows * found.engines
    rate = users / (alone + step(rows) * max(w.output_tokens - 1, 0))
    return _Static(users, rate, found.engines, alone, step)


def replica_capacity(
    req: FleetRequest,
    gpu: GPU,
    replica: Configuration,
    users_guess: int = 1,
    simulated: list[tuple[int, Evaluated]] | None = None,
) -> Capacity:
    """One replica of `replica` on `gpu`'s kind: the most closed-loop users whose p90s
    meet the targets, with the requests/s they complete (`deployments.capacity`, its
    search started at `users_guess`; started again higher where it stopped still
    meeting). Every simulation the searches make is added to `simulated`."""
    guess = max(1, users_guess)
    for _ in range(3):
        sc = _scenario(req, gpu, replica.gpus, _users(req, guess))
        seen: dict[int, Evaluated] = {}
        cap = capacity(sc, serve(sc, replica), seen)
        if simulated is not None:
            simulated += seen.items()
        if not cap.at_least or cap.users is None:
            break
        guess = cap.users * SPAN
    return cap


def replicas_needed(load: Load, cap: Capacity) -> int | None:
    """ceil(load / one replica's capacity); None where one replica meets the targets with
    no load at all."""
    per = load.per_replica(cap)
    return max(1, math.ceil(load.amount / per - 1e-9)) if per else None


def at_load(
    req: FleetRequest, gpu: GPU, replica: Configuration, replicas: int, users: int
) -> Point:
    """`replicas` copies of `replica` at the load split evenly, `users` on each: one copy
    served by the simulated engine."""
    sc = _scenario(req, gpu, replica.gpus, _users(req, users * replicas))
    return _point(users, serve(sc, replace(replica, replicas=replicas)))


def _point(users: int, e: Evaluated) -> Point:
    served = e.served
    rate = (served.requests_per_second * e.throughput / served.output_tokens_per_second
            if served and served.output_tokens_per_second else 0.0)  # fmt: skip
    return Point(
        users, e.meets is True, e.ttft_p90 if served else None, e.tpot_p50 if served else None,
        e.tpot_p90 if served else None, e.throughput, rate,
    )  # fmt: skip


def _fill(
    req: FleetRequest, gpu: GPU, row: FleetRow, cand: _Candidate, replicas: int, cap: Capacity
) -> None:
    """`row` for `replicas` copies of `cand`: its capacity, its figures at the load, its
    cost, its basis."""
    w, c = req.scenario.workload, cand.replica
    row.replicas, row.gpus_per_replica, row.replica = replicas, c.gpus, c
    quality = screen(_scenario(req, gpu, c.gpus, _users(req, 1)), c)
    row.risk, row.quality_risk = quality.risk, quality.quality_risk
    row.capacity_users, row.capacity_request_rate = cap.users or 0, cap.request_rate or 0.0
    row.capacity_at_least = cap.at_least
    row.at_load = at_load(req, gpu, c, replicas, _users_at(req, cand, replicas))
    row.notes += _technique_notes(req, c)
    # Output tokens/s at the load: the rate's, or what the users' replicas serve.
    rate = req.load.request_rate
    tokens = rate * w.output_tokens if rate else row.at_load.throughput_tokens_per_second
    hourly = price(gpu.key, req.prices.get(gpu.key))
    if hourly is not None:
        row.usd_per_hour = hourly.usd_per_hour * row.gpus
        row.price_source = hourly.text
        if tokens > 0:
            row.usd_per_million_output_tokens = usd_per_million_tokens(row.usd_per_hour, tokens)
    tdp = power(gpu.key)
    if tdp is not None:
        row.watts, row.power_source = tdp.watts * row.gpus, tdp.source
        row.output_tokens_per_joule = tokens / row.watts if tokens > 0 else None
    row.basis, note = _basis(req, gpu, c)
    row.notes += [note] if note else []


def _technique_notes(req: FleetRequest, c: Configuration) -> list[str]:
    """What a replica's speculation and prefix caching assume, as the search says it."""
    sc = req.scenario
    out = []
    if c.draft:
        out.append(f"acceptance {sc.acceptance:.2f} per drafted token ({sc.acceptance_basis})")
    if c.prefix_caching:
        basis = (f"hit rate {sc.prefix_basis}" if sc.prefix_hit_rate is not None
                 else "its shared prefix, assumed always cached")  # fmt: skip
        out.append(f"prompts partly from the prefix cache ({basis})")
    return out


def _basis(req: FleetRequest, gpu: GPU, replica: Configuration) -> tuple[str, str]:
    """("datasheet" or "datasheet, checked by measurement", the measured figures beside
    the estimate's at the load the job measured them)."""
    sc = req.scenario
    measured = sc.measured.get(replica) if gpu.key == sc.gpu.key else None
    if measured is None:
        return "datasheet", ""
    estimate = serve(replace(sc, measured={}, gpu_count=replica.gpus), replica)
    return "datasheet, checked by measurement", (
        f"measured on this kind at your workload ({measured.source or 'measured'}): TPOT p90 "
        f"{measured.tpot_p90_seconds * 1e3:.3g} ms, TTFT p90 "
        f"{measured.ttft_p90_seconds * 1e3:.3g} ms; the estimate there: "
        f"{estimate.tpot_p90 * 1e3:.3g} ms and {estimate.ttft_p90 * 1e3:.3g} ms"
    )


def _why_not(req: FleetRequest, gpu: GPU, sized: _Sized) -> str:
    formats = " and ".join(
        f for f in (f"{req.weights} weights" if req.weights else "",
                    f"a {req.kv_cache} KV cache" if req.kv_cache else "") if f
    ) or "any format searched"  # fmt: skip
    if not sized.runs_one and sized.lacks:
        lacks = " or ".join(sorted(sized.lacks))
        vllm = f"; {FP8_WEIGHT_ONLY}" if "fp8" in lacks else ""
        asked = f", the {formats} asked for" if req.weights or req.kv_cache else ""
        return f"{gpu.key} has no compute for {lacks}{asked}: it serves in none of them{vllm}"
    if not sized.fits:
        return (f"its weights and one request's KV cache fit no replica of up to {NODE_GPUS}× "
                f"{gpu.key} in {formats}; replicas across nodes are not searched (the catalog "
                "has no interconnect between nodes)")  # fmt: skip
    if not sized.candidates and sized.fewest_gpus is None and sized.unloaded is not None:
        _, alone, step = sized.unloaded
        w = req.scenario.workload
        said = [f"one prompt alone takes {alone * 1e3:.3g} ms (TTFT target {w.ttft_ms:g} ms)"
                if w.ttft_ms else "",
                f"one request's step {step * 1e3:.3g} ms (TPOT target {w.tpot_ms:g} ms)"
                if w.tpot_ms else ""]  # fmt: skip
        return (f"no replica of up to {NODE_GPUS}× {gpu.key} meets the targets even unloaded: "
                f"at best {', '.join(s for s in said if s)}")  # fmt: skip
    estimate = (f" (the step model alone puts it at {sized.fewest_gpus} or more)"
                if sized.fewest_gpus and not sized.candidates else "")  # fmt: skip
    return (f"cannot carry {req.load.text} at any count up to {req.max_gpus}× {gpu.key} "
            f"within the targets{estimate}")  # fmt: skip


def _ranked(rows: list[FleetRow]) -> list[FleetRow]:
    """Priced kinds that carry the load by $/hour, then unpriced ones by GPUs, then the rest
    (catalog order); equal $/hour said in words on both rows."""

    def key(row: FleetRow) -> tuple:
        if not row.carries:
            return (2, 0.0, 0, 0)
        if row.usd_per_hour is None:
            return (1, 0.0, row.gpus, row.risk)
        return (0, row.usd_per_hour, row.gpus, row.risk)

    out = sorted(rows, key=key)
    priced = [r for r in out if r.carries and r.usd_per_hour is not None]
    for a, b in zip(priced, priced[1:], strict=False):
        assert a.usd_per_hour is not None and b.usd_per_hour is not None
        if b.usd_per_hour - a.usd_per_hour <= TIE * a.usd_per_hour:
            a.notes.append(f"ties with {b.gpu} at ${b.usd_per_hour:,.2f}/hour")
            b.notes.append(f"ties with {a.gpu} at ${a.usd_per_hour:,.2f}/hour")
    return out


def _notes(req: FleetRequest, rows: list[FleetRow]) -> list[str]:
    w = req.scenario.workload
    out = [
        f"{len(rows)} GPU kinds sized for {req.load.text} of {w.prompt_tokens:,} prompt + "
        f"{w.output_tokens:,} output tokens; replicas of 1 to {NODE_GPUS} GPUs within one node "
        "(the catalog has no interconnect between nodes: replicas across nodes are not "
        "searched), the load split evenly over them behind a load balancer",
        "each kind from its datasheet (assumed efficiencies), served by the simulated engine: "
        "the replicas are the load over one replica's capacity (the most users meeting the "
        "p90 targets in steady state, and the requests/s they complete), rounded up; one "
        "fewer would leave each more than its capacity",
        "power: each GPU at its datasheet power (TDP or board power, the top of a "
        "configurable range) × the GPUs, a ceiling for the GPUs alone (no host, CPU or "
        "network): the output tokens per joule at the load are a floor",
    ]
    unpowered = [r.gpu for r in rows if r.carries and r.watts is None]
    if unpowered:
        out.append(f"no datasheet power for {', '.join(unpowered)}: no watts or tokens per "
                   "joule there")  # fmt: skip
    unpriced = [r.gpu for r in rows if r.carries and r.usd_per_hour is None]
    if unpriced:
        out.append(f"no price for {', '.join(unpriced)}: ranked after the priced kinds, by "
                   "GPUs; give your own price per kind")  # fmt: skip
    if req.load.request_rate is not None:
        out.append("a request rate is carried as the steady closed loop completes it; bursty "
                   "(Poisson) arrivals at the same mean rate queue more: where the headroom is "
                   "small, check the replicas with an open-loop benchmark")  # fmt: skip
    if not any(r.carries for r in rows):
        out.append(f"no kind searched carries {req.load.text} within the targets with up to "
                   f"{req.max_gpus} GPUs")  # fmt: skip
    return out
