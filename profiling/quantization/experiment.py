"""The quantization experiment: the same model at several precisions, side by side.

Each precision of `config.precisions` (the first is the reference; empty
means the run's dtype + int8 + int4) is loaded fresh from the run's source
by its method (`profiling.quantization.methods.METHODS`), measured, and
freed before the next. Every quantized precision keeps the LM head and the
token embeddings in the reference precision (`options.DEFAULT_KEPT`), as
serving engines ship quantized checkpoints; each of `config.quant_variants`
is measured beside it as its own variant, one part changed ("int8 · lm_head
quantized", "int8 · edge_blocks kept"). Per variant: the real bytes of the loaded
weights (quantized tensors counted by what they hold), the memory peak of
generation, TTFT and decode time per token at batch 1 and at the user's
concurrency (warm-ups, repeats, the device's clock; raw samples kept), and,
for real weights, quality against the reference on the fixed prompt set and
evaluation text (see `QUALITY_CONVENTION`). The reference's own logits are
computed once and it is compared with itself through the same code, so it
shows agreement 1.0, KL 0 and its own perplexity exactly.

A method that cannot run here is reported `not_available` with the reason;
running out of memory is `does_not_fit`; any other error is `failed` with a
short reason; the job always goes on to the next variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling.config import ProfileConfig
from profiling.errors import is_out_of_memory, one_line
from profiling.measure.cost import record
from profiling.measure.progress import Progress
from profiling.measure.timing import Clock, clock_for
from profiling.model.prompts import PromptSet, load_prompts
from profiling.options import DEFAULT_KEPT
from profiling.quantization.report import finding, warnings_for
from profiling.quantization.results import (
    DOES_NOT_FIT,
    FAILED,
    MEASURED,
    NOT_AVAILABLE,
    QUALITY_CONVENTION,
    QuantizationResult,
    QuantVariant,
)
from profiling.technique_kit.context import ExperimentContext

PHASE = "quantization"
DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
QUICK_PROMPTS, QUICK_NEW_TOKENS, FULL_NEW_TOKENS = 6, 16, 48
QUICK_EVAL_TOKENS, FULL_EVAL_TOKENS = 256, 1024
QUICK_MAX_BATCH, FULL_MAX_BATCH = 4, 16


def default_precisions(run_dtype: str) -> list[str]:
    """The run's own dtype as the reference, then int8 and int4."""
    return [DTYPE_NAMES.get(run_dtype, "fp32"), "int8", "int4"]


@dataclass
class QuantPlan:
    """How much one run measures."""

    precisions: list[str]
    variants: list[str]  # options.QUANT_VARIANTS names
    prompts: PromptSet
    max_new_tokens: int
    eval_tokens: int
    batch_size: int  # the user's concurrency, capped
    warmup: int = 1
    repeats: int = 3
    calibration_samples: int = 32


def make_plan(config: ProfileConfig, run_dtype: str) -> QuantPlan:
    quick = config.quick
    prompts = load_prompts()
    if quick:
        prompts = PromptSet(prompts.version, prompts.prompts[:QUICK_PROMPTS])
    cap = QUICK_MAX_BATCH if quick else FULL_MAX_BATCH
    new_tokens = QUICK_NEW_TOKENS if quick else FULL_NEW_TOKENS
    return QuantPlan(
        precisions=list(config.precisions) or default_precisions(run_dtype),
        variants=list(config.quant_variants),
        prompts=prompts,
        max_new_tokens=max(2, min(config.workload.output_tokens, new_tokens)),
        eval_tokens=QUICK_EVAL_TOKENS if quick else FULL_EVAL_TOKENS,
        batch_size=min(max(1, config.workload.concurrency), cap),
        repeats=3 if quick else 5,  # a median of 3 already drops one outlier
        calibration_samples=16 if quick else 64,
    )


@dataclass
class Spec:
    """One variant to measure: a precision, and the one part changed from the default
    (`options.DEFAULT_KEPT` kept), if any."""

    precision: str
    variant: str = ""  # a name of options.QUANT_VARIANTS, or "" for the default

    @property
    def quantized_parts(self) -> list[str]:
        """Default-kept parts this variant quantizes."""
        return [self.variant] if self.variant in DEFAULT_KEPT else []

    @property
    def kept_parts(self) -> list[str]:
        """The parts left in the reference precision."""
        kept = [part for part in DEFAULT_KEPT if part not in self.quantized_parts]
        return kept + ([self.variant] if self.variant and self.variant not in DEFAULT_KEPT else [])

    @property
    def name(self) -> str:
        if not self.variant:
            return self.precision
        done = "quantized" if self.variant in DEFAULT_KEPT else "kept"
        return f"{self.precision} · {self.variant} {done}"


def variant_specs(plan: QuantPlan) -> list[Spec]:
    # torch: quantization.methods imports torch; kept out of the site's imports
    from profiling.quantization.methods import METHODS

    specs = []
    for precision in plan.precisions:
        specs.append(Spec(precision))
        if METHODS[precision].quantized:
            specs += [Spec(precision, variant) for variant in plan.variants]
    return specs


def run_quantization(
    config: ProfileConfig,
    loaded: Any,
    device: str,
    run_dtype: str,
    plan: QuantPlan,
    *,
    clock: Clock | None = None,
    progress: Progress | None = None,
    save_dir: str | None = None,
    saved: dict[str, str] | None = None,
) -> QuantizationResult:
    """Measure every variant of `plan` for the model of `config` (already `loaded` once,
    which gives the module layout, the tokenizer and whether the weights are random).

    With `save_dir`, each measured checkpoint an engine can serve (GPTQ) is saved there
    and its folder put in `saved` under the variant's name."""
    # torch: quantization.measure imports torch; kept out of the site's imports
    from profiling.quantization.measure import Job

    job = Job(config, loaded, device, run_dtype, plan, clock or clock_for(device))
    job.save_dir = save_dir
    result = _measure_all(job, plan, loaded, progress)
    if saved is not None:
        saved.update(job.saved)
    return result


def _measure_all(job: Any, plan: QuantPlan, loaded: Any, progress: Progress | None) -> Any:
    device = job.device
    specs = variant_specs(plan)
    variants = []
    for i, spec in enumerate(specs):
        _report(progress, i / len(specs), f"{spec.name}: loading and measuring")
        variants.append(_one(job, spec))
        _report(progress, (i + 1) / len(specs), f"{spec.name}: {_status_text(variants[-1])}")
    result = QuantizationResult(
        model=loaded.info.name,
        config_only=loaded.info.config_only,
        quality_meaningful=job.quality_meaningful,
        quality_convention=QUALITY_CONVENTION,
        reference=job.reference_name or specs[0].name,
        prompt_set_version=plan.prompts.version or None,
        eval_text_tokens=len(job.eval_ids) if job.quality_meaningful else 0,
        max_new_tokens=plan.max_new_tokens,
        variants=variants,
    )
    result.finding = finding(result)
    result.warnings = warnings_for(result, device) + job.warnings
    if job.reference_name not in (None, specs[0].name):
        result.warnings.append(
            f"{specs[0].name} could not be measured, so {job.reference_name} is the reference"
        )
    return result


def _one(job: Any, spec: Spec) -> QuantVariant:
    # torch: quantization.methods imports torch; kept out of the site's imports
    from profiling.quantization.methods import NotAvailable

    variant = QuantVariant(name=spec.name, precision=spec.precision, status=MEASURED)
    try:
        job.measure(spec, variant)
    except NotAvailable as exc:
        variant.status, variant.reason = NOT_AVAILABLE, str(exc)
    except Exception as exc:  # one variant's failure is a finding; the job goes on
        oom = is_out_of_memory(exc)
        variant.status = DOES_NOT_FIT if oom else FAILED
        variant.reason = ("out of memory: " if oom else f"{type(exc).__name__}: ") + one_line(exc)
    finally:
        job.free()
    return variant


def _status_text(variant: QuantVariant) -> str:
    if variant.status == MEASURED:
        return "measured"
    return f"{variant.status.replace('_', ' ')} ({variant.reason})"


def _report(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(PHASE, min(1.0, fraction), message)


# -- wiring into the runner -------------------------------------------------------


def runnable_specs(context: ExperimentContext, plan: QuantPlan) -> list[Spec]:
    """The variants whose method can run on this worker (the rest end at once as "not
    available", so they cost nothing)."""
    # torch: quantization.methods imports torch; kept out of the site's imports
    from profiling.quantization.methods import METHODS, Request

    loaded = context.loaded
    request = Request(context.config, context.device, context.dtype,
                      config_only=loaded.info.config_only, tokenizer=loaded.tokenizer)  # fmt: skip
    specs = variant_specs(plan)
    return [s for s in specs if not METHODS[s.precision].unavailable(s.precision, request)]


def run_for_context(context: ExperimentContext) -> QuantizationResult:
    """The experiment as the registry calls it."""
    # torch: quantization.budget imports torch; kept out of the site's imports
    from profiling.quantization import budget

    plan = make_plan(context.config, context.dtype)
    loaded = context.loaded
    with_quality = not loaded.info.config_only and loaded.tokenizer is not None
    quick = make_plan(context.config.replace(quick=True), context.dtype)
    variants = len(runnable_specs(context, plan))
    costed = budget.for_context(context, plan, variants, with_quality, quick)
    result = run_quantization(
        context.config,
        context.loaded,
        context.device,
        context.dtype,
        plan,
        clock=context.clock,
        progress=context.progress,
        save_dir=context.artifacts_dir,
        saved=context.artifacts,
    )
    record(result, costed, context.budget_s, "the comparison")
    return result
