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


def simulate(
    step: StepModel,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int = 0,
    rate: float = 0.0,
    requests: int | None = None,
    kv_tokens: int | None = None,
    max_batched_tokens: int | None = None,
    max_seqs: int | None = None,
    ttft_slo: float | None = None,
    tpot_slo: float | None = None,
    seed: int = 0,
    cached_tokens: int = 0,
    cached_shared: bool = True,
    lined_up: bool = False,
) -> Served:
    """Serve `requests` requests of `prompt_tokens` + `output_tokens` to `concurrency`
    closed-loop users (or at `rate` requests/s, open loop) and measure them as a
    benchmark client would. `cached_tokens`: a prefix every prompt shares, already in
    the prefix cache: each request prefills only the rest (attending to the prefix),
    and the prefix's KV is held once for all of them (`cached_shared`; a conversation's
    own history, reused by its next turn, is held by each request). The scheduler's limits
    (`max_seqs`, `max_batched_tokens`) default to vLLM's on the step's GPU
    (`profiling.projection.engines`). `lined_up`: the closed-loop users all send their
    first request at t = 0 and the throughput is the whole run's (tokens over its
    duration), as a benchmark client with a concurrency limit runs and prints it
    (`vllm bench serve --max-concurrency`): its start-up wave is in every figure. Without
    it the users are in steady state, as a deployment's are."""
    engine = limits(getattr(step, "gpu", None))
    max_seqs = max_seqs or engine.max_seqs
    max_batched_tokens = max_batched_tokens or engine.max_batched_tokens
    if concurrency <= 0 and rate <= 0:
        raise ValueError("give a concurrency or an arrival rate")
    closed = concurrency > 0
    context = prompt_tokens + output_tokens
    # The last prompt token is always computed: it gives the first output token.
    cached = max(0, min(cached_tokens, prompt_tokens - 1))
    limit = max_seqs
    if kv_tokens is not None:
        held = cached if cached_shared else 0
        limit = min(limit, (kv_tokens - held) // (context - held))
    if limit < 1:
        raise ValueError("one request's KV cache does not fit the memory left by the weights")
    # Every user served several times, but the engine's share of the work is what costs
    # time: users beyond what it runs at once only wait.
    rounds = min(ROUNDS * concurrency, ROUNDS * min(concurrency, limit) + concurrency)
    wanted = requests or max(MIN_REQUESTS, rounds if closed else 0)
    budget = max(max_batched_tokens, 1)
    cost = math.ceil(prompt_tokens / budget) + math.ceil(output_tokens / BLOCK_STEPS) + 2
    total = wanted if requests else min(wanted, max(8, WORK_BUDGET // cost))

    rng = random.Random(seed)
    arrivals: list[_Request] = []  # due, sorted latest first (pop() takes the earliest)
    if closed and lined_up:
        arrivals.extend(_Request(0.0, cached) for _ in range(concurrency))
        issued = concurrency
    elif closed:
        # Users in steady state are spread over one request's duration, not lined up at
        # t = 0 (with equal lengths a lined-up start would stay in lock-step for ever).
        # A steady step carries the rows' share of prompt work too: one prompt for
        # every `output_tokens` tokens emitted.
        fresh = prompt_tokens - cached
        alone = step.seconds(0, 0, ((fresh, cached),))
        rows = min(concurrency, limit)
        decode = steady_seconds(step, rows, prompt_tokens, output_tokens, cached,
                                max_batched_tokens)  # fmt: skip
        spread = alone + decode * max(output_tokens - 1, 0)
        for user in range(concurrency):
            arrivals.append(_Request(user * spread / concurrency, cached))
        issued = concurrency
    else:
        t = 0.0
        for _ in range(total):
            t += rng.expovariate(rate)
            arrivals.append(_Request(t, cached))
        issued = total
    arrivals.reverse()
    waiting: list[_Request] = []

    now = 0.0
    prefilling: list[_Request] = []
    # Decode rows: (step index at which the row ends, request), in the order they end:
    # every request has the same output. Every row gains a token per step, so
    # `rows_context` grows by the row count each step.
    finishing: deque[tuple[int, _Request]] = deque()
    step_index = 0
    rows_context = 0.0
    done: list[tuple[_Request, float]] = []
    gaps: list[float] = []
    gap_weights: list[float] = []
    busy_rows = 0.0
    tokens_out = 0  # every token emitted, finished requests' or not
    steady: list[float] = []  # (time, tokens) when the last request was sent
    ramped: list[float] = [0.0, 0]  # (time, tokens) when every user had sent one
    busy_time = 0.0
    mixed_steps = 0

    price = _priced(step)

    def complete(request: _Request) -> None:
        nonlocal issued, tokens_out
        done.append((request, now))
        if closed and issued < total:  # the same user sends the next request at once
            waiting.append(_Request(now, cached))
            issued += 1
            if issued == total:  # from here on users leave: the steady state ends
                steady[:] = [now, tokens_out]

    iterations = 0
    while len(done) < total and iterations < MAX_ITERATIONS:
        while arrivals and arrivals[-1].arrival <= now:
            waiting.append(arrivals.pop())
            if closed and not arrivals:  # every user has sent a first request
                ramped[:] = [now, tokens_out]
        # Admit first come, first served while the KV cache and max_seqs allow.
        if waiting and (room := limit - len(prefilling) - len(finishing)) > 0:
            prefilling += waiting[:room]
            del waiting[:room]
        rows = len(finishing)
        # Advance a block of k steps up to the next event (a row ending, a prompt done, an
        # arrival), at the block's mid-point cost: exact while a step's time is linear in
        # the context, which holds between events.
        k = min(finishing[0][0] - step_index, BLOCK_STEPS) if finishing else BLOCK_STEPS
        chunks: list[tuple[int, int]] = []  # (tokens, offset) of each prompt chunk
        scheduled: list[tuple[_Request, int]] = []
        if prefilling:
            left = budget - rows
            for request in prefilling:
                if left <= 0:
                    break
                take = min(prompt_tokens - request.prefilled, left)
                chunks.append((take, request.prefilled))
                scheduled.append((request, take))
                left -= take
                if request.started is None:
                    request.started = now
            if len(chunks) == 1:  # one prompt taking the whole budget, step after step
                take, offset = chunks[0]
                k = min(k, (prompt_tokens - offset) // take)
            elif chunks:
                k = 1
        elif not rows:
            now = arrivals[-1].arrival  # idle until the next arrival
            continue
        k = max(1, k)
        if arrivals and k > 1:
            first = price(rows, rows_context, tuple(chunks))
            k = max(1, min(k, math.ceil((arrivals[-1].arrival - now) / first)))
        if k == 1:  # the block is its one step
            seconds = price(rows, rows_context, tuple(chunks))
        else:
            mid = (k - 1) / 2
            block = tuple([(t, o + t * mid) for t, o in chunks])
            seconds = price(rows, rows_context + rows * mid, block)
        elapsed = k * seconds
        now += elapsed
        step_index += k
        if rows:
            emitted = rows * k
            rows_context += emitted
            tokens_out += emitted
            gaps.append(seconds)
            gap_weights.append(emitted)
        iterations += 1
        busy_rows += rows * elapsed
        busy_time += elapsed
        # Requests whose prompt is done emit their first token and join the decode rows.
        if chunks:
            mixed_steps += k
            for request, take in scheduled:
                request.prefilled += take * k
                if request.prefilled == prompt_tokens:
                    prefilling.remove(request)
                    request.first_token = now
                    tokens_out += 1
                    if output_tokens <= 1:
                        complete(request)
                        continue
                    finishing.append((step_index + output_tokens - 1, request))
                    rows_context += prompt_tokens + 1
        while finishing and finishing[0][0] <= step_index:
            request = finishing.popleft()[1]
            rows_context -= context
            complete(request)

    if not done:
        raise ValueError("the workload is too long to simulate request by request")
    if lined_up:  # the benchmark's figure: every token over the whole run
        ramped, steady = [0.0, 0], [now, tokens_out]
    served = _measure(
        done, gaps, gap_weights, now, step_index, mixed_steps, busy_rows, busy_time,
        ramped, steady or [now, tokens_out], closed,
        concurrency, rate, limit, budget, output_tokens, ttft_slo, tpot_slo,
    )  # fmt: skip
    if limit < (concurrency or limit):
        served.notes.append(
            f"{limit} requests run at a time ("
            + ("the engine's sequence limit" if limit == max_seqs else "what the KV cache holds")
            + f"): the other {concurrency - limit} users wait in the queue"
        )
    if len(done) < wanted:
        served.notes.append(f"{len(done)} requests simulated: long requests are simulated "
                            "fewer times, so the percentiles are coarser")  # fmt: skip
    return served


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


def _measure(
    done: list[tuple[_Request, float]],
    gaps: list[float],
    gap_weights: list[float],
    end: float,
    steps: int,
    mixed_steps: int,
    busy_rows: float,
    busy_time: float,
    ramped: list[float],
    steady: list[float],
    closed: bool,
    concurrency: int,
    rate: float,
    limit: int,
    budget: int,
    output_tokens: int,
    ttft_slo: float | None,
    tpot_slo: float | None,
) -> Served:
    # Request by request, each figure's list in one pass (`map`: thousands of requests a
    # run); every request has `output_tokens` tokens.
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
    mean_prefill = mean_ttft - mean_queue
    has_slo = ttft_slo is not None or tpot_slo is not None
    return Served(
        mode="closed" if closed else "open",
        concurrency=concurrency if closed else 0,
        arrival_rate=0.0 if closed else rate,
        requests=n,
        ttft=percentiles(ttfts),
        tpot=percentiles(tpots),
        itl=percentiles(gaps, gap_weights),
        e2e=percentiles(e2es),
        queue_seconds_mean=mean_queue,
        queue_share=mean_queue / mean_e2e if mean_e2e else 0.0,
        prefill_share=mean_prefill / mean_e2e if mean_e2e else 0.0,
        decode_share=1 - (mean_queue + mean_prefill) / mean_e2e if mean_e2e else 0.0,
        # Tokens per second while every user is active (the ramp and the drain left out).
        output_tokens_per_second=_rate(ramped, steady),
        requests_per_second=n / end if end else 0.0,
        goodput_requests_per_second=good / end if has_slo and end else None,
        slo_attainment=good / n if has_slo else None,
        mean_batch=busy_rows / busy_time if busy_time else 0.0,
        mixed_step_share=mixed_steps / steps if steps else 0.0,
        max_running=limit,
        steps=steps,
        max_batched_tokens=budget,
        ttft_mean=mean_ttft,
        tpot_mean=sum(tpots) / n,
        itl_mean=sum(map(mul, gaps, gap_weights)) / sum(gap_weights) if gap_weights else 0.0,
    )
