"""One profiling run, end to end.

config → pick device → load → weights and KV bytes → baseline sweeps →
fit check → verdict → optional experiments → Profile. Progress fractions
are of the whole run, each phase's share in proportion to its planned work
(`plan_spans`), so the bar moves at about the same speed through every phase.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from profiling.advice.build import advise_profile, profile_predictions
from profiling.advice.fleet import fleet_of
from profiling.advice.job_conversations import attach_all, profile_chats
from profiling.baseline import plan as baseline_plan
from profiling.baseline import sweeps as baseline
from profiling.config import ConfigError, ProfileConfig
from profiling.engine.engine_verdict import engine_verdict
from profiling.engine.for_profile import run_for_profile
from profiling.errors import OutOfMemory, ProfilingError, is_out_of_memory
from profiling.measure import bandwidth, environment, hardware, timing
from profiling.measure.environment import device_description
from profiling.measure.progress import Progress, no_progress, span
from profiling.measure.resident import set_aside
from profiling.measure.timing import Clock
from profiling.model import loading, memory
from profiling.model.shapes import Shapes, shapes_or_none
from profiling.profile import Profile
from profiling.projection.fit import Footprint, activation_bytes, fit_check
from profiling.projection.verdict import verdict
from profiling.results import FitCheck, MemoryResult
from profiling.technique_kit.context import ExperimentContext
from profiling.technique_type import Technique
from profiling.techniques import technique, techniques
from profiling.units import size

# Planned work in seconds of a quick demo run on two CPU cores (see Technique.work);
# only the ratios matter. The last 1 % is the advice and the result's assembly.
LOAD_WORK, MEMORY_WORK, BASELINE_WORK = 2.0, 0.5, 2.0
ENGINE_WORK = 60.0  # server starts dominate: minutes, against seconds for the rest
EXPERIMENTS_END = 0.99


def plan_spans(experiments: list[str], engine: bool = False) -> dict[str, tuple[float, float]]:
    """Each phase's share of the bar, in proportion to its planned work: "load",
    "memory", "baseline", every experiment by name in the order they run, then
    "engine" when the engine is measured too."""
    parts = [("load", LOAD_WORK), ("memory", MEMORY_WORK), ("baseline", BASELINE_WORK)]
    parts += [(name, _technique(name).work) for name in experiments]
    parts += [("engine", ENGINE_WORK)] if engine else []
    total = sum(work for _, work in parts)
    spans, start = {}, 0.0
    for name, work in parts:
        end = start + EXPERIMENTS_END * work / total
        spans[name] = (start, end)
        start = end
    return spans


def run_profile(
    config: ProfileConfig, progress: Progress | None = None, clock: Clock | None = None
) -> Profile:
    """Measure `config.model` on this machine; raises ProfilingError or ConfigError.

    `clock` overrides the device's clock (tests inject a fake one).
    """
    config.validate()
    experiments = {name: _technique(name) for name in config.experiments}
    target_gpu = target_gpu_of(config)
    try:
        return _run(config, progress or no_progress, clock, target_gpu, experiments)
    except (ProfilingError, ConfigError):
        raise
    except Exception as exc:
        if is_out_of_memory(exc):
            raise OutOfMemory(
                f"ran out of memory while profiling {config.model}: try a smaller "
                "concurrency or context, a smaller dtype, or a GPU with more memory"
            ) from exc
        raise


def target_gpu_of(config: ProfileConfig) -> hardware.GPU | None:
    """The catalog GPU the user deploys on, if they named one."""
    kind = config.hardware.gpu_kind
    if not kind:
        return None
    try:
        return hardware.lookup(kind)
    except hardware.UnknownGPU as exc:
        raise ConfigError(str(exc)) from None


@dataclass
class _Run:
    """What every phase of a run after the load reads: the config, the device and dtype
    picked, the model loaded, the clock, and the progress bar's spans."""

    config: ProfileConfig
    progress: Progress
    clock: Clock
    device: str
    dtype: str
    loaded: Any
    spans: dict[str, tuple[float, float]]
    phases: Phases


@dataclass
class _Measured:
    """The memory phase's and the baseline's figures."""

    weights: int
    by_dtype: dict[str, int]
    kv_measured: int
    kv_computed: int
    local_gpu: hardware.GPU | None
    bandwidth: Any  # `profiling.measure.bandwidth.measure`'s
    subject: Any  # the baseline's `Subject`
    base: Any  # the baseline's result


def _run(
    config: ProfileConfig,
    progress: Progress,
    clock: Clock | None,
    target_gpu: hardware.GPU | None,
    experiments: dict[str, Technique],
) -> Profile:
    started = environment.utc_now()
    phases = Phases()
    busy = busy_machine_warning()
    device = loading.pick_device(config.device)
    dtype = loading.pick_dtype(config.dtype, device)
    clock = clock or timing.clock_for(device)
    torch.manual_seed(config.seed)
    spans = plan_spans(list(experiments), engine=bool(config.engine))
    loaded = loading.load(config, device, dtype, span(progress, *spans["load"]))
    phases.done("load")
    run = _Run(config, progress, clock, device, dtype, loaded, spans, phases)

    measured = _measure(run)
    # Read from the config once: the fit check, the parallel plans and the advice use them.
    loaded.info.shapes = shapes_or_none(loaded.model.config.to_dict())
    fit = _fit(run, measured, target_gpu)
    profile = _profile(run, measured, fit, started)
    if busy and device == "cpu":
        profile.warnings.append(busy)
    chats = _experiments_and_engine(run, profile, experiments, measured, fit)
    # The prompt sample (up to 16 MiB) and the conversation file (up to 8 MiB) have been
    # read; the result keeps their figures and the file's name, not a second copy.
    profile.config = config.replace(prompt_sample=[], conversations="")
    attach_advice(profile, loaded.model.config.to_dict())
    if chats is not None:
        attach_all(profile, measured.local_gpu, bandwidth.host_to_device(device), loaded, device,
                   clock, chats)  # fmt: skip
    profile.phase_seconds = phases.seconds
    profile.environment.finished_at = environment.utc_now()
    progress("done", 1.0, profile.verdict.summary if profile.verdict else "profile complete")
    return profile


def _measure(run: _Run) -> _Measured:
    """The memory phase (weight bytes, the KV cache per token, the copy and read
    bandwidths) and the baseline sweeps."""
    config, loaded, device, dtype = run.config, run.loaded, run.device, run.dtype
    run.progress(
        "memory", run.spans["memory"][0], "counting weight bytes and measuring the KV cache"
    )
    weights, by_dtype = memory.weights_bytes(loaded.model)
    dtype_bytes = getattr(torch, dtype).itemsize
    kv_computed = memory.kv_bytes_per_token_computed(loaded.model.config, dtype_bytes)
    kv_measured = memory.kv_bytes_per_token_measured(loaded.model, device)
    local_gpu = _local_gpu(device)
    measured = bandwidth.measure(device)
    subject = baseline.Subject(
        loaded.model,
        loaded.tokenizer,
        loaded.info,
        device,
        dtype,
        weights,
        kv_measured,
        local_gpu,
        config.seed,
        copy_bandwidth=measured.copy_bytes_per_second,
    )
    plan = baseline_plan.make_plan(
        config.workload, config.quick, loaded.info.max_position_embeddings
    )
    base = baseline.run_baseline(
        subject, plan, run.clock, span(run.progress, *run.spans["baseline"])
    )
    run.phases.done("baseline")
    return _Measured(weights, by_dtype, kv_measured, kv_computed, local_gpu, measured, subject,
                     base)  # fmt: skip


def _fit(run: _Run, m: _Measured, target_gpu: hardware.GPU | None) -> FitCheck | None:
    """The fit check on the GPU the user deploys on, else on the local one (None on CPU
    without a target)."""
    config = run.config
    fit_gpu, count = target_gpu or m.local_gpu, config.hardware.gpu_count
    if not fit_gpu:
        return None
    peak = activation_bytes(run.loaded.info.shapes, run.dtype, count)
    return fit_check(Footprint(m.weights, m.kv_measured, peak), config.workload, fit_gpu, count,
                     config.hardware.serving_engine)  # fmt: skip


def _profile(run: _Run, m: _Measured, fit: FitCheck | None, started: Any) -> Profile:
    config, loaded, base = run.config, run.loaded, m.base
    kv_measured, kv_computed = m.kv_measured, m.kv_computed
    profile = Profile(
        config=config,
        model=loaded.info,
        environment=environment.collect(run.device, run.dtype, started),
        memory=_memory_result(m.weights, m.by_dtype, kv_measured, kv_computed, base, fit),
        prefill=base.prefill,
        decode=base.decode,
        verdict=verdict(base.prefill, base.decode, config.workload, fit),
        warnings=_warnings(config, loaded, run.device, kv_measured, kv_computed, fit)
        + base.warnings,
    )
    profile.environment.copy_bandwidth_bytes_per_second = m.bandwidth.copy_bytes_per_second
    profile.environment.read_bandwidth_bytes_per_second = m.bandwidth.read_bytes_per_second
    return profile


def _experiments_and_engine(
    run: _Run,
    profile: Profile,
    experiments: dict[str, Technique],
    m: _Measured,
    fit: FitCheck | None,
) -> Any:
    """The optional experiments, then the engine where the config asks for it; the
    conversations the profile reads (None without any)."""
    config, loaded, device = run.config, run.loaded, run.device
    # Files the experiments leave for the engine (a GPTQ checkpoint), only when it runs.
    with _artifacts_dir(config) as folder:
        artifacts: dict[str, str] = {}
        _run_experiments(run, profile, experiments, folder, artifacts, m.subject.compiled)
        chats = profile_chats(profile, loaded.tokenizer)  # read once, for all three uses
        if config.engine:
            engine_progress = span(run.progress, *run.spans["engine"])
            replayed = chats.conversations if chats else None
            with set_aside(loaded.model, device):  # the engine loads its own copy
                profile.engine = run_for_profile(
                    config, loaded, device, run.dtype, engine_progress, artifacts, replayed
                )
            profile.warnings += profile.engine.failures
            _prefer_engine_verdict(profile, fit)
            run.phases.done("engine")
    return chats


def _artifacts_dir(config: ProfileConfig) -> Any:
    if not config.engine:
        return contextlib.nullcontext(None)
    return tempfile.TemporaryDirectory(prefix="advisor-artifacts-")


def _prefer_engine_verdict(profile: Profile, fit: FitCheck | None) -> None:
    """The engine's figures at the user's workload win over the eager sweep's."""
    served = engine_verdict(profile.engine, profile.config.workload, fit)
    if served is not None:
        profile.eager_verdict, profile.verdict = profile.verdict, served


def attach_advice(profile: Profile, model_config: dict[str, Any]) -> None:
    """Set `profile.advice` and `profile.predictions` from the measurements (pure arithmetic),
    on the shapes the run read (`model_config` again only to say why they are missing).

    A failure here must not cost the measurements: it becomes a warning.
    """
    try:
        shapes = profile.model.shapes or Shapes.from_config(model_config)
        profile.model.shapes = shapes
        profile.predictions = profile_predictions(profile, shapes)
        profile.advice = advise_profile(profile, shapes) if profile.verdict else None
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        profile.warnings.append(f"advice and predictions could not be computed: {exc!r}")
    if profile.model.shapes is not None:
        attach_fleet(profile, profile.model.shapes)


def attach_fleet(profile: Profile, shapes: Any) -> None:
    """Set `profile.fleet` for the job's target load, if it has one; a failure is a
    warning, never the measurements' loss."""
    try:
        profile.fleet = fleet_of(profile, shapes)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        profile.warnings.append(f"the fleet could not be sized: {exc!r}")


def busy_machine_warning() -> str | None:
    """A warning when other work already keeps the CPUs busy (load average)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not on every platform
        return None
    cores = os.cpu_count() or 1
    if load < 0.5 * cores:
        return None
    return (
        f"the machine was busy before the run (load average {load:.1f} on {cores} cores): "
        "CPU timings are slower and noisier than on an idle machine"
    )


def _local_gpu(device: str) -> hardware.GPU | None:
    if not device.startswith("cuda"):
        return None

    return hardware.match_device_name(device_description(device)[0])


def _memory_result(
    weights: int,
    by_dtype: dict[str, int],
    kv_measured: int,
    kv_computed: int,
    base: Any,
    fit: FitCheck | None,
) -> MemoryResult:
    return MemoryResult(
        weights_bytes=weights,
        weights_bytes_by_dtype=by_dtype,
        kv_cache_bytes_per_token=kv_measured,
        kv_cache_bytes_per_token_computed=kv_computed,
        peak_prefill_bytes=base.peak.peak_bytes,
        peak_prefill_method=base.peak.method,
        peak_prefill_prompt_tokens=base.peak_prompt_tokens,
        peak_prefill_batch_size=base.peak_batch_size,
        nvml_used_bytes=base.peak.nvml_used_bytes,
        fit=fit,
    )


# A full profile on one GPU should fit this (load, baseline and every experiment).
# Each experiment gets the time left, shared by the registry's work weights of the
# experiments still to run; the speculative sweep trims its plan to its share.
PROFILE_BUDGET_S = 600.0


def budget_share(device: str, elapsed_s: float, name: str, still_to_run: list[str]) -> float | None:
    """Seconds experiment `name` may take, or None where nothing is trimmed (CPU)."""
    if not device.startswith("cuda"):
        return None
    weights = {n: t.work if (t := technique(n)) else 0.0 for n in still_to_run}
    total = sum(weights.values()) or 1.0
    return max(0.0, PROFILE_BUDGET_S - elapsed_s) * weights.get(name, 0.0) / total


def _run_experiments(
    run: _Run,
    profile: Profile,
    experiments: dict[str, Technique],
    artifacts_dir: str | None,
    artifacts: dict[str, str],
    compiled: dict[str, Any],
) -> None:
    names, device, phases = list(experiments), run.device, run.phases
    for i, (name, measured) in enumerate(experiments.items()):
        elapsed = phases.elapsed()
        context = ExperimentContext(
            profile.config,
            run.loaded,
            device,
            run.dtype,
            run.clock,
            span(run.progress, *run.spans[name]),
            profile,
            artifacts_dir,
            artifacts,
            budget_share(device, elapsed, name, names[i:]),
            compiled,
        )
        aside = set_aside(run.loaded.model, device) if measured.own_weights else nullcontext()
        with aside:
            assert measured.run is not None  # _technique() gave only those with one
            result = measured.run(context)
            profile.experiments[name] = result
        for other in techniques():  # what this experiment measured for another technique
            if other.measured_by == name:
                profile.experiments[other.name] = getattr(result, other.name, None)
        planned = getattr(result, "planned_seconds", None)
        if planned is not None:
            profile.planned_seconds[name] = planned
        phases.done(name)


def _technique(name: str) -> Technique:
    """The registered technique with an experiment named `name`; a ConfigError if this
    version has none."""
    found = technique(name)
    if found is None or not found.run_path:
        raise ConfigError(f"experiment {name} is not available in this version")
    return found


class Phases:
    """Wall time of each phase of a run, in the order they ran (seconds, 0.1 s)."""

    def __init__(self) -> None:
        self._now = time.monotonic
        self._last = self._started = self._now()
        self.seconds: dict[str, float] = {}

    def elapsed(self) -> float:
        return self._now() - self._started

    def done(self, name: str) -> None:
        now = self._now()
        self.seconds[name] = round(now - self._last, 1)
        self._last = now


def _warnings(
    config: ProfileConfig,
    loaded: Any,
    device: str,
    kv_measured: int,
    kv_computed: int,
    fit: FitCheck | None,
) -> list[str]:
    out = []
    placed = set((getattr(loaded.model, "hf_device_map", None) or {}).values())
    if len(placed) > 1:
        out.append(
            f"the weights did not fit one GPU: their layers were spread over {len(placed)} "
            "devices (device_map), which a step passes through one after another, so "
            "prefill and decode times are for that split, not for tensor parallelism"
        )
    info = loaded.info
    if info.config_only:
        out.append(
            "config-only model: random weights, so times and memory are real but "
            "generated text would be meaningless"
        )
    if loaded.tokenizer is None and not info.config_only:
        out.append("the model has no tokenizer: prompts were random token ids")
    if device == "cpu":
        out.append(
            "measured on CPU: times are far slower than on a GPU and no "
            "fraction-of-peak figures are given"
        )
    positions = info.max_position_embeddings
    if positions and config.workload.context_tokens > positions:
        out.append(
            f"the workload's {config.workload.context_tokens} tokens of context exceed "
            f"the model's {positions} positions: the sweeps stop at {positions}"
        )
    if kv_measured != kv_computed:
        out.append(
            f"the KV cache measured {kv_measured} bytes per token but the formula gives "
            f"{kv_computed}: the model may use sliding-window, shared or compressed KV "
            "layers; the measured figure is used"
        )
    if fit is not None and not fit.fits:
        out.append(
            f"weights plus KV cache need {size(fit.required_bytes)} but "
            f"{fit.gpu_count}× {fit.gpu_kind} leave {size(fit.available_bytes)}"
        )
    return out
