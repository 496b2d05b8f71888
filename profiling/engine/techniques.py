"""Each technique measured on the engine: a server per configuration, against the reference.

The reference server's points (the sweep at 1 and at the user's concurrency)
are the "without" side of every comparison; each variant server runs the same
prompts (same seed) at the same concurrencies. A speed ratio is of medians of
per-request figures, with a 95 % interval resampled over those requests.
"""

from __future__ import annotations

from typing import Any

from profiling.engine import client
from profiling.engine.plan import CHECK_PROMPTS, CHECK_TOKENS, EVAL_WINDOW
from profiling.engine.results import (
    EngineQuantization,
    OffOn,
    PrefixCachingResult,
    ServingPoint,
    SpeculativePoint,
    TensorParallelPoint,
)
from profiling.engine.server import EngineFailed
from profiling.measure.stats import ratio_interval


def _at(points: list[ServingPoint], concurrency: int) -> ServingPoint | None:
    return next((p for p in points if p.concurrency == concurrency), None)


def _ratio(without: ServingPoint, with_: ServingPoint, metric: str) -> tuple[float | None, Any]:
    """median(without) / median(with) of a per-request metric ("ttft_s", "tpot_s") over
    the requests that streamed, and its 95 % interval."""
    a = without.streamed_only(getattr(without, metric))
    b = with_.streamed_only(getattr(with_, metric))
    interval = ratio_interval(a, b)
    if interval is None:
        return None, None
    return round(interval.ratio, 4), (round(interval.low, 4), round(interval.high, 4))


def prefix_result(
    off: ServingPoint, on: ServingPoint, target: Any, flags: list[str]
) -> PrefixCachingResult:
    speedup, interval = _ratio(off, on, "ttft_s")
    queries, off_queries = on.server.prefix_cache_queries, off.server.prefix_cache_queries
    return PrefixCachingResult(
        prompt_tokens=target.prompt_tokens,
        shared_prefix_tokens=target.shared_prefix_tokens,
        concurrency=on.concurrency,
        ttft_ms=OffOn(off.ttft_ms, on.ttft_ms),
        server_ttft_ms={"off": off.server.ttft_mean_ms, "on": on.server.ttft_mean_ms},
        hit_rate=on.server.prefix_cache_hits / queries if queries else 0.0,
        speedup=speedup or 0.0,
        interval=interval,
        flags=flags,
        off_hit_rate=off.server.prefix_cache_hits / off_queries if off_queries else None,
    )


def _spec_configs(plan: Any) -> list[tuple[str, int, str]]:
    """(method, k, draft) of every speculative server the plan asks for."""
    out = []
    for k in plan.ks:
        if plan.ngram:
            out.append(("ngram", k, ""))
        if plan.draft:
            out.append(("draft_model", k, plan.draft))
    return out


def measure_speculative(
    session: Any, reference: list[ServingPoint], ref: dict, ngram: dict[str, int]
) -> list[SpeculativePoint]:
    t = session.target
    out = []
    for method, k, draft in _spec_configs(session.plan):
        flags = session.engine.speculative_flags(method, k, draft, ngram)
        purpose = f"speculative {method} k={k}"
        point = SpeculativePoint(method, k, "failed", draft=draft, flags=flags)
        try:
            with session.server(purpose, flags) as server:
                session.ran(server)
                levels = sorted({1, t.concurrency})
                runs = [session.run(f"spec-{method}-k{k}", c) for c in levels]
                point.points = session.runs(server, runs)
                texts = client.greedy_texts(
                    server.url, t.model, t.check_prompts[:CHECK_PROMPTS], CHECK_TOKENS
                )
        except EngineFailed as exc:
            point.error = session.failed(purpose, exc)
            out.append(point)
            continue
        point.status = "ran"
        point.output_matches = texts == ref["texts"]
        _acceptance(point)
        base_1, spec_1 = _at(reference, 1), _at(point.points, 1)
        if base_1 and spec_1:
            point.speedup, point.interval, point.speedup_basis = tpot_speedup(base_1, spec_1)
        base_c, spec_c = _at(reference, t.concurrency), _at(point.points, t.concurrency)
        if base_c and spec_c:
            point.speedup_at_concurrency, point.interval_at_concurrency = _ratio(
                base_c, spec_c, "tpot_s"
            )
            point.throughput_speedup = round(
                spec_c.output_tokens_per_s / base_c.output_tokens_per_s, 4
            )
        out.append(point)
    return out


def _acceptance(point: SpeculativePoint) -> None:
    drafts = sum(p.server.spec_drafts for p in point.points)
    drafted = sum(p.server.spec_draft_tokens for p in point.points)
    accepted = sum(p.server.spec_accepted_tokens for p in point.points)
    by_position = [0] * point.k
    for p in point.points:
        for i, n in enumerate(p.server.spec_accepted_by_position[: point.k]):
            by_position[i] += n
    if drafted:
        point.acceptance_rate = round(accepted / drafted, 4)
    if drafts:
        point.mean_accepted_length = round(1 + accepted / drafts, 4)
        point.acceptance_by_position = [round(n / drafts, 4) for n in by_position]


def measure_quantization(
    session: Any, reference: list[ServingPoint], ref: dict
) -> list[EngineQuantization]:
    t, engine = session.target, session.engine
    out = []
    base = _at(reference, t.concurrency)
    # One probe of the build's kernels (seconds) spares a server start (most of a minute)
    # for each format it cannot run.
    lacking = engine.missing_kernels(session.python, t.device)
    for method in session.plan.quantization:
        if method == "gptq" and not t.gptq_dir:
            out.append(EngineQuantization(
                method, "not available",
                error="no GPTQ checkpoint in this run: the quantization experiment with "
                      "gptq-int4 among its precisions makes the one the engine serves",
            ))  # fmt: skip
            continue
        refused = engine.quantization_unsupported(method, t.device, t.head_dim, lacking)
        if refused:
            out.append(EngineQuantization(method, "not available", error=refused))
            continue
        note = ""
        if method == "gptq" and t.gptq_dir:
            flags = engine.checkpoint_flags(t.gptq_dir, t.model)
        else:
            flags = engine.quantization_flags(method) or []
        if method in ("fp8", "gptq") and t.dtype == "float32":
            flags += engine.dtype_flags("bfloat16")
            note = (
                f"{method} computes in 16 bits: run in bfloat16 against the float32 "
                "reference, so its speed and quality include bfloat16's share"
            )
        purpose = f"quantization {method}"
        entry = EngineQuantization(method, "failed", flags=flags, note=note)
        try:
            with session.server(purpose, flags) as server:
                session.ran(server)
                entry.points = session.runs(server, [session.run(f"quant-{method}", t.concurrency)])
                texts = client.greedy_texts(
                    server.url, t.model, t.check_prompts[:CHECK_PROMPTS], CHECK_TOKENS
                )
                nll = client.nll_of(server.url, t.model, t.eval_ids, EVAL_WINDOW)
                log = server.log_text()
        except EngineFailed as exc:
            entry.error = session.failed(purpose, exc)
            out.append(entry)
            continue
        entry.status = "ran"
        # A run none of whose requests streamed has no client TPOT (its spread would read
        # 0 ms): the speedup then comes from the server's own step timing, said so.
        at = entry.points[0]
        entry.tpot_ms = at.tpot_ms if any(at.streamed) else None
        if base:
            entry.speedup, entry.interval, entry.speedup_basis = tpot_speedup(base, at)
        entry.greedy_agreement = round(client.agreement(ref["texts"], texts), 4)
        if nll and ref.get("nll"):
            entry.perplexity = client.perplexity(*nll)
            entry.reference_perplexity = client.perplexity(*ref["nll"])
        entry.kv_cache_tokens = engine.kv_cache_tokens(log)
        entry.weights_bytes = engine.weights_bytes(log)
        out.append(entry)
    return out


def tpot_speedup(without: ServingPoint, with_: ServingPoint) -> tuple[float | None, Any, str]:
    """TPOT without / with: of the client's per-request medians and their interval, or,
    where no request of one side streamed to the client (all read in one burst on a busy
    machine), of the server's mean TPOT, which the engine times at its own steps."""
    speedup, interval = _ratio(without, with_, "tpot_s")
    if speedup is not None:
        return speedup, interval, "client"
    one, split = without.server.tpot_mean_ms, with_.server.tpot_mean_ms
    if one and split:
        return round(one / split, 4), None, "server"
    return None, None, "client"


def measure_tensor_parallel(
    session: Any, reference: list[ServingPoint], ref: dict
) -> TensorParallelPoint:
    t, size = session.target, session.plan.tensor_parallel
    flags = session.engine.tensor_parallel_flags(size)
    purpose = f"tensor parallel {size}"
    point = TensorParallelPoint(size, "failed", flags=flags)
    try:
        with session.server(purpose, flags, tensor_parallel=size) as server:
            session.ran(server)
            point.points = session.runs(server, [session.run(f"tp{size}", t.concurrency)])
            texts = client.greedy_texts(
                server.url, t.model, t.check_prompts[:CHECK_PROMPTS], CHECK_TOKENS
            )
    except EngineFailed as exc:
        point.error = session.failed(purpose, exc)
        return point
    point.status = "ran"
    point.tpot_ms = point.points[0].tpot_ms
    point.output_matches = texts == ref.get("texts")
    base = _at(reference, t.concurrency)
    if base:
        point.speedup, point.interval, point.speedup_basis = tpot_speedup(base, point.points[0])
        point.throughput_speedup = round(
            point.points[0].output_tokens_per_s / base.output_tokens_per_s, 4
        )
    return point
