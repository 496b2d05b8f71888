"""A whole profile on a tiny model: contents, JSON round trip, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling import techniques
from profiling.config import ConfigError, Hardware, ProfileConfig, Workload
from profiling.errors import ModelSourceError, OutOfMemory
from profiling.profile import Profile
from profiling.runner import run_profile
from tests.profiling.tiny import save_tiny_llama_dir

# Real profiles of a tiny model.
pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llama_dir(tmp_path_factory.mktemp("runner") / "tiny", max_positions=1024)


def quick_config(model: str, **kw: object) -> ProfileConfig:
    kw.setdefault("workload", Workload(prompt_tokens=128, output_tokens=32, concurrency=4))
    return ProfileConfig(model=model, device="cpu", quick=True, **kw)


@pytest.fixture(scope="module")
def profile(model_dir: Path) -> Profile:
    config = quick_config(str(model_dir), hardware=Hardware(gpu_kind="H100-SXM"))
    return run_profile(config)


def test_a_real_profile_round_trips_through_json(profile: Profile) -> None:
    text = json.dumps(profile.to_dict())
    assert Profile.from_dict(json.loads(text)) == profile


def test_a_profile_has_measured_memory_points_and_a_verdict(profile: Profile) -> None:
    mem = profile.memory
    assert mem.weights_bytes > 0 and mem.weights_bytes_by_dtype == {"float32": mem.weights_bytes}
    kv_bytes = 2 * 2 * 2 * 8 * 4  # K and V × layers × kv heads × head_dim × fp32
    assert mem.kv_cache_bytes_per_token == mem.kv_cache_bytes_per_token_computed == kv_bytes
    assert mem.peak_prefill_method == "rss_delta" and mem.peak_prefill_prompt_tokens == 128
    assert [p.prompt_tokens for p in profile.prefill] == [32, 128]
    # The grid, and the workload's own step: batch 4 at its mean context 128 + 32 / 2.
    assert [(d.batch_size, d.context_tokens) for d in profile.decode] == [
        (1, 64), (1, 144), (4, 64), (4, 144),
    ]  # fmt: skip
    assert all(p.seconds.median > 0 for p in profile.prefill)
    assert profile.verdict is not None and profile.verdict.summary
    assert profile.verdict.interpolated is False  # measured at the workload, not projected
    assert profile.environment.device == "cpu" and profile.environment.dtype == "float32"
    assert profile.environment.started_at <= profile.environment.finished_at


def test_each_phase_records_its_wall_time_in_the_order_it_ran(profile: Profile) -> None:
    from datetime import datetime

    env = profile.environment
    wall = datetime.fromisoformat(env.finished_at) - datetime.fromisoformat(env.started_at)
    assert list(profile.phase_seconds) == ["load", "baseline"]  # no experiment asked
    assert all(s >= 0 for s in profile.phase_seconds.values())
    assert sum(profile.phase_seconds.values()) <= wall.total_seconds() + 1.1  # to the second
    assert profile.time_spent().startswith("load ") and " · baseline " in profile.time_spent()


def test_decode_is_held_against_the_bandwidth_measured_on_the_device(profile: Profile) -> None:
    env = profile.environment
    copy, read = env.copy_bandwidth_bytes_per_second, env.read_bandwidth_bytes_per_second
    assert copy and read and copy > 1e8 and read > 1e8  # any machine moves 100 MB/s
    for point in profile.decode:
        assert point.fraction_of_copy == pytest.approx(point.achieved_bytes_per_second / copy)
        assert point.path == "static" and "compiling" in point.path_reason


def test_a_profile_keeps_the_models_shapes_for_later_projections(profile: Profile) -> None:
    shapes, model = profile.model.shapes, profile.model
    assert shapes is not None and profile.advice is not None
    assert (shapes.num_layers, shapes.hidden_size) == (model.num_layers, model.hidden_size)
    assert shapes.total_params == model.num_parameters


def test_the_fit_check_uses_the_named_gpu(profile: Profile) -> None:
    fit = profile.memory.fit
    assert fit is not None and fit.gpu_kind == "H100-SXM" and fit.fits
    assert profile.verdict.fits is True


def test_without_a_target_gpu_on_cpu_there_is_no_fit_check(model_dir: Path) -> None:
    profile = run_profile(
        quick_config(
            str(model_dir), workload=Workload(prompt_tokens=32, output_tokens=8, concurrency=1)
        )
    )
    assert profile.memory.fit is None and profile.verdict.fits is None
    assert any("CPU" in w for w in profile.warnings)


def test_progress_covers_the_whole_run_in_order(model_dir: Path) -> None:
    seen: list[float] = []
    run_profile(
        quick_config(str(model_dir), workload=Workload(32, 8, 1)),
        progress=lambda phase, fraction, message: seen.append(fraction),
    )
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)


def test_an_unregistered_experiment_is_refused_before_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A job written for a version with quantization, read by one without it.
    config = quick_config("/nonexistent", experiments=["quantization"])
    monkeypatch.setattr(
        techniques, "REGISTRY", [p for p in techniques.REGISTRY if "quantization" not in p]
    )
    with pytest.raises(ConfigError, match="unknown experiment 'quantization'"):
        run_profile(config)


def test_an_unknown_gpu_kind_is_a_config_error(model_dir: Path) -> None:
    with pytest.raises(ConfigError, match="unknown GPU kind"):
        run_profile(quick_config(str(model_dir), hardware=Hardware(gpu_kind="TPU-v9")))


def test_a_missing_model_is_a_model_source_error(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError):
        run_profile(quick_config(str(tmp_path / "missing")))


def test_running_out_of_memory_becomes_out_of_memory(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from profiling.model import memory

    def no_memory(*args: object, **kwargs: object) -> int:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 1 TB")

    monkeypatch.setattr(memory, "kv_bytes_per_token_measured", no_memory)
    with pytest.raises(OutOfMemory):
        run_profile(quick_config(str(model_dir)))


def test_the_bar_gives_each_phase_a_share_in_proportion_to_its_planned_work():
    from profiling.runner import EXPERIMENTS_END, plan_spans
    from profiling.techniques import technique

    spans = plan_spans(["quantization", "speculative"])
    assert list(spans) == ["load", "memory", "baseline", "quantization", "speculative"]
    ends = [end for _, end in spans.values()]
    starts = [start for start, _ in spans.values()]
    assert starts[0] == 0.0 and ends[-1] == pytest.approx(EXPERIMENTS_END)
    assert starts[1:] == pytest.approx(ends[:-1])  # contiguous: the bar never jumps
    width = {name: end - start for name, (start, end) in spans.items()}
    ratio = technique("speculative").work / technique("quantization").work
    assert width["speculative"] / width["quantization"] == pytest.approx(ratio)
    # With experiments to come, the baseline no longer takes the bar to 92 %.
    assert spans["baseline"][1] < 0.5


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: out of memory",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "HIP error: hipErrorOutOfMemory",
        "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory",
    ],
)
def test_every_way_a_device_says_it_is_full_reads_as_out_of_memory(message: str) -> None:
    from profiling.errors import is_out_of_memory

    assert is_out_of_memory(RuntimeError(message))
    assert not is_out_of_memory(RuntimeError("CUDA error: device-side assert triggered"))
    assert not is_out_of_memory(ValueError(message))  # only the runtime's own errors
