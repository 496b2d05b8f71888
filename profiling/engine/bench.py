"""Drive the engine's own benchmark client against a running server and read what it saved.

`Run` is one benchmark at one concurrency on one set of prompts; `run_all`
hands a server's runs to the driver in one process and returns one
`ServingPoint` per run, with the server's counters for that run alone.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from profiling.engine.interface import Engine, MetricNames
from profiling.engine.metrics import Metrics, parse_metrics
from profiling.engine.results import ServerCounters, ServingPoint, Spread
from profiling.engine.server import EngineFailed, ended, tail
from profiling.results import percentile


@dataclass
class Prompts:
    """What the benchmark sends: random tokens with a shared prefix, or the user's sample."""

    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0
    sample_path: Path | None = None  # JSON lines of {"prompt": ...}
    seed: int = 0

    def flags(self, engine: Engine) -> list[str]:
        return engine.prompt_flags(
            self.prompt_tokens, self.output_tokens, self.shared_prefix_tokens,
            self.sample_path, self.seed,
        )  # fmt: skip


@dataclass
class Run:
    name: str  # file stem, unique in the run folder
    concurrency: int
    requests: int
    prompts: Prompts
    warmups: int = 2
    goodput: dict[str, float] | None = None  # {"ttft": ms, "tpot": ms}


def _argv(engine: Engine, run: Run, url: str, model: str, folder: Path) -> list[str]:
    return engine.bench_argv(
        url, model, run.prompts.flags(engine), run.requests, run.concurrency, run.warmups,
        folder, run.name, run.goodput,
    )  # fmt: skip


def run_all(
    engine: Engine,
    python: Path,
    url: str,
    model: str,
    runs: list[Run],
    folder: Path,
    timeout_s: float,
    env: dict[str, str],
) -> list[ServingPoint]:
    """Every run against the server at `url`, the client in the engine's environment
    `env` (the server's); raises EngineFailed with the client's reason."""
    plan = [
        {"argv": _argv(engine, r, url, model, folder), "metrics_url": f"{url}/metrics",
         "prefix": str(folder / r.name)}
        for r in runs
    ]  # fmt: skip
    plan_path = folder / f"{runs[0].name}.plan.json"
    plan_path.write_text(json.dumps(plan, indent=1))
    log_path = folder / f"{runs[0].name}.client.log"
    try:
        with open(log_path, "wb") as log:
            done = subprocess.run(
                [str(python), "-I", str(engine.DRIVER), str(plan_path)],
                stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s,
                env=env,
            )  # fmt: skip
    except subprocess.TimeoutExpired:
        said = log_path.read_text(errors="replace")
        raise EngineFailed(
            f"the benchmark did not finish within {timeout_s:.0f} s", {"client": tail(said)}
        ) from None
    if done.returncode != 0:
        said = log_path.read_text(errors="replace")
        raise EngineFailed(
            "benchmark: " + ended(done.returncode, said, engine.failure_reason),
            {"client": tail(said)},
        )
    try:
        return [read_point(r, folder, engine.METRICS) for r in runs]
    except (OSError, KeyError, ValueError) as exc:
        raise EngineFailed(f"the benchmark's saved result could not be read: {exc!r}") from None


def spread(seconds: list[float]) -> Spread:
    """p50/p90/p99 and mean in ms, interpolated as the benchmark client does (numpy's)."""
    if not seconds:
        return Spread(0.0, 0.0, 0.0, 0.0)
    ordered = sorted(1000 * s for s in seconds)
    p50, p90, p99 = (round(percentile(ordered, q), 4) for q in (50, 90, 99))
    return Spread(p50, p90, p99, round(sum(ordered) / len(ordered), 4))


BENCHMARK_KEYS = ("ttft", "tpot", "itl", "e2el")


def _mean_ms(d: Metrics, histogram: str) -> float | None:
    count = d.get(f"{histogram}_count")
    return 1000 * d.get(f"{histogram}_sum") / count if count else None


# Chunks arriving closer than this were read in one go, not as they were generated:
# no engine makes a token for one request in 50 µs.
COALESCED_ITL_S = 50e-6


def streamed(saved: dict) -> list[bool]:
    """Per request: did its tokens reach the client as they were generated?"""
    return [not itls or statistics.median(itls) >= COALESCED_ITL_S for itls in saved["itls"]]


def counters(before: Metrics, after: Metrics, names: MetricNames) -> ServerCounters:
    d = after.delta(before)
    return ServerCounters(
        ttft_mean_ms=_mean_ms(d, names.ttft_histogram),
        tpot_mean_ms=_mean_ms(d, names.tpot_histogram),
        preemptions=int(d.get(names.preemptions)),
        prefix_cache_queries=int(d.get(names.prefix_cache_queries)),
        prefix_cache_hits=int(d.get(names.prefix_cache_hits)),
        kv_cache_usage=after.values.get(names.kv_cache_usage),
        spec_drafts=int(d.get(names.spec_drafts)),
        spec_draft_tokens=int(d.get(names.spec_draft_tokens)),
        spec_accepted_tokens=int(d.get(names.spec_accepted_tokens)),
        spec_accepted_by_position=[int(d.by_position[k]) for k in sorted(d.by_position)],
    )


def read_point(run: Run, folder: Path, names: MetricNames) -> ServingPoint:
    saved = json.loads((folder / f"{run.name}.json").read_text())
    per_position = names.spec_accepted_per_position
    before = parse_metrics((folder / f"{run.name}.before.prom").read_text(), per_position)
    after = parse_metrics((folder / f"{run.name}.after.prom").read_text(), per_position)
    outputs = saved.get("output_lens") or []
    tpots = [
        (latency - ttft) / (n - 1) if n > 1 else 0.0
        for latency, ttft, n in zip(saved["latencies"], saved["ttfts"], outputs, strict=False)
    ]
    prompt_lens = saved.get("input_lens") or [run.prompts.prompt_tokens]
    flowed = streamed(saved)

    def kept(values: list[float]) -> list[float]:
        return [v for v, ok in zip(values, flowed, strict=True) if ok] if any(flowed) else []

    ttfts, latencies = [float(x) for x in saved["ttfts"]], [float(x) for x in saved["latencies"]]
    itls = [x for request in kept(saved["itls"]) for x in request]
    return ServingPoint(
        concurrency=run.concurrency,
        requests=int(saved["completed"]),
        failed=int(saved.get("failed", 0)),
        prompt_tokens=round(sum(prompt_lens) / len(prompt_lens)),
        output_tokens=run.prompts.output_tokens,
        ttft_ms=spread(kept(ttfts)),
        tpot_ms=spread(kept(tpots)),
        itl_ms=spread(itls),
        e2el_ms=spread(kept(latencies)),
        output_tokens_per_s=float(saved["output_throughput"]),
        requests_per_s=float(saved["request_throughput"]),
        goodput=float(saved["request_goodput"]) if run.goodput else None,
        duration_s=float(saved["duration"]),
        server=counters(before, after, names),
        ttft_s=ttfts,
        tpot_s=tpots,
        latency_s=latencies,
        coalesced=flowed.count(False),
        streamed=flowed,
        benchmark={
            f"{q}_{k}_ms": saved[f"{q}_{k}_ms"]
            for k in BENCHMARK_KEYS
            for q in ("p50", "p90", "p99", "mean")
            if f"{q}_{k}_ms" in saved
        },
    )
