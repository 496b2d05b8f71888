"""The parallel experiment: split work across devices, and split prefill from decode.

B. Model parallelism. Per-device memory of tensor (TP 1, 2, 4, 8) × pipeline
(PP 1, 2, 4) splits, from the loaded model's parameter bytes by module and
the measured KV bytes per token (`profiling.parallel.plans` says what is
split and what is replicated), for the user's concurrency × context, and the
fewest devices of the chosen GPU kind (or of this device) that fit. When
asked (`ProfileConfig.tp_measure`; by default on only where two or more CUDA
GPUs are visible), the model also runs split over that many processes with
torchrun and transformers' tensor parallelism (`profiling.parallel.launch`),
against one process: per-rank weight bytes, prefill and decode step latency
ratios, and a check that logits and greedy tokens equal the whole model's.
A failed run is recorded with its reason and the profile goes on. `basis`
says whether per-device figures were cross-checked by such a run
("measured") or rest on shapes alone ("estimated from shapes"). The model
is always loaded on one device here (the runner does that before any
experiment); a model too large for one device is not loaded across several.

C. Disaggregation. A decode step of the user's concurrency (capped) alone and
with a prefill of the user's prompt joining it (`profiling.parallel.
interference`), and from those and the baseline a split deployment
(`profiling.parallel.disaggregation`): the prefill-to-decode worker ratio and
the KV cache transfer per request over the chosen GPU's link.

Where the result lives: the registry contract stores an experiment's dict
under its own name, and `Profile.to_dict()` puts each stored dict at the top
level. The `parallel` dict holds `plans`, `measured` and `disaggregation`;
the registry's `parallel` entry also stores the same disaggregation dict
under `disaggregation` in `Profile.experiments` (no change to the runner or
to `Profile`), so the JSON has a top-level `disaggregation` key and both
entries round-trip through `Profile.to_dict()` / `from_dict()` exactly.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profiling.measure import hardware
from profiling.measure.cost import record
from profiling.measure.progress import span
from profiling.measure.resident import set_aside
from profiling.parallel import budget, plans
from profiling.parallel.disaggregation import Sizes, disaggregate
from profiling.parallel.interference import measure_interference
from profiling.parallel.launch import TPRequest, run_tp
from profiling.parallel.results import (
    BASIS_ESTIMATED,
    BASIS_MEASURED,
    MeasuredTP,
    ParallelPlan,
    ParallelResult,
    PlanInputs,
)
from profiling.technique_kit.context import ExperimentContext
from profiling.units import size

PHASE = "parallel"
QUICK = {"batch": 4, "prefill": 256, "context": 256, "tp_prompt": 64, "tp_batch": 2}
FULL = {"batch": 32, "prefill": 4096, "context": 4096, "tp_prompt": 256, "tp_batch": 8}
TP_TIMEOUT_S = {True: 300.0, False: 900.0}  # quick, full
TP_REPEATS = {True: 5, False: 10}
INTERFERENCE_WARMUP = {True: 1, False: 2}
INTERFERENCE_REPEATS = {True: 5, False: 10}
PLAN_AGREEMENT = 0.02  # measured per-rank shards within 2 % of the TP plan


def run_for_context(context: ExperimentContext) -> ParallelResult:
    """The experiment as the registry calls it."""
    config, loaded, profile = context.config, context.loaded, context.profile
    progress = context.progress
    progress(PHASE, 0.0, "per-device memory plans")
    gpu, memory, memory_source = _target_memory(config, profile)
    shape = _shape(loaded.model, profile.memory.kv_cache_bytes_per_token, profile.model.shapes)
    kv_tokens = config.workload.concurrency * config.workload.context_tokens
    plan_list = plans.all_plans(shape, kv_tokens, memory, config.hardware.gpu_count)
    inputs = _inputs(shape, config, gpu, memory, memory_source)
    tp_size = resolve_tp_measure(config.tp_measure, context.device)
    # A run that cannot happen here is skipped at once and costs nothing.
    costed_tp = tp_size if tp_size and not _cannot_measure(context.device, tp_size) else 0
    work = _work_plan(context, costed_tp)
    costed = budget.fit(work, profile, context.budget_s)
    share = 0.5 if tp_size else 0.95
    disaggregation = _disaggregation(context, gpu, span(progress, 0.05, share))
    if costed_tp and not work.tp_size:
        measured = MeasuredTP(status="skipped", tp_size=tp_size,
                              reason="left out to fit the profile's time budget")  # fmt: skip
    else:
        measured = _measured(context, tp_size, shape, span(progress, share, 1.0))
    result = ParallelResult(
        basis=BASIS_MEASURED if measured.status == "measured" else BASIS_ESTIMATED,
        inputs=inputs,
        plans=plan_list,
        fewest_devices=plans.fewest_devices(plan_list),
        measured=measured,
        disaggregation=disaggregation,
        notes=_notes(shape),
    )
    result.finding = finding(result)
    result.warnings = warnings_for(result) + disaggregation.warnings
    record(result, costed, context.budget_s, "the parallel experiment")
    progress(PHASE, 1.0, result.finding.split(". ")[0])
    return result


def _work_plan(context: ExperimentContext, tp_size: int) -> budget.WorkPlan:
    config = context.config
    quick = config.quick
    sizes = interference_sizes(
        config.workload, quick, context.profile.model.max_position_embeddings
    )
    prompt, batch, context_tokens = _tp_sizes(config)
    return budget.WorkPlan(
        decode_batch=sizes.decode_batch,
        decode_context=sizes.decode_context,
        prefill_tokens=sizes.prefill_tokens,
        samples=INTERFERENCE_WARMUP[quick] + INTERFERENCE_REPEATS[quick],
        tp_size=tp_size,
        tp_prompt=prompt,
        tp_batch=batch,
        tp_context=context_tokens,
        tp_samples=1 + TP_REPEATS[quick],  # launch.TPRequest's one warm-up
    )


def _tp_sizes(config: Any) -> tuple[int, int, int]:
    """The measured TP run's (prompt tokens, decode batch, decode context)."""
    sizes, workload = QUICK if config.quick else FULL, config.workload
    return (
        min(workload.prompt_tokens, sizes["tp_prompt"]),
        min(workload.concurrency, sizes["tp_batch"]),
        min(workload.context_tokens, sizes["tp_prompt"]),
    )


# -- plans ----------------------------------------------------------------------


def _shape(model: Any, kv_bytes_per_token: int, shapes: Any) -> plans.ModelShape:
    text = model.config.get_text_config(decoder=True)
    heads = text.num_attention_heads
    return plans.shape_of(
        plans.parameters_of(model),
        attention_heads=heads,
        kv_heads=getattr(text, "num_key_value_heads", None) or heads,
        kv_bytes_per_token=kv_bytes_per_token,
        kv_split_by_heads=not getattr(text, "kv_lora_rank", None),
        shapes=shapes,
        dtype=str(model.dtype).removeprefix("torch."),
    )


def _target_memory(config: Any, profile: Any) -> tuple[hardware.GPU | None, int | None, str]:
    """(catalog GPU for links, memory per device, where that memory figure came from)."""
    if config.hardware.gpu_kind:
        gpu = hardware.lookup(config.hardware.gpu_kind)
        return gpu, int(gpu.memory_bytes), "catalog"
    env = profile.environment
    local = hardware.lookup(env.gpu_kind) if env.gpu_kind else None
    if env.device_memory_bytes:
        return local, int(env.device_memory_bytes), f"this device ({env.device})"
    return local, None, "unknown"


def _inputs(
    shape: plans.ModelShape, config: Any, gpu: Any, memory: int | None, source: str
) -> PlanInputs:
    layers = shape.layers
    return PlanInputs(
        weights_bytes=shape.weights_bytes,
        split_weights_bytes=sum(x.split for x in layers),
        kv_projection_bytes=sum(x.kv_proj for x in layers),
        vocab_bytes=shape.embed_bytes + shape.head_bytes,
        replicated_bytes=sum(x.replicated for x in layers) + shape.other_bytes,
        layers=len(layers),
        attention_heads=shape.attention_heads,
        kv_heads=shape.kv_heads,
        kv_bytes_per_token=shape.kv_bytes_per_token,
        kv_split_by_heads=shape.kv_split_by_heads,
        vocab_parallel=True,
        concurrency=config.workload.concurrency,
        context_tokens=config.workload.context_tokens,
        gpu_kind=gpu.key if gpu and config.hardware.gpu_kind else None,
        device_memory_bytes=memory,
        memory_source=source,
        reserve_note=plans.RESERVE_NOTE,
    )


def _notes(shape: plans.ModelShape) -> list[str]:
    notes = [
        "embeddings and the LM head are vocab-parallel under TP (split by vocabulary rows, "
        "as transformers' tensor-parallel plan does); norms and buffers are replicated",
        "the KV cache is split by KV heads under TP, never below one head per device: past "
        "TP = KV heads, each device holds one head and the heads are replicated",
        "per-device bytes are for the largest pipeline stage; the first stage also holds the "
        "embeddings and the last the LM head",
        plans.RESERVE_NOTE,
    ]
    if not shape.kv_split_by_heads:
        notes.append("this model caches a latent per layer (MLA): TP replicates it whole")
    return notes


# -- measured tensor parallelism ------------------------------------------------


def resolve_tp_measure(asked: int | None, device: str) -> int:
    """How many TP processes to measure with: `asked`, or by default 2 where two
    or more CUDA GPUs are visible and 0 (off) elsewhere."""
    if asked is not None:
        return asked
    if not device.startswith("cuda"):
        return 0
    # torch: kept out of the site's imports
    import torch

    return 2 if torch.cuda.device_count() >= 2 else 0


def _measured(
    context: ExperimentContext, tp_size: int, shape: plans.ModelShape, progress: Any
) -> MeasuredTP:
    if not tp_size:
        return MeasuredTP(
            status="skipped",
            reason="not asked (set tp_measure, or --tp-measure 2 on the command line; on by "
            "default only with two or more CUDA GPUs)",
        )
    skipped = _cannot_measure(context.device, tp_size)
    if skipped:
        return MeasuredTP(status="skipped", reason=skipped, tp_size=tp_size)
    progress(PHASE, 0.0, f"tensor parallel over {tp_size} processes (torchrun)")
    measured = _launch(context, tp_size)
    if measured.status == "measured":
        predicted = plans.plan(shape, tp_size, 1, 0, None).weights_bytes_per_device
        measured.predicted_weights_bytes_per_rank = predicted
    progress(PHASE, 1.0, f"tensor parallel: {measured.status}")
    return measured


def _cannot_measure(device: str, tp_size: int) -> str:
    if device == "mps":
        return "tensor parallelism needs CPU (gloo) or CUDA (nccl) processes, not MPS"
    if device.startswith("cuda"):
        # torch: kept out of the site's imports
        import torch

        count = torch.cuda.device_count()
        if count < tp_size:
            return f"TP {tp_size} needs {tp_size} CUDA GPUs; {count} visible"
    return ""


def _launch(context: ExperimentContext, tp_size: int) -> MeasuredTP:
    config, quick = context.config, context.config.quick
    prompt, batch, context_tokens = _tp_sizes(config)
    with _model_dir(context.loaded) as path:
        request = TPRequest(
            model_path=str(path),
            tp_size=tp_size,
            device="cuda" if context.device.startswith("cuda") else "cpu",
            dtype=context.dtype,
            prompt_tokens=prompt,
            decode_batch=batch,
            decode_context=context_tokens,
            repeats=TP_REPEATS[quick],
            seed=config.seed,
        )
        # The ranks load their own copies: the reference leaves the GPU meanwhile.
        with set_aside(context.loaded.model, context.device):
            return run_tp(request, TP_TIMEOUT_S[bool(quick)])


@contextlib.contextmanager
def _model_dir(loaded: Any) -> Iterator[Path]:
    """The directory the processes load: the model's own, or (random weights) a
    temporary copy saved from the loaded model, so every rank gets the same weights."""
    path = loaded.path
    if path is not None and not loaded.info.config_only and any(Path(path).glob("*.safetensors")):
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="tp-model-") as tmp:
        loaded.model.save_pretrained(tmp, safe_serialization=True)
        yield Path(tmp)


# -- disaggregation -------------------------------------------------------------


def interference_sizes(workload: Any, quick: bool, max_positions: int | None) -> Sizes:
    """Decode rows at the user's concurrency and mid-generation context, a prefill of
    the user's prompt; capped (more so in quick mode) and within the model's positions."""
    caps = QUICK if quick else FULL
    positions = max_positions or 1 << 20
    context = workload.prompt_tokens + workload.output_tokens // 2
    return Sizes(
        decode_batch=max(1, min(workload.concurrency, caps["batch"])),
        decode_context=max(1, min(context, caps["context"], positions - 2)),
        prefill_tokens=max(1, min(workload.prompt_tokens, caps["prefill"], positions)),
    )


def _disaggregation(context: ExperimentContext, gpu: Any, progress: Any) -> Any:
    config, profile = context.config, context.profile
    sizes = interference_sizes(config.workload, config.quick, profile.model.max_position_embeddings)
    message = (
        f"decode batch {sizes.decode_batch} alone and with a {sizes.prefill_tokens}-token prefill"
    )
    progress(PHASE, 0.0, message)
    measured = measure_interference(
        context.loaded.model,
        decode_batch=sizes.decode_batch,
        decode_context=sizes.decode_context,
        prefill_tokens=sizes.prefill_tokens,
        device=context.device,
        clock=context.clock,
        warmup=INTERFERENCE_WARMUP[config.quick],
        repeats=INTERFERENCE_REPEATS[config.quick],
        seed=config.seed,
        on_sample=lambda i, n: progress(PHASE, i / n, message),
    )
    return disaggregate(
        measured,
        sizes,
        config.workload,
        kv_bytes_per_token=profile.memory.kv_cache_bytes_per_token,
        verdict=profile.verdict,
        gpu=gpu,
    )


# -- finding and warnings -------------------------------------------------------


def _plan_text(plan: ParallelPlan) -> str:
    return f"TP {plan.tp} × PP {plan.pp} ({size(plan.bytes_per_device)} per device)"


def finding(result: ParallelResult) -> str:
    inputs, best = result.inputs, result.fewest_devices
    memory = inputs.device_memory_bytes
    where = f"{inputs.gpu_kind} GPUs" if inputs.gpu_kind else f"devices like {inputs.memory_source}"
    load = f"{inputs.concurrency} requests × {inputs.context_tokens} tokens"
    if memory is None:
        text = f"No device memory is known, so no plan is judged for {load}."
    elif best is None:
        text = f"No plan of up to {max(p.devices for p in result.plans)} {where} holds {load}."
    else:
        text = f"The fewest {where} that hold {load}: {best.devices}, {_plan_text(best)}."
    measured = result.measured
    if measured.status == "measured" and measured.prefill_ratio and measured.decode_ratio:
        same = "equal" if measured.greedy_tokens_match and measured.logits_match else "DIFFER from"
        text += (
            f" Split over {measured.tp_size} {measured.device} processes, each rank holds "
            f"{measured.weights_ratio or 0:.2f}× the weights; prefill takes "
            f"{measured.prefill_ratio:.2f}× and a decode step {measured.decode_ratio:.2f}× the "
            f"single-device time, and the outputs {same} the single-device outputs."
        )
    elif measured.status == "failed":
        text += f" The tensor-parallel run failed: {measured.reason}"
    if result.disaggregation is not None:
        text += " " + result.disaggregation.finding
    return text


def warnings_for(result: ParallelResult) -> list[str]:
    m, out = result.measured, []
    if m.status == "failed":
        out.append(f"tensor-parallel measurement failed: {m.reason}")
    if m.status != "measured":
        return out
    for label, samples in (("TP prefill", m.prefill_seconds), ("TP decode", m.decode_step_seconds)):
        if samples is not None and samples.noisy:
            out.append(f"{label}: noisy (p10-p90 spread {samples.spread:.0%} of the median)")
    shards, storage = max(m.weights_bytes_per_rank), max(m.weights_storage_bytes_per_rank)
    if storage > 1.1 * shards:
        out.append(
            f"each rank's split weights are views into {size(storage)} of loaded "
            f"storage, not the {size(shards)} its shards need: the loader kept the "
            "whole tensors behind some shards on this device"
        )
    predicted = m.predicted_weights_bytes_per_rank
    if predicted and abs(shards - predicted) > PLAN_AGREEMENT * predicted:
        out.append(
            f"measured per-rank weights ({shards:,} bytes) differ from the TP plan's "
            f"{predicted:,}: transformers splits this model differently from the plan's rules"
        )
    if m.device == "cpu":
        out.append(
            "tensor parallelism was measured on CPU processes talking over gloo: the latency "
            "ratios show this machine, not GPUs over NVLink"
        )
    if m.greedy_tokens_match is False or m.logits_match is False:
        out.append("the split model's outputs differ from the single-device outputs")
    return out
