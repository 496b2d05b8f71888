"""The baseline sweeps: plans, measured points, cache handling, progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import LlamaForCausalLM

from profiling.baseline import plan as baseline_plan
from profiling.baseline import sweeps as baseline
from profiling.config import Workload
from profiling.measure import decode_path, hardware
from profiling.model.loading import Source, model_info
from profiling.model.memory import weights_bytes
from tests.profiling.tiny import tiny_llama_config

# Models loaded and stepped.
pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]


class FakeClock:
    """Runs the function and says every call took `seconds`."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds
        self.calls = 0

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        self.calls += 1
        return self.seconds


@pytest.fixture(scope="module")
def subject() -> baseline.Subject:
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(max_positions=256)).eval()
    info = model_info(model, Source("local", "tiny"), config_only=False, revision=None)
    return baseline.Subject(
        model,
        None,
        info,
        "cpu",
        "float32",
        weights_bytes(model)[0],
        kv_bytes_per_token=2 * 2 * 2 * 8 * 4,
    )


def small_plan(**changes: Any) -> baseline_plan.Plan:
    plan = baseline_plan.Plan(
        prefill_tokens=[16, 32],
        prefill_batches=[1, 2],
        decode_batches=[1, 3],
        decode_contexts=[8, 24],
        warmup=1,
        repeats=2,
    )
    for key, value in changes.items():
        setattr(plan, key, value)
    return plan


def test_quick_plan_is_small_capped_by_the_workload_and_measures_its_shape() -> None:
    plan = baseline_plan.make_plan(
        Workload(prompt_tokens=100, output_tokens=20, concurrency=2), quick=True, max_positions=4096
    )
    assert plan.prefill_tokens == [32, 100]  # the grid below the prompt, and the prompt
    assert plan.prefill_batches == [1]
    assert plan.decode_batches == [1, 2]
    assert plan.decode_contexts == [64, 110]  # ... and the mean context of a generation
    assert plan.warmup <= 2 and 3 <= plan.repeats <= 5


def test_quick_plan_measures_the_forms_default_workload_itself() -> None:
    plan = baseline_plan.make_plan(Workload(), quick=True, max_positions=None)
    assert 512 in plan.prefill_tokens
    assert 8 in plan.decode_batches and 576 in plan.decode_contexts
    assert plan.num_points <= 13  # a first look still: 4 prefill and 3 × 3 decode points


def test_quick_plan_is_capped_by_the_model_positions() -> None:
    plan = baseline_plan.make_plan(
        Workload(prompt_tokens=4096, output_tokens=512), quick=True, max_positions=200
    )
    assert max(plan.prefill_tokens) <= 200 and max(plan.decode_contexts) < 200


def test_full_plan_sweeps_powers_of_two_up_to_the_workload() -> None:
    plan = baseline_plan.make_plan(
        Workload(prompt_tokens=512, output_tokens=128, concurrency=8),
        quick=False,
        max_positions=None,
    )
    assert plan.prefill_tokens == [16, 32, 64, 128, 256, 512]
    assert plan.prefill_batches == [1, 4]
    assert plan.decode_batches == [1, 2, 4, 8]
    assert plan.decode_contexts == [64, 256, 576, 640]
    assert plan.warmup >= 3 and plan.repeats >= 10


def test_full_plan_includes_an_odd_concurrency() -> None:
    plan = baseline_plan.make_plan(Workload(concurrency=6), quick=False, max_positions=None)
    assert plan.decode_batches == [1, 2, 4, 6]


def test_the_sweep_measures_every_point_of_the_plan(subject: baseline.Subject) -> None:
    clock = FakeClock(0.01)
    result = baseline.run_baseline(subject, small_plan(), clock)
    assert [(p.prompt_tokens, p.batch_size) for p in result.prefill] == [
        (16, 1),
        (32, 1),
        (16, 2),
        (32, 2),
    ]
    assert [(d.batch_size, d.context_tokens) for d in result.decode] == [
        (1, 8),
        (1, 24),
        (3, 8),
        (3, 24),
    ]
    assert clock.calls == 8 * 3  # 8 points × (1 warm-up + 2 repeats)
    point = result.prefill[-1]
    assert point.seconds.samples == [0.01, 0.01]
    assert point.tokens_per_second == pytest.approx(64 / 0.01)
    assert point.peak_flops_per_second is None and point.fraction_of_peak is None
    assert result.decode[-1].tokens_per_second == pytest.approx(3 / 0.01)
    assert (result.peak_prompt_tokens, result.peak_batch_size) == (32, 2)
    assert result.peak.method == "rss_delta"


def test_prefill_flops_follow_the_documented_formula(subject: baseline.Subject) -> None:
    body, head = baseline.body_and_head_params(subject.model)
    assert head == 128 * 32
    assert body == sum(p.numel() for p in subject.model.parameters()) - 2 * 128 * 32
    flops = baseline.prefill_flops(subject.info, body, head, tokens=16, batch=2)
    assert flops == 2 * (2 * body * 16 + 2 * head + 2 * 2 * 4 * 8 * 16**2)


def test_decode_bytes_count_weights_and_the_kv_of_every_row(subject: baseline.Subject) -> None:
    point = baseline.decode_point(subject, small_plan(), FakeClock(0.002), batch=3, context=24)
    expected = subject.weights_bytes + subject.kv_bytes_per_token * 3 * 24
    assert point.bytes_per_step == expected
    assert point.achieved_bytes_per_second == pytest.approx(expected / 0.002)
    assert point.flops_per_step is None  # no parameter counts given


def test_decode_flops_and_prefill_bytes_follow_the_documented_formulas(
    subject: baseline.Subject,
) -> None:
    params = baseline.body_and_head_params(subject.model)
    body, head = params
    subject.copy_bandwidth = 1e9
    point = baseline.decode_point(subject, small_plan(), FakeClock(0.002), 3, 24, params)
    # 3 rows × (body and head once, attention 4 × layers 2 × 4 heads × 8 dims × 24 tokens)
    flops = 3 * (2 * body + 2 * head + 4 * 2 * 4 * 8 * 24)
    assert point.flops_per_step == flops
    assert point.achieved_flops_per_second == pytest.approx(flops / 0.002)
    assert point.fraction_of_peak_flops is None  # no catalog GPU
    prefill = baseline.prefill_point(subject, small_plan(), FakeClock(0.01), 16, 2, params)
    moved = subject.weights_bytes + subject.kv_bytes_per_token * 16 * 2
    assert prefill.bytes_moved == moved
    assert prefill.achieved_bytes_per_second == pytest.approx(moved / 0.01)
    assert prefill.fraction_of_copy == pytest.approx(moved / 0.01 / 1e9)


class CacheSpy:
    """Wraps a model and records the cache length each call starts from."""

    def __init__(self, model: Any) -> None:
        self.model, self.config, self.lengths = model, model.config, []

    def __call__(self, **kwargs: Any) -> Any:
        cache = kwargs.get("cache")
        self.lengths.append(int(cache.get_seq_length()) if cache is not None else None)
        return self.model(**kwargs)


@pytest.mark.parametrize("path", ["static", "eager"])
def test_every_decode_sample_sees_the_same_context_length(
    subject: baseline.Subject, path: str
) -> None:
    spy = CacheSpy(subject.model)
    spied = baseline.Subject(spy, None, subject.info, "cpu", "float32", 1, 1, decode_path=path)
    with torch.inference_mode():
        point = baseline.decode_point(spied, small_plan(warmup=2, repeats=4), FakeClock(), 2, 24)
    # The prefill, then every step at 24 (the static path runs one untimed check first).
    assert spy.lengths == [0] + [24] * (7 if path == "static" else 6)
    assert point.path == path and point.path_reason == "asked for"


def test_the_cpu_default_is_the_static_cache_and_says_why(subject: baseline.Subject) -> None:
    point = baseline.decode_point(subject, small_plan(), FakeClock(0.002), batch=2, context=16)
    assert point.path == "static" and "compiling" in point.path_reason
    assert decode_path.resolve("auto", "cuda:0") == ("static-compiled", "")
    with pytest.raises(ValueError, match="choose one of"):
        decode_path.resolve("graphs", "cpu")


def test_the_compiled_step_gives_the_eager_steps_logits(subject: baseline.Subject) -> None:
    """The compiled static step and the eager dynamic one, on the same prompt."""
    ids = baseline.input_ids(subject, 2, 16)
    step_ids = baseline.input_ids(subject, 2, 1, offset=16)
    logits = {}
    with torch.inference_mode():
        for path in ("static-compiled", "eager"):
            ready = decode_path.prepare(subject.model, ids, step_ids, path, "cpu", {})
            assert ready.path == path, ready.reason
            logits[path] = ready.step(ready.cache).float()
    assert torch.allclose(logits["static-compiled"], logits["eager"], atol=1e-4)


@pytest.mark.parametrize("path", ["static", "eager"])
def test_the_context_is_filled_in_chunks_with_the_same_result(
    subject: baseline.Subject, path: str
) -> None:
    """A batch of 2 × 24 tokens filled 5 tokens per row at a time (10 per forward), as a
    large batch is on a GPU: the step then sees the same cache as one fill gives it."""
    spy = CacheSpy(subject.model)
    ids = baseline.input_ids(subject, 2, 24)
    step_ids = baseline.input_ids(subject, 2, 1, offset=24)
    with torch.inference_mode():
        whole = decode_path.prepare(subject.model, ids, step_ids, path, "cpu", {})
        chunked = decode_path.prepare(spy, ids, step_ids, path, "cpu", {}, fill_tokens=10)
        assert torch.allclose(whole.step(whole.cache), chunked.step(chunked.cache), atol=1e-5)
    assert spy.lengths[:5] == [0, 5, 10, 15, 20]  # five fills, each after the last


def test_a_static_cache_that_fails_falls_back_to_eager_with_the_reason(
    subject: baseline.Subject,
) -> None:
    class NoStatic:
        def __init__(self, model: Any) -> None:
            self.model, self.config = model, model.config

        def __call__(self, **kwargs: Any) -> Any:
            if type(kwargs["cache"]).__name__ == "StaticCache":
                raise RuntimeError("this layer cannot use a static cache")
            return self.model(**kwargs)

    ids = baseline.input_ids(subject, 1, 8)
    with torch.inference_mode():
        ready = decode_path.prepare(NoStatic(subject.model), ids, ids[:, :1], "auto", "cpu", {})
    assert ready.path == "eager"
    assert ready.reason.startswith("static failed (RuntimeError: this layer cannot")


def test_known_gpus_get_fractions_of_their_catalog_peaks(subject: baseline.Subject) -> None:
    gpu = hardware.lookup("h100")
    on_gpu = baseline.Subject(
        subject.model,
        None,
        subject.info,
        "cpu",
        "bfloat16",
        subject.weights_bytes,
        subject.kv_bytes_per_token,
        gpu,
    )
    result = baseline.run_baseline(
        on_gpu, small_plan(prefill_batches=[1], decode_batches=[1]), FakeClock(0.01)
    )
    point, step = result.prefill[0], result.decode[0]
    assert point.peak_flops_per_second == gpu.bf16_flops_per_second
    assert point.fraction_of_peak == pytest.approx(point.achieved_flops_per_second / 989e12)
    assert step.fraction_of_peak == pytest.approx(step.achieved_bytes_per_second / 3.35e12)


def test_progress_is_reported_often_and_only_moves_forward(subject: baseline.Subject) -> None:
    seen: list[tuple[str, float, str]] = []
    baseline.run_baseline(subject, small_plan(), FakeClock(), lambda *a: seen.append(a))
    fractions = [f for _, f, _ in seen]
    assert len(seen) > 8 * 3
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert {phase for phase, _, _ in seen} == {"prefill", "decode", "memory"}


def test_prompts_come_from_the_tokenizer_when_there_is_one(subject: baseline.Subject) -> None:
    class WordIds:
        def __call__(self, text: str, add_special_tokens: bool) -> dict:
            return {"input_ids": [len(w) for w in text.split()]}

    with_tokenizer = baseline.Subject(
        subject.model, WordIds(), subject.info, "cpu", "float32", 1, 1
    )
    ids = baseline.input_ids(with_tokenizer, batch=2, tokens=5)
    words = [len(w) for w in baseline.PROMPT_TEXT.split()]
    assert ids.tolist() == [words[0:5], words[1:6]]
    random_ids = baseline.input_ids(subject, batch=2, tokens=5)
    assert random_ids.shape == (2, 5) and torch.equal(random_ids, baseline.input_ids(subject, 2, 5))


def test_a_cache_that_cannot_be_cropped_is_copied_before_each_step(
    subject: baseline.Subject,
) -> None:
    from transformers import DynamicCache

    class Uncroppable(DynamicCache):
        is_croppable = False

    cache = Uncroppable(config=subject.model.config)
    with torch.inference_mode():
        subject.model(input_ids=baseline.input_ids(subject, 1, 12), cache=cache, use_cache=True)
        one = baseline.input_ids(subject, 1, 1)
        step, setup = decode_path.rolled_back(
            lambda c: subject.model(input_ids=one, cache=c, use_cache=True), cache
        )
        for _ in range(3):
            setup()
            step()
    assert setup is not None and cache.get_seq_length() == 12
