"""The speculative experiment: its plan, its result on tiny models with a fake clock, its
finding and its round trip."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from profiling.measure.decode_path import CPU_REASON
from profiling.model.prompts import PromptSet, load_prompts
from profiling.speculative import experiment as speculative
from profiling.speculative.results import SpeculativeResult
from tests.profiling.specdata import FakeClock, decode_point, tiny_family, word_tokenizer

pytestmark = pytest.mark.model  # the speculative experiment on real models


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny() -> dict[str, Any]:
    return tiny_family()


def small_run(tiny: dict[str, Any], **changes: Any) -> SpeculativeResult:
    tokenizer = word_tokenizer([f"w{i}" for i in range(93)])
    kwargs: dict[str, Any] = dict(
        ks=[1, 3],
        batch_sizes=[1, 2],
        max_new_tokens=8,
        prompts=PromptSet(1, ["w1 w2 w3 w4 w1 w2", "w5 w6 w7", "w8 w9 w8 w9 w8"]),
        prompt_lookup=True,
        device="cpu",
        clock=FakeClock(),
        warmup=0,
        repeats=2,
        target_name="tiny",
    )
    kwargs.update(changes)
    return speculative.run_speculative(
        tiny["target"], tokenizer, (tiny["draft"], tokenizer, "tiny-draft"), **kwargs
    )


def test_result_has_the_documented_shape_and_round_trips(tiny) -> None:
    progress: list[float] = []
    result = small_run(tiny, progress=lambda phase, fraction, message: progress.append(fraction))
    data = result.to_dict()
    assert SpeculativeResult.from_dict(data) == result
    assert {(s["draft"], s["k"], s["batch_size"]) for s in data["sweeps"]} == {
        (d, k, b) for d in ("tiny-draft", "prompt-lookup") for k in (1, 3) for b in (1, 2)
    }
    for sweep in data["sweeps"]:
        assert sweep["matches_baseline"] and len(sweep["acceptance_by_position"]) == sweep["k"]
        assert (
            sweep["mean_accepted_length"] == 1 + sweep["accepted_tokens"] / sweep["sequence_passes"]
        )
        for key in (
            "acceptance_rate",
            "tokens_per_second",
            "baseline_tokens_per_second",
            "speedup",
        ):
            assert isinstance(sweep[key], float)
    assert {(b["draft"], b["batch_size"]) for b in data["best_k"]} == {
        (d, b) for d in ("tiny-draft", "prompt-lookup") for b in (1, 2)
    }
    assert data["trace"] and {"proposed", "accepted_count", "target_token"} <= set(data["trace"][0])
    assert data["acceptance_meaningful"] and "1 + accepted" in data["acceptance_convention"]
    assert data["finding"].startswith("draft tiny-draft, K=")
    assert (
        data["draft_memory"][0]["weights_bytes"]
        > data["draft_memory"][0]["kv_cache_bytes_per_token"]
        > 0
    )
    assert len(data["verify_cost"]) == 4 and progress[-1] == 1.0 and progress == sorted(progress)


def test_a_warm_up_decodes_the_sets_first_batch_and_a_timed_run_all_of_them(tiny) -> None:
    from profiling.speculative.drafting import PromptLookupDrafter
    from profiling.speculative.sweep import SetDecoder, batches_of

    batches = batches_of([[5, 6, 7, 5, 6], [8, 9, 8], [10, 11, 12, 10]], 1)
    decoder = SetDecoder(tiny["target"], batches, 4, [], FakeClock())
    made: list[int] = []

    def factory(rows: int) -> PromptLookupDrafter:
        made.append(rows)
        return PromptLookupDrafter()

    decoder.warm(factory, 2)
    assert made == [1]  # one drafter: one batch of one row
    assert len(decoder.run(factory, 2).outputs) == 3 and made == [1, 1, 1, 1]


class OrderClock:
    """Runs the function and returns how many timings had ended when it ended: the
    samples then say in which order everything was timed."""

    def __init__(self) -> None:
        self.ended = 0

    def time(self, fn: Any) -> float:
        fn()
        self.ended += 1
        return float(self.ended)


def test_the_target_alone_is_timed_once_per_batch_and_shared_by_every_point(tiny) -> None:
    """One timing of the target alone per batch size, the same samples behind every draft
    and K of the sweep; on a CPU taken in rounds, each round the target first and then
    every point once, so each point's i-th sample pairs with a run of the target taken
    just before it. The confirmation times both sides afresh, with twice the sweep's
    repeats."""
    for device, paired in (("cpu", True), ("cuda", False)):
        result = small_run(tiny, device=device, trace_k=1, clock=OrderClock(), repeats=3)
        assert all(p.paired is paired for p in result.sweeps + result.confirmations)
        for batch in (1, 2):
            at = [p for p in result.sweeps if p.batch_size == batch]
            assert len(at) == 4 and len({id(p.baseline_seconds) for p in at}) == 1, device
            base = at[0].baseline_seconds.samples
            if paired:
                for point in at:
                    for i, sample in enumerate(point.seconds.samples):
                        assert base[i] < sample < (base[i + 1] if i + 1 < len(base) else 1e9)
            else:
                assert max(base) < min(min(p.seconds.samples) for p in at)
            again = next(p for p in result.confirmations if p.batch_size == batch)
            assert again.baseline_seconds.samples != base
            assert len(again.seconds.samples) == len(again.baseline_seconds.samples) == 6


def test_config_only_measures_the_verify_cost_curve_and_says_acceptance_is_meaningless(
    tiny,
) -> None:
    result = speculative.run_speculative(
        tiny["target"],
        None,
        (tiny["draft"], None, "random-draft"),
        ks=[1, 4],
        batch_sizes=[1, 2],
        max_new_tokens=8,
        prompts=["one two three four five six"],
        prompt_lookup=False,
        device="cpu",
        config_only=True,
        clock=FakeClock(),
        repeats=2,
    )
    assert not result.acceptance_meaningful and not result.sweeps and not result.trace
    assert "meaningless" in result.finding
    # A fake clock makes every pass cost the same: the bound is K + 1.
    assert [(p.k, p.batch_size, p.speedup_bound) for p in result.verify_cost] == [
        (1, 1, 2.0),
        (4, 1, 5.0),
        (1, 2, 2.0),
        (4, 2, 5.0),
    ]


def test_the_shipped_prompt_set_is_versioned_and_varied() -> None:
    prompts = load_prompts()
    lengths = sorted(len(p) for p in prompts.prompts)
    assert prompts.version == 1 and len(prompts.prompts) >= 12 and lengths[-1] > 5 * lengths[0]


def test_plan_sweeps_batch_one_and_the_capped_concurrency() -> None:
    quick = speculative.make_plan(quick=True, concurrency=64, output_tokens=512)
    assert (quick.ks, quick.batch_sizes, quick.max_new_tokens) == ([1, 2, 4], [1, 8], 32)
    full = speculative.make_plan(quick=False, concurrency=1, output_tokens=16)
    assert (full.ks, full.batch_sizes, full.max_new_tokens) == ([1, 2, 3, 4, 6, 8], [1], 16)
    assert len(full.prompts.prompts) > len(quick.prompts.prompts)
    assert speculative.default_draft_name("demo") == "demo-draft"


def test_run_for_context_loads_the_named_draft_and_returns_its_typed_result(tiny, tmp_path) -> None:
    from types import SimpleNamespace

    from profiling.config import ProfileConfig, Workload

    tokenizer = word_tokenizer([f"w{i}" for i in range(93)])
    tiny["draft"].save_pretrained(tmp_path / "draft")
    tokenizer.save_pretrained(tmp_path / "draft")
    config = ProfileConfig(model="tiny", quick=True, workload=Workload(64, 6, concurrency=2))
    info = SimpleNamespace(name="tiny", config_only=False)
    context = SimpleNamespace(
        config=config,
        loaded=SimpleNamespace(model=tiny["target"], tokenizer=tokenizer, info=info),
        device="cpu",
        dtype="float32",
        clock=FakeClock(),
        progress=lambda phase, fraction, message: None,
        profile=SimpleNamespace(decode=[decode_point(1, 64, 0.004), decode_point(2, 64, 0.005)]),
        budget_s=None,
        compiled={},  # the baseline's compiled forward: none on a CPU
    )
    result = speculative.run_for_context(context, draft_name=str(tmp_path / "draft"), ks=[2])
    assert isinstance(result, SpeculativeResult)
    data = result.to_dict()
    assert SpeculativeResult.from_dict(data) == result
    assert {(s["draft"], s["k"], s["batch_size"]) for s in data["sweeps"]} == {
        (str(tmp_path / "draft"), 2, 1),
        (str(tmp_path / "draft"), 2, 2),
        ("prompt-lookup", 2, 1),
        ("prompt-lookup", 2, 2),
    }
    assert data["max_new_tokens"] == 6 and all(s["matches_baseline"] for s in data["sweeps"])
    # Costed before it ran, from the decode steps it was given; no budget on a CPU.
    assert data["planned_seconds"] > 0 and data["budget_seconds"] is None
    assert data["trimmed"] == []
    # The verify cost ran on the baseline's CPU decode path, and the page says why the
    # sweep's own timings differ from the baseline's decode steps.
    assert {(p["path"], p["path_reason"]) for p in data["verify_cost"]} == {("static", CPU_REASON)}
    assert "static" in result.timing_note and "dynamic KV cache" in result.timing_note


def sweep(k: int, batch_size: int, speedup: float, accepted: int = 10) -> Any:
    from profiling.results import Samples
    from profiling.speculative.results import SweepPoint

    return SweepPoint(
        draft="demo-draft",
        k=k,
        batch_size=batch_size,
        prompts=1,
        generated_tokens=30,
        proposed_tokens=20,
        accepted_tokens=accepted,
        corrections=5,
        bonus_tokens=5,
        target_passes=10,
        sequence_passes=10,
        acceptance_rate=accepted / 20,
        mean_accepted_length=1 + accepted / 10,
        acceptance_by_position=[0.5] * k,
        seconds=Samples([1.0 / speedup]),
        baseline_seconds=Samples([1.0]),
        tokens_per_second=30 * speedup,
        baseline_tokens_per_second=30.0,
        speedup=speedup,
    )


def test_finding_names_the_best_k_at_batch_one_and_its_speedup_at_each_batch() -> None:
    from profiling.speculative.report import best_k, finding

    points = [sweep(2, 1, 1.3), sweep(4, 1, 1.6, accepted=11), sweep(2, 8, 1.2), sweep(4, 8, 0.96)]
    result = SpeculativeResult("demo", False, True, "", 8, 1, [], points, best_k(points), [])
    assert [(b.batch_size, b.k) for b in result.best_k] == [(1, 4), (8, 2)]
    assert finding(result) == (
        "draft demo-draft, K=4: 2.1 tokens per target pass, 1.6× faster at batch 1, "
        "0.96× (slower) at 8"
    )
