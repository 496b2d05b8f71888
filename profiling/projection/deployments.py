"""The deployments the search ranks, with their capacity under the targets and their cost.

No torch import. Capacity: the largest number of closed-loop users whose p90 TTFT and
TPOT still meet the targets, found by doubling then bisecting over the simulated
engine (more users never make a request faster, so "meets" falls once as the users
grow), with the request rate and the goodput (output tokens/s of the requests that
meet both targets) there; never past the users the engines run at once (the rest would
only queue), nor past `SPAN` times the user's load (then "at least"). Cost: the GPUs'
hourly price (the catalog's price table, or the one given for the job) over the output
tokens they serve, at the user's load and at capacity, and the GPU-hours a day the
deployment holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from profiling.config import Workload
from profiling.measure.hardware_prices import Price, price, usd_per_million_tokens
from profiling.projection.engines import limits
from profiling.projection.search import Evaluated, Scenario, engine, search, serve
from profiling.projection.step_time import steady_seconds

MAX_USERS = 4096  # the concurrency option's ceiling
# Where an answer is wanted at once (the report's what-if), only the first configuration of
# the user's GPUs and the more-hardware line get a capacity; a job gives every one.
FIRST_ONLY = 1
SPAN = 16  # capacity is searched up to this many times the user's load
GUIDED_STEPS = 3  # model-guided guesses before interpolation and halving take over


@dataclass
class Capacity:
    users: int | None = None
    request_rate: float | None = None  # requests/s completed there
    goodput_tokens_per_second: float | None = None
    at_least: bool = False  # still meeting at the top of the search: capacity is larger


def capacity(sc: Scenario, e: Evaluated, seen: dict[int, Evaluated] | None = None) -> Capacity:
    """The most users `e`'s configuration serves within the targets (None without targets,
    or where even one user misses them). `seen`, where given, keeps every simulation the
    search made, by its users (the fleet's chart reads them)."""
    w = sc.workload
    if not (w.ttft_ms or w.tpot_ms):
        return Capacity()
    return _CapacitySearch(sc, e, {} if seen is None else seen).capacity()


class _CapacitySearch:
    """The search for one configuration's capacity: the simulations it has made (`seen`,
    by users) and the bracket it narrows."""

    def __init__(self, sc: Scenario, e: Evaluated, seen: dict[int, Evaluated]) -> None:
        self.sc, self.e, self.seen, self.w = sc, e, seen, sc.workload
        w = self.w
        if e.basis == "estimated" and e.served is not None and not w.request_rate:
            seen[max(1, w.concurrency)] = e  # the search's own simulation at the user's load

    def at(self, users: int) -> Evaluated:
        seen = self.seen
        if users not in seen:
            seen[users] = serve(self.sc, self.e.configuration, users)
        return seen[users]

    def meets(self, users: int) -> bool:
        return self.at(users).meets is True

    def capacity(self) -> Capacity:
        e, w = self.e, self.w
        start, limit = max(1, w.concurrency), bound(self.sc, e) + 1
        if e.served is not None and e.served.output_tokens_per_second:
            # Users past what the engines run at once only wait in their queues, their TTFT
            # growing without end: that is no serving capacity.
            engines = e.throughput / e.served.output_tokens_per_second
            limit = min(limit, round(e.served.max_running * engines) + 1)
        top = min(limit, SPAN * start + 1)
        if self.meets(start):
            low = start
        elif self.meets(1):
            low, top = 1, start
        else:
            return Capacity()
        low = self._narrow(low, top)  # the search looks no further than `top`: "at least"
        return self._at_capacity(low, at_least=low == top - 1 and top < limit)

    def _narrow(self, low: int, high: int) -> int:
        """The last users meeting the targets, between `low` (meeting) and `high` (not, or
        the search's end)."""
        seen, w, meets = self.seen, self.w, self.meets
        static = _static_miss(self.sc, self.e)
        guided, interpolate = 0, True
        while high - low > 1:
            # The step model's own TPOT, scaled to the simulation's nearest point, says where
            # the targets are crossed (cheap); its guess and a neighbour often close the
            # bracket. Otherwise interpolated and halving steps alternate: interpolation
            # alone can creep from one side (regula falsi), halving bounds the steps.
            if static is not None and guided < GUIDED_STEPS:
                (guess, near), guided = _model_guess(low, high, seen, w, static), guided + 1
            else:
                near = interpolate and high in seen
                guess = _guess(low, high, seen, w) if near else (low + high) // 2
                interpolate = not interpolate
            if meets(guess):
                low = guess
                if near and guess + 1 < high:
                    low, high = (guess + 1, high) if meets(guess + 1) else (low, guess + 1)
            else:
                high = guess
                if near and guess - 1 > low:
                    low, high = (guess - 1, high) if meets(guess - 1) else (low, guess - 1)
        return low

    def _at_capacity(self, low: int, at_least: bool) -> Capacity:
        best = self.at(low)
        served = best.served
        assert served is not None
        # The engines serving side by side (copies, stages in flight, expert ranks).
        engines = best.throughput / served.output_tokens_per_second
        good = served.goodput_requests_per_second
        return Capacity(
            users=low,
            request_rate=served.requests_per_second * engines,
            goodput_tokens_per_second=(good * engines * self.w.output_tokens if good is not None
                                       else best.throughput),
            at_least=at_least,
        )  # fmt: skip


def _static_miss(sc: Scenario, e: Evaluated) -> Callable[[int], float] | None:
    """Users -> the step model's steady step at that many users (`steady_seconds`, as the
    simulated engine estimates its own steady state) over the TPOT target; inf where their
    KV caches do not fit, None without a TPOT target."""
    w = sc.workload
    if not w.tpot_ms:
        return None

    def miss(users: int) -> float:
        found = engine(sc, e.configuration, users)
        if found is None:
            return math.inf
        budget = limits(sc.gpu, sc.engine).max_batched_tokens
        step = steady_seconds(
            found.step, found.users, w.prompt_tokens, w.output_tokens, found.cached, budget
        )
        return step * 1e3 / w.tpot_ms

    return miss


def _model_guess(
    low: int, high: int, seen: dict[int, Evaluated], w: Any, static: Callable[[int], float]
) -> tuple[int, bool]:
    """Where the targets are crossed, strictly inside the bracket, and whether the guess is
    likely near (then its neighbour is worth a simulation too). From one simulated point:
    the step model's static miss scaled by the simulation's own at that point (a second
    point, not near). From two or more: the simulated miss is close to linear in the
    users, so the line through the two points nearest the targets."""
    points = sorted((u for u, e in seen.items() if e.served is not None),
                    key=lambda u: abs(math.log(max(seen[u].miss(w), 1e-9))))  # fmt: skip
    if len(points) >= 2:
        (u, m), (v, n) = [(p, seen[p].miss(w)) for p in points[:2]]
        if n != m and math.isfinite(m) and math.isfinite(n):
            guess = round(u + (1.0 - m) * (v - u) / (n - m))
            return min(high - 1, max(low + 1, guess)), True
    if not points:
        return (low + high) // 2, False
    scale = seen[points[0]].miss(w) / max(static(points[0]), 1e-12)
    a, b = low, high
    while b - a > 1:
        middle = (a + b) // 2
        a, b = (middle, b) if scale * static(middle) <= 1.0 else (a, middle)
    return min(high - 1, max(low + 1, a)), False


def _guess(low: int, high: int, seen: dict[int, Evaluated], w: Any) -> int:
    """Where the miss ratio crosses 1 between the bracket's ends, taken as linear in the
    users (the ends' neighbours are simulated too, so a near guess ends the search), kept
    strictly inside the bracket."""
    a, b = seen[low].miss(w), seen[high].miss(w)
    if not b < float("inf") or b <= a:
        return (low + high) // 2
    guess = low + round((1.0 - a) / (b - a) * (high - low))
    return min(high - 1, max(low + 1, guess))


def bound(sc: Scenario, e: Evaluated) -> int:
    """The most users the step model alone lets meet the targets (no mixed steps, no
    queue): the simulated engine's capacity is no larger, and it bounds the search."""
    w = sc.workload

    def fits_static(users: int) -> bool:
        found = engine(sc, e.configuration, users)
        if found is None:
            return False
        context = found.users * (w.prompt_tokens + w.output_tokens / 2)
        step = found.step.seconds(found.users, context)  # type: ignore[attr-defined]
        return not w.tpot_ms or step * 1e3 <= w.tpot_ms

    low, high = 0, 1
    while high <= MAX_USERS and fits_static(high):
        low, high = high, high * 2
    high = min(high, MAX_USERS + 1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits_static(middle) else (low, middle)
    return low


def cost(
    e: Evaluated, cap: Capacity, hourly: Price | None, w: Workload | None = None
) -> dict[str, float | None]:
    """$ per million output tokens at the user's load and at capacity; the GPU-hours a day
    the deployment holds, and those its traffic needs where it runs at capacity (their
    request rate's output tokens, else what their users are served, over the goodput
    there: below the held hours, the headroom; above them, more copies)."""
    gpus = e.configuration.gpus
    out: dict[str, float | None] = {
        "usd_per_million_output_tokens": None,
        "usd_per_million_at_capacity": None,
        "gpu_hours_per_day": 24.0 * gpus,
        "gpu_hours_per_day_at_capacity": None,
    }
    traffic = w.request_rate * w.output_tokens if w and w.request_rate else e.throughput
    if cap.goodput_tokens_per_second and traffic > 0:
        out["gpu_hours_per_day_at_capacity"] = 24.0 * gpus * traffic / cap.goodput_tokens_per_second
    if hourly is None:
        return out
    fleet_hourly = hourly.usd_per_hour * gpus
    if e.throughput > 0:
        out["usd_per_million_output_tokens"] = usd_per_million_tokens(fleet_hourly, e.throughput)
    if cap.goodput_tokens_per_second:
        out["usd_per_million_at_capacity"] = usd_per_million_tokens(
            fleet_hourly, cap.goodput_tokens_per_second
        )
    return out


@dataclass
class Deployments:
    """The search's answer: the ranked configurations, the pick on the user's GPUs, the
    "with more hardware" line where theirs cannot meet the targets."""

    scenario: Scenario
    ranked: list[Evaluated]
    pick: int | None
    more_hardware: int | None
    price: Price | None
    capacities: list[Capacity] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    commands: list[dict[str, Any] | None] = field(default_factory=list)

    @property
    def first(self) -> Evaluated | None:
        return self.ranked[self.pick] if self.pick is not None else None

    def headroom(self, index: int) -> str:
        """ "meets your targets up to 37 users; you asked for 16" (or "")."""
        users, asked = self.capacities[index].users, self.scenario.workload.concurrency
        if users is None:
            return ""
        if self.capacities[index].at_least:
            return f"meets your targets at {users} users ({SPAN}× your load) and likely beyond"
        if self.scenario.workload.request_rate:
            return f"meets your targets up to {users} users at once"
        return f"meets your targets up to {users} users; you asked for {asked}"

    def to_dict(self) -> dict[str, Any]:
        sc, w = self.scenario, self.scenario.workload
        return {
            "gpu": sc.gpu.key,
            "gpu_count": sc.gpu_count,
            "engine": sc.engine,
            "concurrency": w.concurrency,
            "request_rate": w.request_rate,
            "output_tokens": w.output_tokens,
            "targets": {"ttft_ms": w.ttft_ms, "tpot_ms": w.tpot_ms},
            "gpu_hourly_usd": self.price.usd_per_hour if self.price else None,
            "price_source": self.price.text if self.price else "no price",
            "pick": self.pick,
            "more_hardware": self.more_hardware,
            "notes": list(self.notes),
            "configurations": [self._row(i, e) for i, e in enumerate(self.ranked)],
        }

    def _row(self, index: int, e: Evaluated) -> dict[str, Any]:
        c, served = e.configuration, e.served
        cap = self.capacities[index]
        command = self.commands[index] if index < len(self.commands) else None
        return {
            "configuration": asdict(c),
            "name": c.name,
            "gpus": c.gpus,
            "on_your_gpus": e.on_your_gpus,
            "fits": e.fits,
            "meets": e.meets,
            "basis": e.basis,
            "changes": e.changes,
            "quality_risk": e.quality_risk,
            "throughput_tokens_per_second": e.throughput,
            "per_gpu_tokens_per_second": e.per_gpu,
            "per_user_tokens_per_second": 1 / e.tpot_p50 if e.tpot_p50 else None,
            "ttft_p90_seconds": e.ttft_p90 if served else None,
            "tpot_p90_seconds": e.tpot_p90 if served else None,
            "capacity": asdict(cap),
            "headroom": self.headroom(index),  # "meets your targets up to 37 users; ..."
            "cost": cost(e, cap, self.price, self.scenario.workload),
            "command": command,
            "notes": list(e.notes),  # what was measured, the acceptance speculation assumes
        }


def deployments(
    sc: Scenario, gpu_hourly_usd: float | None = None, capacity_for: int | None = None
) -> Deployments:
    """Search, rank, and give every configuration its capacity and cost (`capacity_for`:
    only the first that many of the user's GPUs, and the more-hardware line)."""
    ranked, more, notes = search(sc)
    on_yours = [i for i, e in enumerate(ranked) if e.on_your_gpus]
    pick = on_yours[0] if on_yours and (ranked[on_yours[0]].meets is not False) else None
    if pick is None and on_yours and more is None:
        pick = on_yours[0]  # nothing meets anywhere searched: the nearest on their GPUs
    wanted = set(range(len(ranked)))
    if capacity_for is not None:
        wanted = set(on_yours[:capacity_for]) | ({more} if more is not None else set())
    capacities = [capacity(sc, e) if i in wanted else Capacity() for i, e in enumerate(ranked)]
    hourly = price(sc.gpu.key, gpu_hourly_usd)
    if hourly is None:
        notes.append(f"no price for {sc.gpu.key} in the catalog: give --gpu-hourly-usd")
    return Deployments(sc, ranked, pick, more, hourly, capacities, notes)
