"""The prefix-caching experiment: how much prompt work does reusing a KV cache save?

At the workload's prompt length (capped in quick mode and by the model's
positions) it measures, for prefixes of 0, 25, 50, 75 and 90 % of the prompt
(and the workload's own shared prefix), the TTFT of a prompt whose prefix is
already cached (prefilled once, reused for a different ending every sample)
against the same prompt cold, and the bytes the cached prefix holds, read
from the real cache. Multi-turn: turn n of a conversation reuses the cache
of turns 1..n-1 (messages and replies), measured warm and cold per turn.
Every point also checks that the outputs with a reused cache equal the cold
outputs (greedy tokens identical, logits within tolerance): see
`profiling.caching.measure`.

With the user's prompt sample (`config.prompt_sample`) it tokenizes the
prompts with the model's tokenizer (UTF-8 bytes when the model has none,
labelled so), finds with a trie how many tokens a prefix cache would reuse
(`profiling.caching.reuse`), measures one more point at that share of the
prompt, and reports the saving the user would see.

Heavy imports (torch, transformers) happen inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profiling.caching import budget, reuse
from profiling.caching.report import cold_ttft, finding, interpolate_warm, warnings_for
from profiling.caching.results import CachingResult, PrefixPoint, PromptSampleReuse, TurnPoint
from profiling.config import Workload
from profiling.measure.cost import record
from profiling.measure.progress import ticker
from profiling.measure.timing import Clock, clock_for
from profiling.model.prompts import load_prompts
from profiling.technique_kit.context import ExperimentContext

SHARES = (0.0, 0.25, 0.5, 0.75, 0.9)
QUICK_MAX_PROMPT_TOKENS = 512
FULL_MAX_PROMPT_TOKENS = 8192
MIN_PROMPT_TOKENS = 4
QUICK_TURNS, FULL_TURNS = 3, 4
QUICK_GREEDY_TOKENS, FULL_GREEDY_TOKENS = 8, 16
PHASE = "caching"
SHARED_LABEL, SAMPLE_LABEL = "shared prefix", "prompt sample"
# progress(phase, fraction 0..1, message), as the runner reports it.
Progress = Callable[[str, float, str], None]


@dataclass
class CachingPlan:
    """What one run measures: prompt length, prefix shares, turns, repeats."""

    prompt_tokens: int
    requested_prompt_tokens: int
    shares: list[float] = field(default_factory=lambda: list(SHARES))
    shared_prefix_tokens: int = 0  # measured (scaled when the prompt was capped)
    requested_shared_prefix_tokens: int = 0
    turns: int = QUICK_TURNS
    greedy_tokens: int = QUICK_GREEDY_TOKENS
    warmup: int = 1
    repeats: int = 3

    def prefix_lengths(self) -> list[int]:
        """The sweep's cached prefix lengths, one per share (shorter than the prompt)."""
        tokens = self.prompt_tokens
        return sorted({min(round(share * tokens), tokens - 1) for share in self.shares})


def make_plan(workload: Workload, quick: bool, max_positions: int | None) -> CachingPlan:
    """The workload's prompt length, capped (512 quick, 8192 full, the model's positions)."""
    greedy = QUICK_GREEDY_TOKENS if quick else FULL_GREEDY_TOKENS
    cap = QUICK_MAX_PROMPT_TOKENS if quick else FULL_MAX_PROMPT_TOKENS
    if max_positions:
        cap = min(cap, max_positions - greedy)
    tokens = max(MIN_PROMPT_TOKENS, min(workload.prompt_tokens, cap))
    shared = workload.shared_prefix_tokens
    if shared and tokens < workload.prompt_tokens:
        shared = round(shared * tokens / workload.prompt_tokens)
    return CachingPlan(
        prompt_tokens=tokens,
        requested_prompt_tokens=workload.prompt_tokens,
        shared_prefix_tokens=min(shared, tokens - 1) if workload.shared_prefix_tokens else 0,
        requested_shared_prefix_tokens=workload.shared_prefix_tokens,
        turns=QUICK_TURNS if quick else FULL_TURNS,
        greedy_tokens=greedy,
        repeats=3 if quick else 5,
    )


# -- the prompt sample ------------------------------------------------------------


def tokenize_sample(tokenizer: Any | None, prompts: list[str]) -> tuple[list[list[int]], str]:
    """(token ids per prompt, "tokenizer" or "bytes"). Special tokens are left out:
    a BOS every prompt starts with would count as one reused token each."""
    if tokenizer is None:
        return [list(p.encode("utf-8", "surrogatepass")) for p in prompts], "bytes"
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    return [list(x) for x in ids], "tokenizer"


def analyse_sample(
    tokenizer: Any | None, prompts: list[str], kv_bytes_per_token: int | None = None
) -> PromptSampleReuse:
    """The reuse figures of the user's prompts (no timing yet)."""
    ids, how = tokenize_sample(tokenizer, prompts)
    analysis = reuse.analyse([x for x in ids if x] or [[0]], tokenization=how)
    if kv_bytes_per_token is not None:
        analysis.cache_bytes_needed = analysis.unique_tokens * kv_bytes_per_token
    return analysis


# -- the measurement --------------------------------------------------------------


class _Stream:
    """Prompt token ids: the shipped prompt texts, or seeded random ids without a
    tokenizer; any [start, end) range, wrapping around, so endings never run out."""

    def __init__(self, tokenizer: Any | None, vocab_size: int, device: str, seed: int = 0):
        # torch: kept out of the site's imports
        import torch

        base: list[int] = []
        if tokenizer is not None:
            text = "\n\n".join(load_prompts().prompts)
            base = [t % vocab_size for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
        if len(base) < 64:
            generator = torch.Generator().manual_seed(seed)
            base = torch.randint(0, vocab_size, (4096,), generator=generator).tolist()
        self.base, self.device = base, device

    def ids(self, start: int, end: int) -> Any:
        # torch: kept out of the site's imports
        import torch

        n = len(self.base)
        values = [self.base[i % n] for i in range(start, end)]
        return torch.tensor([values], dtype=torch.long, device=self.device)


class _Run:
    """One experiment run: the model, its inputs, the plan and the clock."""

    def __init__(self, model: Any, stream: _Stream, plan: CachingPlan, clock: Clock, dtype: str):
        self.model, self.stream, self.plan, self.clock = model, stream, plan, clock
        self.dtype = dtype
        self.samples = plan.warmup + plan.repeats

    def _reuse(self, cache: Any, context: Any, endings: list[Any]) -> tuple[Any, Any]:
        """(timing, outputs check) of `context` + each ending, cold and with `cache`."""
        # torch: torch and caching.measure (which imports it), kept out of the site's imports
        import torch

        from profiling.caching import measure

        plan = self.plan
        timed = measure.time_reuse(
            self.model,
            cache,
            context,
            endings,
            clock=self.clock,
            warmup=plan.warmup,
            repeats=plan.repeats,
        )
        full = torch.cat([context, endings[0]], dim=-1)
        check = measure.check_outputs(self.model, cache, full, plan.greedy_tokens, self.dtype)
        return timed, check

    def _endings(self, start: int, length: int) -> list[Any]:
        """A different ending per sample, consecutive ranges of the stream from `start`."""
        return [
            self.stream.ids(start + i * length, start + (i + 1) * length)
            for i in range(self.samples)
        ]

    def point(self, prefix_tokens: int, label: str = "") -> PrefixPoint:
        """Prefix `prefix_tokens` cached once, reused under a different ending per sample."""
        # torch: caching.measure imports torch; kept out of the site's imports
        from profiling.caching import measure

        total = self.plan.prompt_tokens
        prefix = self.stream.ids(0, prefix_tokens)
        cache = measure.prefill(self.model, prefix)
        timed, check = self._reuse(cache, prefix, self._endings(total, total - prefix_tokens))
        return PrefixPoint(
            prompt_tokens=total,
            prefix_tokens=prefix_tokens,
            prefix_share=prefix_tokens / total,
            suffixes=self.samples,
            cold_ttft_seconds=timed.cold,
            warm_ttft_seconds=timed.warm,
            warm_to_cold=timed.warm_to_cold,
            prefix_cache_bytes=measure.held_bytes(cache),
            outputs_match=check.outputs_match,
            tokens_match=check.tokens_match,
            max_abs_logit_diff=check.max_abs_logit_diff,
            greedy_tokens=check.greedy_tokens,
            first_divergence=check.first_divergence,
            label=label,
        )

    def turns(self, tick: Callable[[str], None]) -> list[TurnPoint]:
        """Turn n: the conversation so far (n messages, n-1 replies of one chunk
        each); warm reuses the cache of turns 1..n-1, built up turn by turn."""
        # torch: caching.measure imports torch; kept out of the site's imports
        from profiling.caching import measure

        count = self.plan.turns
        chunk = max(1, self.plan.prompt_tokens // (2 * count - 1))
        cache, cached, out = measure.new_cache(self.model), 0, []
        for turn in range(1, count + 1):
            context = self.stream.ids(0, cached)
            # The timed messages come from beyond the whole conversation.
            timed, check = self._reuse(cache, context, self._endings(2 * count * chunk, chunk))
            out.append(
                TurnPoint(
                    turn=turn,
                    prompt_tokens=cached + chunk,
                    cached_tokens=cached,
                    new_tokens=chunk,
                    cold_ttft_seconds=timed.cold,
                    warm_ttft_seconds=timed.warm,
                    warm_to_cold=timed.warm_to_cold,
                    cache_bytes=measure.held_bytes(cache),
                    outputs_match=check.outputs_match,
                    max_abs_logit_diff=check.max_abs_logit_diff,
                )
            )
            tick(f"turn {turn} ({cached} tokens cached): {timed.warm_to_cold:.2f}x cold")
            # This turn's message and its reply join the cache for the next turn.
            cache = measure.prefill(self.model, self.stream.ids(cached, cached + 2 * chunk), cache)
            cached += 2 * chunk
        return out


def _sample_prefix(plan: CachingPlan, analysis: PromptSampleReuse | None) -> int:
    if analysis is None or analysis.reuse_fraction <= 0:
        return 0
    return max(1, min(round(analysis.reuse_fraction * plan.prompt_tokens), plan.prompt_tokens - 1))


def run_caching(
    model: Any,
    tokenizer: Any | None,
    plan: CachingPlan,
    *,
    device: str,
    dtype: str = "float32",
    prompt_sample: list[str] | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
    kv_bytes_per_token: int | None = None,
    model_name: str = "",
    config_only: bool = False,
) -> CachingResult:
    """Measure prefix reuse on `model` with the sizes of `plan`; see the module docstring.

    `kv_bytes_per_token` defaults to a measurement from a real cache
    (`profiling.model.memory.kv_bytes_per_token_measured`); `clock` to the device's.
    """
    # torch: model.memory imports torch; kept out of the site's imports
    from profiling.model.memory import kv_bytes_per_token_measured

    clock = clock or clock_for(device)
    vocab = int(model.config.get_text_config(decoder=True).vocab_size)
    run = _Run(model, _Stream(tokenizer, vocab, device), plan, clock, dtype)
    if kv_bytes_per_token is None:
        kv_bytes_per_token = kv_bytes_per_token_measured(model, device)
    analysis = (
        analyse_sample(tokenizer, prompt_sample, kv_bytes_per_token) if prompt_sample else None
    )
    extra = {SHARED_LABEL: plan.shared_prefix_tokens, SAMPLE_LABEL: _sample_prefix(plan, analysis)}
    sweep, measured, turns = _measure(run, {k: n for k, n in extra.items() if n > 0}, progress)
    result = CachingResult(
        model=model_name,
        config_only=config_only,
        prompt_tokens=plan.prompt_tokens,
        requested_prompt_tokens=plan.requested_prompt_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        prefix_sweep=sweep,
        multi_turn=turns,
        shared_prefix=measured.get(SHARED_LABEL),
        shared_prefix_requested_tokens=plan.requested_shared_prefix_tokens,
        prompt_sample=analysis,
    )
    held = result.shared_prefix or max(sweep, key=lambda p: p.prefix_tokens)
    result.prefix_cache_tokens = held.prefix_tokens
    result.prefix_cache_bytes = held.prefix_cache_bytes
    if analysis is not None:
        _add_sample_ttft(analysis, sweep, measured.get(SAMPLE_LABEL))
    result.finding = finding(result)
    result.warnings = warnings_for(result)
    return result


def _measure(
    run: _Run, extra: dict[str, int], progress: Progress | None
) -> tuple[list[PrefixPoint], dict[str, PrefixPoint], list[TurnPoint]]:
    """(the sweep, the labelled extra points, the turns), measured in that order."""
    # torch: kept out of the site's imports
    import torch

    lengths = run.plan.prefix_lengths()
    tick = ticker(progress, PHASE, len(lengths) + len(extra) + run.plan.turns)
    with torch.inference_mode():
        sweep = []
        for n in lengths:
            sweep.append(run.point(n))
            tick(
                f"{n}-token prefix of {run.plan.prompt_tokens}: {sweep[-1].warm_to_cold:.2f}x cold"
            )
        measured = {}
        for label, n in extra.items():
            measured[label] = run.point(n, label)
            tick(f"{label} ({n} tokens): {measured[label].warm_to_cold:.2f}x cold")
        turns = run.turns(tick)
    return sweep, measured, turns


def _add_sample_ttft(
    analysis: PromptSampleReuse, sweep: list[PrefixPoint], point: PrefixPoint | None
) -> None:
    """The sample's TTFT saving: measured at its reuse share (cold when it reuses nothing)."""
    cold = cold_ttft(sweep)
    warm = point.warm_ttft_seconds.median if point else cold
    if point is not None:  # cold from the same interleaved pairs as warm
        cold = point.cold_ttft_seconds.median
    analysis.prompt_tokens = sweep[0].prompt_tokens
    analysis.cold_ttft_seconds = cold
    analysis.warm_ttft_seconds = warm
    analysis.interpolated_warm_ttft_seconds = interpolate_warm(sweep, analysis.reuse_fraction)
    analysis.ttft_saving_fraction = 1 - warm / cold if cold else 0.0
    analysis.measured = point


# -- wiring into the runner -------------------------------------------------------


def run_for_context(context: ExperimentContext) -> CachingResult:
    """The experiment as the registry calls it."""
    loaded, config = context.loaded, context.config
    plan = make_plan(config.workload, config.quick, loaded.info.max_position_embeddings)
    extra = int(bool(config.workload.shared_prefix_tokens)) + int(bool(config.prompt_sample))
    quick = make_plan(config.workload, True, loaded.info.max_position_embeddings)
    costed = budget.for_context(context, plan, extra, quick.turns)
    result = run_caching(
        loaded.model,
        loaded.tokenizer,
        plan,
        device=context.device,
        dtype=context.dtype,
        prompt_sample=config.prompt_sample,
        progress=context.progress,
        clock=context.clock,
        kv_bytes_per_token=context.profile.memory.kv_cache_bytes_per_token,
        model_name=loaded.info.name,
        config_only=loaded.info.config_only,
    )
    record(result, costed, context.budget_s, "the prefix sweep")
    return result
