"""The speculative-decoding experiment: does a draft make this model generate faster?

For each draft (a draft model, and/or prompt lookup, which needs no model)
and each K of the sweep, at batch 1 and at the user's concurrency, our own
exact greedy loop (`profiling.speculative.loop`) decodes the fixed prompt set
and reports acceptance, tokens per target pass, phase costs, and end-to-end
tokens/s against the target's own greedy decode of the same prompts, timed
the same way at the same batch: on a CPU sample by sample interleaved with the
speculative runs (so drifting load from other processes hits both alike; each
round's one run of the target alone pairs with every draft and K of the batch
size), on a GPU once per batch size and reused for every draft and K
(`sweep.Timings`).
Its output is checked against that baseline in every run, with the dtype's
numerics in mind (`SweepPoint.matches_baseline`, `exactness`). Draft and
verify costs are per pass after the first, which also prefills the prompt.

Acceptance convention: `mean_accepted_length = 1 + accepted / target passes`,
the tokens emitted per target pass per sequence (the accepted draft tokens
plus the target's own token); `acceptance_rate = accepted / proposed`.

Random-weights (config-only) models: acceptance means nothing, so only the
verify-cost curve is measured (one target pass over K+1 tokens against one
over a single token, which bounds any speedup); it is measured in every run.

Heavy imports (torch, transformers) happen inside the functions, so the web
process can import this module and `profiling.speculative.results` cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiling.measure.cost import record
from profiling.measure.progress import Progress, ticker
from profiling.measure.timing import Clock, clock_for
from profiling.model.prompts import PromptSet
from profiling.speculative import budget
from profiling.speculative.plan import (  # noqa: F401 (the plan is read from here too)
    SpeculativePlan,
    default_draft_name,
    make_plan,
)
from profiling.speculative.report import best_at, best_k, finding, timing_note, warnings_for
from profiling.speculative.results import (
    ACCEPTANCE_CONVENTION,
    PROMPT_LOOKUP,
    DraftMemory,
    SpeculativeResult,
    SweepPoint,
    VerifyCostPoint,
)
from profiling.technique_kit.context import ExperimentContext

TRACE_PROMPT = -1  # the last prompt of the set: long, with phrases worth looking up
PHASE = "speculative"


@dataclass
class Draft:
    """A loaded draft model (already resolved and security-checked by the caller)."""

    model: Any
    tokenizer: Any | None
    name: str


def run_speculative(
    target: Any,
    target_tokenizer: Any | None,
    draft: Draft | tuple[Any, Any, str] | None,
    *,
    ks: list[int],
    batch_sizes: list[int],
    max_new_tokens: int,
    prompts: PromptSet | list[str],
    prompt_lookup: bool,
    device: str,
    progress: Progress | None = None,
    config_only: bool = False,
    clock: Clock | None = None,
    warmup: int = 1,
    repeats: int = 3,
    target_name: str = "",
    trace_k: int | None = None,
    compiled: dict[str, Any] | None = None,
) -> SpeculativeResult:
    """Measure speculative decoding of `target` with `draft` and/or prompt lookup.

    `draft` is `Draft(model, tokenizer, name)` or the same as a tuple; its
    tokenizer must match the target's (`TokenizerMismatch` otherwise). With
    `config_only` (random weights) only the verify-cost curve and the draft's
    memory are measured. Without a target tokenizer, prompts become seeded
    random token ids of similar length. `clock` defaults to the device's clock
    (`profiling.measure.timing.clock_for`); the trace uses `trace_k`, or the best K
    at batch 1. `compiled` holds the target's compiled forward where the baseline's
    decode path compiles it (`profiling.measure.decode_path`), so the verify-cost
    passes reuse it.
    """
    # torch: speculative.sweep imports torch; kept out of the site's imports
    from profiling.speculative.sweep import encode_prompts

    draft = Draft(*draft) if isinstance(draft, tuple) else draft
    if draft is not None:
        _check_draft(target_tokenizer, draft, config_only)
    prompt_set = prompts if isinstance(prompts, PromptSet) else PromptSet(0, list(prompts))
    ids = encode_prompts(target_tokenizer, prompt_set.prompts, _vocab_size(target))
    bench = _Bench(target, draft, ids, max_new_tokens, clock or clock_for(device), warmup, repeats)
    bench.compiled = {} if compiled is None else compiled
    bench.timings.paired = not device.startswith("cuda")  # a GPU is not shared: time once
    tick = ticker(progress, PHASE, _units(ks, batch_sizes, draft, prompt_lookup, config_only))
    result = SpeculativeResult(
        target=target_name,
        config_only=config_only,
        acceptance_meaningful=not config_only,
        acceptance_convention=ACCEPTANCE_CONVENTION,
        max_new_tokens=max_new_tokens,
        prompt_set_version=prompt_set.version or None,
        draft_memory=_draft_memory(draft, prompt_lookup),
        sweeps=[],
        best_k=[],
        verify_cost=[p for b in batch_sizes for p in bench.verify_cost(ks, b, tick)],
    )
    if not config_only:  # random weights: acceptance and speedup would be noise
        result.sweeps = bench.sweeps(ks, batch_sizes, prompt_lookup, tick)
        result.best_k = best_k(result.sweeps)
        result.confirmations = bench.confirm(result.sweeps, prompt_lookup, tick)
        _add_trace(result, bench, target_tokenizer, prompt_set.prompts, trace_k)
    result.finding = finding(result)
    result.timing_note = timing_note(result)
    result.warnings = warnings_for(result)
    return result


def run_plan(
    target: Any,
    target_tokenizer: Any | None,
    draft: Draft | tuple[Any, Any, str] | None,
    plan: SpeculativePlan,
    **options: Any,
) -> SpeculativeResult:
    """`run_speculative` with the sizes of a `make_plan` plan; `options` as there."""
    return run_speculative(
        target,
        target_tokenizer,
        draft,
        ks=plan.ks,
        batch_sizes=plan.batch_sizes,
        max_new_tokens=plan.max_new_tokens,
        prompts=plan.prompts,
        warmup=plan.warmup,
        repeats=plan.repeats,
        **options,
    )


def _draft_memory(draft: Draft | None, prompt_lookup: bool) -> list[DraftMemory]:
    # torch: speculative.drafting imports torch; kept out of the site's imports
    from profiling.speculative.drafting import draft_memory

    found = [draft_memory(draft.model, draft.name)] if draft else []
    return found + ([draft_memory(None, PROMPT_LOOKUP)] if prompt_lookup else [])


def _check_draft(target_tokenizer: Any | None, draft: Draft, config_only: bool) -> None:
    # torch: speculative.drafting imports torch; kept out of the site's imports
    from profiling.speculative.drafting import TokenizerMismatch, check_tokenizers

    if target_tokenizer is not None and draft.tokenizer is not None:
        check_tokenizers(target_tokenizer, draft.tokenizer, draft.name)
    elif (target_tokenizer is None) != (draft.tokenizer is None) or not config_only:
        raise TokenizerMismatch(
            f"cannot check that draft {draft.name!r} shares the target's tokenizer: "
            "the target or the draft has no tokenizer"
        )


def _vocab_size(model: Any) -> int:
    return int(model.config.get_text_config(decoder=True).vocab_size)


def _eos_ids(model: Any) -> list[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


def _units(
    ks: list[int], batches: list[int], draft: Draft | None, lookup: bool, config_only: bool
) -> int:
    drafts = 0 if config_only else int(draft is not None) + int(lookup)
    confirmations = len(batches) if drafts else 0
    return len(batches) * (1 + drafts * len(ks)) + confirmations


class _Bench:
    """The loaded models and the prompt ids one experiment run works on."""

    def __init__(
        self,
        target: Any,
        draft: Draft | None,
        prompt_ids: list[list[int]],
        max_new_tokens: int,
        clock: Clock,
        warmup: int,
        repeats: int,
    ) -> None:
        self.target, self.draft, self.prompt_ids = target, draft, prompt_ids
        self.max_new_tokens, self.clock = max_new_tokens, clock
        self.warmup, self.repeats = warmup, repeats
        self.eos = _eos_ids(target)
        self.compiled: dict[str, Any] = {}  # the target's compiled forward, as the baseline's
        # torch: speculative.sweep imports torch; kept out of the site's imports
        from profiling.speculative.sweep import Timings

        self.timings = Timings(True, warmup, repeats)

    def verify_cost(
        self, ks: list[int], batch_size: int, tick: Callable[[str], None]
    ) -> list[VerifyCostPoint]:
        # torch: speculative.sweep and .verify_cost import torch; kept out of the site's imports
        from profiling.speculative.sweep import batches_of
        from profiling.speculative.verify_cost import verify_cost_curve

        batch = batches_of(self.prompt_ids, batch_size)[0]
        draft_model = self.draft.model if self.draft else None
        # Single passes are short: take more samples than a whole-set run needs.
        repeats = max(5, 2 * self.repeats)
        points = verify_cost_curve(
            self.target, draft_model, batch, ks, clock=self.clock, repeats=repeats,
            compiled=self.compiled,
        )  # fmt: skip
        tick(f"verify cost at batch {batch_size}")
        return points

    def drafters(self, lookup: bool) -> list[tuple[str, Callable[[int], Any]]]:
        # torch: speculative.drafting imports torch; kept out of the site's imports
        from profiling.speculative.drafting import ModelDrafter, PromptLookupDrafter

        found: list[tuple[str, Callable[[int], Any]]] = []
        if self.draft is not None:
            model, name = self.draft.model, self.draft.name
            found.append((name, lambda b: ModelDrafter(model, name, b)))
        if lookup:
            found.append((PROMPT_LOOKUP, lambda b: PromptLookupDrafter()))
        return found

    def sweeps(
        self, ks: list[int], batch_sizes: list[int], lookup: bool, tick: Callable[[str], None]
    ) -> list[SweepPoint]:
        # torch: speculative.sweep imports torch; kept out of the site's imports
        from profiling.speculative.sweep import SetDecoder, batches_of, sweep_point

        points = []
        for batch_size in batch_sizes:
            batches = batches_of(self.prompt_ids, batch_size)
            decoder = SetDecoder(self.target, batches, self.max_new_tokens, self.eos, self.clock)
            named = [(name, k, factory) for name, factory in self.drafters(lookup) for k in ks]
            timed, baseline = self.timings.time_all(
                decoder,
                [(f, k) for _, k, f in named],
                lambda message, b=batch_size: tick(f"batch {b}, every draft and K: {message}"),
            )
            for (name, k, _), spec in zip(named, timed, strict=True):
                points.append(sweep_point(
                    name, k, batch_size, spec, baseline, decoder, self.timings.paired
                ))  # fmt: skip
        return points

    def confirm(
        self, sweeps: list[SweepPoint], lookup: bool, tick: Callable[[str], None]
    ) -> list[SweepPoint]:
        """Each batch size's fastest point timed again: selection and judgement on
        separate samples (the target's own timing too), so the best of several noisy
        points is not a win by luck; with CONFIRM_FACTOR times the sweep's repeats, since
        this timing alone decides the recommendation."""
        # torch: speculative.sweep imports torch; kept out of the site's imports
        from profiling.speculative.sweep import SetDecoder, Timings, batches_of, sweep_point

        sweep = self.timings
        judge = Timings(sweep.paired, sweep.warmup, sweep.repeats * budget.CONFIRM_FACTOR)
        factories = dict(self.drafters(lookup))
        out = []
        for batch_size in sorted({p.batch_size for p in sweeps}):
            best = max((p for p in sweeps if p.batch_size == batch_size), key=lambda p: p.speedup)
            batches = batches_of(self.prompt_ids, batch_size)
            decoder = SetDecoder(self.target, batches, self.max_new_tokens, self.eos, self.clock)
            timed, baseline = judge.time(decoder, factories[best.draft], best.k)
            out.append(sweep_point(
                best.draft, best.k, batch_size, timed, baseline, decoder, judge.paired
            ))  # fmt: skip
            tick(f"{best.draft}, K={best.k}, batch {batch_size} again: {out[-1].speedup:.2f}x")
        return out

    def trace(self, name: str, k: int, prompt_index: int) -> Any:
        # torch: speculative.loop imports torch; kept out of the site's imports
        from profiling.speculative.loop import speculative_generate

        factory = dict(self.drafters(name == PROMPT_LOOKUP))[name]
        run = speculative_generate(
            self.target,
            [self.prompt_ids[prompt_index]],
            self.max_new_tokens,
            drafter=factory(1),
            k=k,
            eos_token_ids=self.eos,
            clock=self.clock,
        )
        return run.steps[0]


def _add_trace(
    result: SpeculativeResult,
    bench: _Bench,
    tokenizer: Any | None,
    prompts: list[str],
    trace_k: int | None,
) -> None:
    # torch: speculative.sweep imports torch; kept out of the site's imports
    from profiling.speculative.sweep import trace_steps

    if not result.sweeps:
        return
    name = result.sweeps[0].draft  # the draft model when there is one
    k = trace_k or best_at(result.best_k, name, 1, result.sweeps[0].k)
    result.trace = trace_steps(bench.trace(name, k, TRACE_PROMPT), tokenizer)
    result.trace_draft, result.trace_k, result.trace_prompt = name, k, prompts[TRACE_PROMPT]


# -- wiring into the runner -------------------------------------------------------


def load_draft(context: ExperimentContext, name: str) -> Draft:
    """Load draft `name` like the target (same device, dtype, roots and security checks)."""
    # torch: model.loading imports torch; kept out of the site's imports
    from profiling.model.loading import load

    config = context.config.replace(model=name, source="auto")
    loaded = load(config, context.device, context.dtype)
    return Draft(loaded.model, loaded.tokenizer, name)


def run_for_context(
    context: ExperimentContext,
    *,
    draft_name: str | None = None,
    ks: list[int] | None = None,
    prompt_lookup: bool = True,
) -> SpeculativeResult:
    """The experiment for a context, with the draft, K values and prompt lookup given.

    The draft defaults to the target's known draft (`demo` -> `demo-draft`);
    without one only prompt lookup runs. Sizes follow `make_plan` from the
    config's quick flag and workload; `ks` overrides the K sweep.
    """
    loaded, config = context.loaded, context.config
    name = draft_name or default_draft_name(loaded.info.name)
    draft = load_draft(context, name) if name else None
    plan = make_plan(config.quick, config.workload.concurrency, config.workload.output_tokens)
    if ks:
        plan.ks = list(ks)
    drafts = 0 if loaded.info.config_only else int(draft is not None) + int(prompt_lookup)
    costed = budget.for_context(context, plan, drafts)
    result = run_plan(
        loaded.model,
        loaded.tokenizer,
        draft,
        plan,
        prompt_lookup=prompt_lookup,
        device=context.device,
        progress=context.progress,
        config_only=loaded.info.config_only,
        clock=context.clock,
        target_name=loaded.info.name,
        compiled=context.compiled,
    )
    record(result, costed, context.budget_s, "the sweep")
    return result


def run_technique(context: ExperimentContext) -> SpeculativeResult:
    """The experiment as the registry calls it: the draft, K values and prompt lookup the
    config asks for."""
    config = context.config
    return run_for_context(
        context, draft_name=config.draft, ks=config.spec_ks or None,
        prompt_lookup=config.prompt_lookup,
    )  # fmt: skip
