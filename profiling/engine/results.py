"""The engine profile's typed result: what the serving engine measured, and how.

Every figure here came from the engine: latencies from its own benchmark client
(`vllm bench serve`, its saved JSON), counters (prefix-cache hits, preemptions,
speculative acceptance) from the server's Prometheus `/metrics`, read before
and after each run. Each point keeps its raw per-request samples, so a reader
can recompute any percentile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profiling.engine.chat_results import EngineConversations


@dataclass
class Spread:
    """p50/p90/p99 of one latency over a run's requests, in milliseconds."""

    p50: float
    p90: float
    p99: float
    mean: float = 0.0


@dataclass
class ServerCounters:
    """The server's own view of one run (its `/metrics`, that run only)."""

    ttft_mean_ms: float | None = None  # from its TTFT histogram (no HTTP front end)
    tpot_mean_ms: float | None = None  # from its time-per-output-token histogram
    preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    kv_cache_usage: float | None = None  # the gauge after the run, 0..1
    spec_drafts: int = 0  # verify steps that carried drafts
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_by_position: list[int] = field(default_factory=list)


@dataclass
class ServingPoint:
    """One benchmark run at one concurrency.

    The latency spreads are over the requests that streamed (`streamed`), from
    the benchmark's raw per-request samples; the benchmark's own figures over
    every request are kept in `benchmark` ("p50_ttft_ms", ...).
    """

    concurrency: int
    requests: int
    failed: int
    prompt_tokens: int  # per request, as sent
    output_tokens: int
    ttft_ms: Spread
    tpot_ms: Spread
    itl_ms: Spread
    e2el_ms: Spread
    output_tokens_per_s: float
    requests_per_s: float
    # Requests per second that met every target the user set; None with no target.
    goodput: float | None
    duration_s: float
    server: ServerCounters = field(default_factory=ServerCounters)
    # Requests whose tokens reached the client in one burst at the end: the client
    # was not scheduled while they streamed (a busy machine), so their TTFT is
    # their whole latency and their TPOT zero. Comparisons leave them out.
    coalesced: int = 0
    # Raw per-request samples (seconds), to recompute any figure; `streamed[i]`
    # is False for a coalesced request.
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    streamed: list[bool] = field(default_factory=list)
    benchmark: dict[str, float] = field(default_factory=dict)

    def streamed_only(self, samples: list[float]) -> list[float]:
        if len(self.streamed) != len(samples):
            return samples
        return [v for v, ok in zip(samples, self.streamed, strict=True) if ok]


@dataclass
class OffOn:
    off: Spread
    on: Spread


@dataclass
class PrefixCachingResult:
    """Automatic prefix caching off against on, on the same prompts."""

    prompt_tokens: int
    shared_prefix_tokens: int
    concurrency: int
    ttft_ms: OffOn  # the client's TTFT
    server_ttft_ms: dict[str, float | None]  # {"off": mean, "on": mean}, server histogram
    hit_rate: float  # prompt tokens served from the cache / prompt tokens queried (on)
    speedup: float  # TTFT p50 off / on
    interval: tuple[float, float] | None  # 95 % interval of that ratio, over requests
    flags: list[str] = field(default_factory=list)  # what turns it on
    # The same share on the server with caching off (its counters; None: not read there).
    off_hit_rate: float | None = None


@dataclass
class SpeculativePoint:
    """One speculative configuration at one draft length."""

    method: str  # "ngram" or "draft_model"
    k: int
    status: str  # "ran" or "failed"
    draft: str = ""
    error: str = ""
    acceptance_rate: float | None = None  # accepted draft tokens / drafted
    mean_accepted_length: float | None = None  # tokens per verify step, 1 + accepted/drafts
    acceptance_by_position: list[float] = field(default_factory=list)
    speedup: float | None = None  # TPOT p50 without / with, at concurrency 1
    interval: tuple[float, float] | None = None  # of `speedup`, over requests
    # "client": of the requests that streamed; "server": the server's mean TPOT, where no
    # request of one side reached the client as it was generated (`techniques.tpot_speedup`)
    speedup_basis: str = "client"
    speedup_at_concurrency: float | None = None  # the same at the user's concurrency
    interval_at_concurrency: tuple[float, float] | None = None
    throughput_speedup: float | None = None  # output tok/s with / without, user's concurrency
    output_matches: bool | None = None  # greedy text identical to the plain server's
    flags: list[str] = field(default_factory=list)
    points: list[ServingPoint] = field(default_factory=list)


@dataclass
class EngineQuantization:
    """A quantization the engine runs itself, measured against the unquantized server."""

    method: str  # "fp8" (weights), "fp8-kv" (KV cache), "gptq" (our checkpoint)
    status: str  # "ran", "failed" or "not available"
    error: str = ""
    flags: list[str] = field(default_factory=list)
    note: str = ""  # how it differs from the reference besides the quantization
    weights_bytes: int | None = None  # the engine's own figure, from its log
    kv_cache_tokens: int | None = None  # tokens of KV the engine's memory holds
    tpot_ms: Spread | None = None  # at the user's concurrency; None: no request streamed
    speedup: float | None = None  # TPOT p50 unquantized / quantized
    interval: tuple[float, float] | None = None  # of `speedup`, over requests
    # "client": of the requests that streamed; "server": the server's mean TPOT, where no
    # request of one side reached the client as it was generated (`techniques.tpot_speedup`)
    speedup_basis: str = "client"
    # Quality on the same text as our own quality check: the evaluation text's
    # perplexity through the engine (its prompt log-probabilities), and the share
    # of greedy output characters equal to the unquantized server's.
    perplexity: float | None = None
    reference_perplexity: float | None = None
    greedy_agreement: float | None = None
    points: list[ServingPoint] = field(default_factory=list)


@dataclass
class TensorParallelPoint:
    """The model split over `size` ranks against one, at the user's concurrency."""

    size: int
    status: str
    error: str = ""
    flags: list[str] = field(default_factory=list)
    tpot_ms: Spread | None = None
    speedup: float | None = None  # TPOT p50 one rank / split
    interval: tuple[float, float] | None = None  # 95 %, over requests
    # "client": medians of the requests that streamed; "server": the server's own mean
    # TPOT, where no request reached the client as it was generated (a busy machine).
    speedup_basis: str = "client"
    throughput_speedup: float | None = None  # output tok/s split / one rank
    output_matches: bool | None = None  # greedy text equal to the one-rank server's
    points: list[ServingPoint] = field(default_factory=list)


@dataclass
class Launch:
    """One server the profile started: what for, its exact command, how it went."""

    purpose: str
    command: str
    status: str  # "ran" or "failed"
    start_s: float | None = None
    error: str = ""
    # On a failure: the last lines of each log that says more ({"server": [...],
    # "client": [...]}), shown folded under it on the report.
    logs: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class EngineResult:
    name: str  # "vllm"
    version: str
    command: str  # the launch command of the reference server, as run
    serve_command: str  # the recommended configuration, as a user types it
    dtype: str
    max_model_len: int
    kv_cache_tokens: int | None = None  # tokens of KV the reference server holds
    # Our evaluation text's perplexity through the reference server (its prompt
    # log-probabilities): beside the eager model's, a check of the engine's numerics.
    perplexity: float | None = None
    eval_tokens: int = 0
    serving: list[ServingPoint] = field(default_factory=list)
    prefix_caching: PrefixCachingResult | None = None
    speculative: list[SpeculativePoint] = field(default_factory=list)
    quantization: list[EngineQuantization] = field(default_factory=list)
    tensor_parallel: TensorParallelPoint | None = None
    # The profile's conversations replayed turn by turn (`profiling.engine.conversation_replay`).
    conversations: EngineConversations | None = None
    launches: list[Launch] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # "engine failed: <reason>" per part
    wall_s: float = 0.0
    threads: str = ""  # what the engine was given to run on
