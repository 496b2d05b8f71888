"""Serving, simulated: continuous batching with chunked prefill over a step-time model.

No torch import: the estimate, the what-if and the advice all serve the user's
workload through here, from a calibration (datasheet or measured).

A serving engine runs in steps. Each step is one forward over every running
request's next token (decode rows) plus chunks of waiting prompts (prefill),
up to a token budget per step; a request's first token comes out of the step
that finishes its prompt, and each later token out of one decode step. So a
request's TTFT includes the wait for a step with room and the decode rows it
shares that step with, and its TPOT includes the prefill chunks mixed into
its decode steps: the two effects a static "prefill, then decode at batch =
concurrency" sum leaves out.

The step time comes from `profiling.projection.step_time` (the calibration's roofline of
the whole step's work, tensor parallelism's all-reduces included). Users are a
closed loop (`concurrency` users, each sending their next request when the last
one ends, as a benchmark's max-concurrency does, spread over one request's time
as in steady state) or an open one (Poisson arrivals at `rate` per second,
seeded).
(`profiling.parallel.split_serving` serves the same users split into prefill and
decode workers.)
Admission follows vLLM's scheduler: first come, first served; decode rows
before prefill chunks; a request enters only when the KV of its whole context
fits what the weights leave (no preemption: a conservative reading).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import attrgetter, itemgetter, le, mul, sub, truediv
from typing import Any

from profiling import serde
from profiling.projection.engines import limits
from profiling.projection.step_time import StepModel, steady_seconds

# The prefill chunk whose activations the fit check holds back (vLLM's server on an
# 80 GB GPU steps 8,192 tokens); the scheduler's own limits depend on the GPU and
# the engine (`profiling.projection.engines`).
MAX_BATCHED_TOKENS = 8192
MAX_SEQS = 256
# Requests per closed-loop user simulated: enough for a p99 over many requests
# without the start-up wave (every user at t = 0) dominating it.
ROUNDS = 4
MIN_REQUESTS = 64
# Steps between events are advanced in blocks of at most this many.
BLOCK_STEPS = 256
# The simulation's own cost stays bounded: fewer requests where each is long to
# simulate (a million-token prompt takes 128 steps of 8,192 tokens), and a hard stop.
WORK_BUDGET = 20_000
MAX_ITERATIONS = 200_000


@dataclass
class Percentiles:
    p50: float
    p90: float
    p99: float


def percentiles(values: list[float], weights: list[float] | None = None) -> Percentiles:
    """p50/p90/p99 of (weighted) samples: the smallest value with at least that share below
    it and at it (no interpolation: every figure is one a request saw)."""
    if not values:
        return Percentiles(0.0, 0.0, 0.0)
    if weights:
        pairs = sorted(zip(values, weights, strict=True))
        ordered = list(map(itemgetter(0), pairs))
        # The weight at or below each sample, summed in order (weights are never negative).
        below = list(accumulate(map(itemgetter(1), pairs), initial=0.0))
        total = sum(weights)
    else:
        ordered = sorted(values)
        below = range(len(values) + 1)  # unit weights: i samples hold a share i / n
        total = float(len(values))
    n = len(ordered)
    return Percentiles(
        *(ordered[min(n, bisect_left(below, q * total - 1e-9, 1)) - 1] for q in (0.50, 0.90, 0.99))
    )


@dataclass
class Served:
    """The workload served by the simulated engine: what a serving benchmark would print."""

    mode: str  # "closed" (concurrency users) or "open" (arrival rate)
    concurrency: int  # users (closed) or 0 (open)
    arrival_rate: float  # requests per second offered (open) or 0 (closed)
    requests: int
    ttft: Percentiles  # seconds, over requests
    tpot: Percentiles  # seconds, (e2e − TTFT) / (output − 1) over requests
    itl: Percentiles  # seconds, over every gap between two tokens of a request
    e2e: Percentiles  # seconds, over requests
    queue_seconds_mean: float  # arrival to first step that schedules the request
    queue_share: float  # of the mean end-to-end time
    prefill_share: float  # mean TTFT after the queue, of the mean end-to-end time
    decode_share: float  # the rest
    output_tokens_per_second: float
    requests_per_second: float
    goodput_requests_per_second: float | None  # meeting both SLOs (None: no SLO given)
    slo_attainment: float | None
    mean_batch: float  # decode rows per step, over time
    mixed_step_share: float  # of steps carrying a prefill chunk
    max_running: int  # admission limit the KV cache and max_seqs set
    steps: int
    max_batched_tokens: int = MAX_BATCHED_TOKENS
    notes: list[str] = field(default_factory=list)
    ttft_mean: float = 0.0  # means beside the percentiles (seconds), as clients print them
    tpot_mean: float = 0.0
    itl_mean: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


@dataclass(slots=True)
class _Request:
    """One request of the run: each has the run's `prompt_tokens` and `output_tokens`."""

    arrival: float
    prefilled: int = 0
    started: float | None = None  # first step scheduling it
    first_token: float | None = None


@dataclass(frozen=True)
class Requests:
    """What a run of the simulated engine serves, and the engine's settings for it.

    `prompt_tokens` + `output_tokens` each, to `concurrency` closed-loop users (or at
    `rate` requests/s, open loop, seeded by `seed`); `requests` of them, or as many as
    the percentiles need. `kv_tokens`: the KV cache's room (None: not limited).
    `cached_tokens`: a prefix every prompt shares, already in the prefix cache: each
    request prefills only the rest (attending to the prefix), and the prefix's KV is held
    once for all of them (`cached_shared`; a conversation's own history, reused by its
    next turn, is held by each request). The scheduler's limits (`max_seqs`,
    `max_batched_tokens`) default to vLLM's on the step's GPU
    (`profiling.projection.engines`). `ttft_slo`, `tpot_slo`: targets in seconds.
    `lined_up`: the closed-loop users all send their first request at t = 0 and the
    throughput is the whole run's (tokens over its duration), as a benchmark client with a
    concurrency limit runs and prints it (`vllm bench serve --max-concurrency`): its
    start-up wave is in every figure. Without it the users are in steady state, as a
    deployment's are."""

    prompt_tokens: int
    output_tokens: int
    concurrency: int = 0
    rate: float = 0.0
    requests: int | None = None
    kv_tokens: int | None = None
    max_batched_tokens: int | None = None
    max_seqs: int | None = None
    ttft_slo: float | None = None
    tpot_slo: float | None = None
    seed: int = 0
    cached_tokens: int = 0
    cached_shared: bool = True
    lined_up: bool = False


def simulate(step: StepModel, requests: Requests) -> Served:
    """Serve `requests` on the simulated engine and measure them as a benchmark client
    would (`Requests` says what is served and how)."""
    return SimulatedEngine(step, requests).run()


class SimulatedEngine:
    """One run of the simulated engine: its settings, its queues, its clock and what it
    has measured so far. `run` steps it until every request is done."""

    def __init__(self, step: StepModel, r: Requests) -> None:
        engine = limits(getattr(step, "gpu", None))
        self.step, self.r = step, r
        self.max_seqs = r.max_seqs or engine.max_seqs
        max_batched_tokens = r.max_batched_tokens or engine.max_batched_tokens
        if r.concurrency <= 0 and r.rate <= 0:
            raise ValueError("give a concurrency or an arrival rate")
        self.closed = r.concurrency > 0
        self.context = r.prompt_tokens + r.output_tokens
        # The last prompt token is always computed: it gives the first output token.
        self.cached = max(0, min(r.cached_tokens, r.prompt_tokens - 1))
        self.limit = self._limit()
        # Every user served several times, but the engine's share of the work is what
        # costs time: users beyond what it runs at once only wait.
        concurrency = r.concurrency
        rounds = min(ROUNDS * concurrency, ROUNDS * min(concurrency, self.limit) + concurrency)
        self.wanted = r.requests or max(MIN_REQUESTS, rounds if self.closed else 0)
        self.budget = max(max_batched_tokens, 1)
        prefill_steps = math.ceil(r.prompt_tokens / self.budget)
        cost = prefill_steps + math.ceil(r.output_tokens / BLOCK_STEPS) + 2
        self.total = self.wanted if r.requests else min(self.wanted, max(8, WORK_BUDGET // cost))
        # Due, sorted latest first (pop() takes the earliest).
        self.arrivals = self._arrivals(max_batched_tokens)
        self.issued = r.concurrency if self.closed else self.total
        self.waiting: list[_Request] = []
        self.now = 0.0
        self.prefilling: list[_Request] = []
        # Decode rows: (step index at which the row ends, request), in the order they
        # end: every request has the same output. Every row gains a token per step, so
        # `rows_context` grows by the row count each step.
        self.finishing: deque[tuple[int, _Request]] = deque()
        self.step_index = 0
        self.rows_context = 0.0
        self.done: list[tuple[_Request, float]] = []
        self.gaps: list[float] = []
        self.gap_weights: list[float] = []
        self.busy_rows = 0.0
        self.tokens_out = 0  # every token emitted, finished requests' or not
        self.steady: list[float] = []  # (time, tokens) when the last request was sent
        self.ramped: list[float] = [0.0, 0]  # (time, tokens) when every user had sent one
        self.busy_time = 0.0
        self.mixed_steps = 0
        self.price = _priced(step)

    def _limit(self) -> int:
        """The requests run at once: the engine's sequence limit, or fewer where the KV
        cache holds fewer."""
        r, limit = self.r, self.max_seqs
        if r.kv_tokens is not None:
            held = self.cached if r.cached_shared else 0
            limit = min(limit, (r.kv_tokens - held) // (self.context - held))
        if limit < 1:
            raise ValueError("one request's KV cache does not fit the memory left by the weights")
        return limit

    def _arrivals(self, max_batched_tokens: int) -> list[_Request]:
        """The first requests, latest first: the closed-loop users' first ones (lined up at
        t = 0, or spread as in steady state), or every open-loop arrival."""
        r, cached = self.r, self.cached
        rng = random.Random(r.seed)
        arrivals: list[_Request] = []
        if self.closed and r.lined_up:
            arrivals.extend(_Request(0.0, cached) for _ in range(r.concurrency))
        elif self.closed:
            # Users in steady state are spread over one request's duration, not lined up
            # at t = 0 (with equal lengths a lined-up start would stay in lock-step for
            # ever). A steady step carries the rows' share of prompt work too: one prompt
            # for every `output_tokens` tokens emitted.
            step, concurrency = self.step, r.concurrency
            fresh = r.prompt_tokens - cached
            alone = step.seconds(0, 0, ((fresh, cached),))
            rows = min(concurrency, self.limit)
            decode = steady_seconds(step, rows, r.prompt_tokens, r.output_tokens, cached,
                                    max_batched_tokens)  # fmt: skip
            spread = alone + decode * max(r.output_tokens - 1, 0)
            for user in range(concurrency):
                arrivals.append(_Request(user * spread / concurrency, cached))
        else:
            t = 0.0
            for _ in range(self.total):
                t += rng.expovariate(r.rate)
                arrivals.append(_Request(t, cached))
        arrivals.reverse()
        return arrivals

    def run(self) -> Served:
        """Step until every request is done (or the iterations run out), then measure."""
        iterations = 0
        while len(self.done) < self.total and iterations < MAX_ITERATIONS:
            if self._turn():
                iterations += 1
        if not self.done:
            raise ValueError("the workload is too long to simulate request by request")
        if self.r.lined_up:  # the benchmark's figure: every token over the whole run
            self.ramped, self.steady = [0.0, 0], [self.now, self.tokens_out]
        served = self._measure()
        self._note(served)
        return served

    def _turn(self) -> bool:
        """One pass: arrivals, admission, then a block of steps up to the next event;
        False where the engine only waited for the next arrival."""
        arrivals, finishing = self.arrivals, self.finishing
        if arrivals and arrivals[-1].arrival <= self.now:
            self._arrive()
        if self.waiting:
            self._admit()
        rows = len(finishing)
        # Advance a block of k steps up to the next event (a row ending, a prompt done,
        # an arrival), at the block's mid-point cost: exact while a step's time is linear
        # in the context, which holds between events.
        k = min(finishing[0][0] - self.step_index, BLOCK_STEPS) if finishing else BLOCK_STEPS
        chunks: list[tuple[int, int]] = []  # (tokens, offset) of each prompt chunk
        scheduled: list[tuple[_Request, int]] = []
        if self.prefilling:
            k = self._schedule(rows, k, chunks, scheduled)
        elif not rows:
            self.now = arrivals[-1].arrival  # idle until the next arrival
            return False
        seconds, k = self._block(rows, max(1, k), chunks)
        self._advance(rows, k, seconds)
        # Requests whose prompt is done emit their first token and join the decode rows.
        if chunks:
            self._prefilled(k, scheduled)
        while finishing and finishing[0][0] <= self.step_index:
            request = finishing.popleft()[1]
            self.rows_context -= self.context
            self._complete(request)
        return True

    def _arrive(self) -> None:
        """Requests due by now join the queue."""
        arrivals = self.arrivals
        while arrivals and arrivals[-1].arrival <= self.now:
            self.waiting.append(arrivals.pop())
            if self.closed and not arrivals:  # every user has sent a first request
                self.ramped[:] = [self.now, self.tokens_out]

    def _admit(self) -> None:
        """Admit first come, first served while the KV cache and max_seqs allow."""
        waiting = self.waiting
        if (room := self.limit - len(self.prefilling) - len(self.finishing)) > 0:
            self.prefilling += waiting[:room]
            del waiting[:room]

    def _schedule(
        self,
        rows: int,
        k: int,
        chunks: list[tuple[int, int]],
        scheduled: list[tuple[_Request, int]],
    ) -> int:
        """The prompt chunks the step's budget leaves room for beside `rows` decode rows
        (into `chunks` and `scheduled`), and the steps `k` the block may take with them."""
        prompt_tokens = self.r.prompt_tokens
        left = self.budget - rows
        for request in self.prefilling:
            if left <= 0:
                break
            take = min(prompt_tokens - request.prefilled, left)
            chunks.append((take, request.prefilled))
            scheduled.append((request, take))
            left -= take
            if request.started is None:
                request.started = self.now
        if len(chunks) == 1:  # one prompt taking the whole budget, step after step
            take, offset = chunks[0]
            k = min(k, (prompt_tokens - offset) // take)
        elif chunks:
            k = 1
        return k

    def _block(self, rows: int, k: int, chunks: list[tuple[int, int]]) -> tuple[float, int]:
        """(seconds of each step, steps) of the block: no further than the next arrival,
        priced at its mid-point."""
        price, arrivals = self.price, self.arrivals
        if arrivals and k > 1:
            first = price(rows, self.rows_context, tuple(chunks))
            k = max(1, min(k, math.ceil((arrivals[-1].arrival - self.now) / first)))
        if k == 1:  # the block is its one step
            return price(rows, self.rows_context, tuple(chunks)), k
        mid = (k - 1) / 2
        block = tuple([(t, o + t * mid) for t, o in chunks])
        return price(rows, self.rows_context + rows * mid, block), k

    def _advance(self, rows: int, k: int, seconds: float) -> None:
        """The clock and the counters past a block of `k` steps of `seconds` each."""
        elapsed = k * seconds
        self.now += elapsed
        self.step_index += k
        if rows:
            emitted = rows * k
            self.rows_context += emitted
            self.tokens_out += emitted
            self.gaps.append(seconds)
            self.gap_weights.append(emitted)
        self.busy_rows += rows * elapsed
        self.busy_time += elapsed

    def _prefilled(self, k: int, scheduled: list[tuple[_Request, int]]) -> None:
        """The block's prompt chunks done: finished prompts give their first token."""
        self.mixed_steps += k
        prompt_tokens, output_tokens = self.r.prompt_tokens, self.r.output_tokens
        for request, take in scheduled:
            request.prefilled += take * k
            if request.prefilled == prompt_tokens:
                self.prefilling.remove(request)
                request.first_token = self.now
                self.tokens_out += 1
                if output_tokens <= 1:
                    self._complete(request)
                    continue
                self.finishing.append((self.step_index + output_tokens - 1, request))
                self.rows_context += prompt_tokens + 1

    def _complete(self, request: _Request) -> None:
        """`request` done: in a closed loop its user sends the next one at once."""
        now = self.now
        self.done.append((request, now))
        if self.closed and self.issued < self.total:  # the same user sends the next at once
            self.waiting.append(_Request(now, self.cached))
            self.issued += 1
            if self.issued == self.total:  # from here on users leave: the steady state ends
                self.steady[:] = [now, self.tokens_out]

    def _note(self, served: Served) -> None:
        """Why some users queued, and whether the run was shortened."""
        limit, concurrency = self.limit, self.r.concurrency
        if limit < (concurrency or limit):
            served.notes.append(
                f"{limit} requests run at a time ("
                + ("the engine's sequence limit" if limit == self.max_seqs
                   else "what the KV cache holds")
                + f"): the other {concurrency - limit} users wait in the queue"
            )  # fmt: skip
        if len(self.done) < self.wanted:
            coarser = "long requests are simulated fewer times, so the percentiles are coarser"
            served.notes.append(f"{len(self.done)} requests simulated: {coarser}")

    def _measure(self) -> Served:
        """The run's figures, as a benchmark client prints them."""
        r = self.r
        figures = _Figures.of(self.done, r.output_tokens, r.ttft_slo, r.tpot_slo)
        n, end, steps, closed = len(self.done), self.now, self.step_index, self.closed
        gaps, gap_weights = self.gaps, self.gap_weights
        mean_e2e, mean_queue = figures.mean_e2e, figures.mean_queue
        mean_prefill = figures.mean_ttft - mean_queue
        has_slo, good = figures.has_slo, figures.good
        return Served(
            mode="closed" if closed else "open",
            concurrency=r.concurrency if closed else 0,
            arrival_rate=0.0 if closed else r.rate,
            requests=n,
            ttft=percentiles(figures.ttfts),
            tpot=percentiles(figures.tpots),
            itl=percentiles(gaps, gap_weights),
            e2e=percentiles(figures.e2es),
            queue_seconds_mean=mean_queue,
            queue_share=mean_queue / mean_e2e if mean_e2e else 0.0,
            prefill_share=mean_prefill / mean_e2e if mean_e2e else 0.0,
            decode_share=1 - (mean_queue + mean_prefill) / mean_e2e if mean_e2e else 0.0,
            # Tokens per second while every user is active (the ramp and the drain left out).
            output_tokens_per_second=_rate(self.ramped, self.steady or [end, self.tokens_out]),
            requests_per_second=n / end if end else 0.0,
            goodput_requests_per_second=good / end if has_slo and end else None,
            slo_attainment=good / n if has_slo else None,
            mean_batch=self.busy_rows / self.busy_time if self.busy_time else 0.0,
            mixed_step_share=self.mixed_steps / steps if steps else 0.0,
            max_running=self.limit,
            steps=steps,
            max_batched_tokens=self.budget,
            ttft_mean=figures.mean_ttft,
            tpot_mean=sum(figures.tpots) / n,
            itl_mean=sum(map(mul, gaps, gap_weights)) / sum(gap_weights) if gap_weights else 0.0,
        )


def _priced(step: StepModel) -> Callable[[int, float, tuple[tuple[int, float], ...]], float]:
    """`step.seconds`, each distinct step priced once a run: in steady state the same rows
    over the same context come round again and again (about half the steps of a
    closed-loop run), and a step's time depends on nothing else (equal numbers, int or
    float, give the same time)."""
    times: dict[tuple[int, float, tuple[tuple[int, float], ...]], float] = {}
    seconds_of = step.seconds

    def seconds(rows: int, context: float, chunks: tuple[tuple[int, float], ...]) -> float:
        key = (rows, context, chunks)
        found = times.get(key)
        if found is None:
            found = times[key] = seconds_of(rows, context, chunks)  # type: ignore[arg-type]
        return found

    return seconds


def _rate(start: list[float], end: list[float]) -> float:
    if end[0] > start[0]:
        return (end[1] - start[1]) / (end[0] - start[0])
    return end[1] / end[0] if end[0] else 0.0


def _or(values: list[float | None], instead: list[float]) -> list[float]:
    """`values`, each None replaced by `instead`'s value at its place."""
    if None not in values:
        return values  # type: ignore[return-value]
    return [b if a is None else a for a, b in zip(values, instead, strict=True)]


@dataclass
class _Figures:
    """Request by request, what a benchmark client measures of the done requests."""

    ttfts: list[float]
    tpots: list[float]
    e2es: list[float]
    mean_e2e: float
    mean_queue: float
    mean_ttft: float
    good: int  # requests meeting both SLOs (all of them without an SLO)
    has_slo: bool

    @classmethod
    def of(
        cls,
        done: list[tuple[_Request, float]],
        output_tokens: int,
        ttft_slo: float | None,
        tpot_slo: float | None,
    ) -> _Figures:
        # Each figure's list in one pass (`map`: thousands of requests a run); every
        # request has `output_tokens` tokens.
        n = len(done)
        requests, ends = list(map(itemgetter(0), done)), list(map(itemgetter(1), done))
        arrivals = list(map(attrgetter("arrival"), requests))
        firsts = _or(list(map(attrgetter("first_token"), requests)), ends)
        starts = _or(list(map(attrgetter("started"), requests)), firsts)
        ttfts = list(map(sub, firsts, arrivals))
        e2es = list(map(sub, ends, arrivals))
        tpots = (list(map(truediv, map(sub, e2es, ttfts), repeat(output_tokens - 1)))
                 if output_tokens > 1 else [0.0] * n)  # fmt: skip
        queues = list(map(sub, starts, arrivals))
        checks = [map(le, ttfts, repeat(ttft_slo))] if ttft_slo is not None else []
        checks += [map(le, tpots, repeat(tpot_slo))] if tpot_slo is not None else []
        good = sum(map(all, zip(*checks, strict=True))) if checks else n
        mean_e2e = sum(e2es) / n
        mean_queue, mean_ttft = sum(queues) / n, sum(ttfts) / n
        has_slo = ttft_slo is not None or tpot_slo is not None
        return cls(ttfts, tpots, e2es, mean_e2e, mean_queue, mean_ttft, good, has_slo)
