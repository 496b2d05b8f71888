"""The prefix-caching experiment: reused caches give cold outputs, and what they save."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from profiling.caching import experiment as caching
from profiling.caching import measure
from profiling.caching.results import CachingResult
from profiling.config import Workload
from profiling.model.memory import kv_bytes_per_token_measured
from profiling.profile import Profile
from profiling.techniques import technique
from tests.profiling.prefills import Prefills, reuse_pairs
from tests.profiling.test_cli import run_cli
from tests.profiling.tiny import tiny_llama_config

try:
    from profiling.model.demo import ensure_demo
except ImportError:  # the demo family is built by another module
    ensure_demo = None


pytestmark = pytest.mark.model  # the demo model and the caching experiment


@pytest.fixture(autouse=True, scope="module")
def one_thread(one_torch_thread: None) -> None:
    """Tiny models on a shared 2-core box: one thread is faster and steadier."""


class FakeClock:
    """Runs the function and says every call took `seconds`."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        return self.seconds


@pytest.fixture(scope="module")
def tiny() -> LlamaForCausalLM:
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(max_positions=256)).eval()
    with torch.no_grad():  # sharper logits: no near-ties for float rounding to flip
        model.lm_head.weight.mul_(20)
    return model


@pytest.fixture(scope="module")
def demo() -> tuple[Any, Any]:
    if ensure_demo is None:
        pytest.skip("profiling.model.demo is not available")
    path = ensure_demo("demo")
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True).eval()
    return model, AutoTokenizer.from_pretrained(path)


def small_plan(prompt_tokens: int = 96, shared: int = 0, turns: int = 2) -> caching.CachingPlan:
    plan = caching.make_plan(
        Workload(prompt_tokens=prompt_tokens, shared_prefix_tokens=shared), True, None
    )
    plan.turns, plan.greedy_tokens, plan.repeats = turns, 6, 2
    return plan


# -- outputs ------------------------------------------------------------------------


def greedy(model: Any, ids: torch.Tensor, cache: Any = None) -> Any:
    extra = {"cache": cache} if cache is not None else {}
    return model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=12,
        min_new_tokens=12,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        **extra,
    )


@pytest.mark.parametrize("prefix_tokens", [1, 40, 79])
def test_generating_from_a_copied_prefix_cache_equals_a_cold_run(
    tiny: LlamaForCausalLM, prefix_tokens: int
) -> None:
    ids = torch.randint(0, 128, (1, 80), generator=torch.Generator().manual_seed(prefix_tokens))
    with torch.inference_mode():
        prefix_cache = measure.prefill(tiny, ids[:, :prefix_tokens])
        cold = greedy(tiny, ids)
        warm = greedy(tiny, ids, copy.deepcopy(prefix_cache))
        check = measure.check_outputs(tiny, prefix_cache, ids, 12, "float32")
        assert prefix_cache.get_seq_length() == prefix_tokens  # the copy was used, not it
    assert warm.sequences.tolist() == cold.sequences.tolist()
    for a, b in zip(cold.logits, warm.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert check.outputs_match and check.greedy_tokens == 12
    assert check.max_abs_logit_diff < 1e-3 and check.first_divergence is None


def test_the_outputs_check_catches_a_cache_of_the_wrong_prefix(tiny: LlamaForCausalLM) -> None:
    ids = torch.randint(0, 128, (1, 60), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        wrong = measure.prefill(tiny, (ids[:, :30] + 1) % 128)
        check = measure.check_outputs(tiny, wrong, ids, 6, "float32")
    assert not check.outputs_match and check.max_abs_logit_diff > 1e-2
    if not check.tokens_match:  # where the texts split, said by position
        assert check.first_divergence is not None and 0 <= check.first_divergence < 6


def test_a_token_flip_within_tolerance_is_numerics_in_half_precision_only() -> None:
    flip = {"tokens_match": False, "max_abs_logit_diff": 0.01, "logits_match": True}
    assert measure.Check(**flip, greedy_tokens=6, strict=False).outputs_match
    assert not measure.Check(**flip, greedy_tokens=6, strict=True).outputs_match
    beyond = {**flip, "logits_match": False}
    assert not measure.Check(**beyond, greedy_tokens=6, strict=False).outputs_match


def test_time_reuse_times_every_repeat_and_skips_the_warmups(tiny: LlamaForCausalLM) -> None:
    ids = torch.arange(100).reshape(1, 100) % 128
    endings = [ids[:, 40 + i : 60 + i] for i in range(4)]
    with torch.inference_mode():
        cache = measure.prefill(tiny, ids[:, :40])
        timed = measure.time_reuse(
            tiny, cache, ids[:, :40], endings, clock=FakeClock(0.02), warmup=1, repeats=3
        )
        assert cache.get_seq_length() == 40  # every warm run worked on a copy
    assert timed.cold.samples == [0.02] * 3 and timed.warm.samples == [0.02] * 3
    assert timed.warm_to_cold == 1.0
    with pytest.raises(ValueError, match="one ending per"):
        measure.time_reuse(
            tiny, cache, ids[:, :40], endings, clock=FakeClock(), warmup=2, repeats=3
        )


# -- the experiment -----------------------------------------------------------------


def test_every_share_is_measured_warm_and_cold_with_measured_prefix_bytes(
    tiny: LlamaForCausalLM,
) -> None:
    plan = small_plan(prompt_tokens=96, shared=30, turns=3)
    seen: list[float] = []
    result = caching.run_caching(
        tiny, None, plan, device="cpu", progress=lambda p, f, m: seen.append(f)
    )
    kv = kv_bytes_per_token_measured(tiny, "cpu")
    assert result.kv_bytes_per_token == kv == 256
    assert [p.prefix_tokens for p in result.prefix_sweep] == [0, 24, 48, 72, 86]
    for p in [*result.prefix_sweep, result.shared_prefix]:
        assert p is not None and p.outputs_match and p.tokens_match
        assert len(p.cold_ttft_seconds.samples) == len(p.warm_ttft_seconds.samples) == 2
        assert min(p.warm_ttft_seconds.samples) > 0 and p.suffixes == 3
        assert p.prefix_cache_bytes == p.prefix_tokens * kv
    assert result.shared_prefix.prefix_tokens == 30 and result.prefix_cache_bytes == 30 * kv
    turns = result.multi_turn
    assert [t.cached_tokens for t in turns] == [0, 38, 76] and {t.new_tokens for t in turns} == {19}
    assert all(t.outputs_match and t.cache_bytes == t.cached_tokens * kv for t in turns)
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert "30-token prefix" in result.finding
    assert CachingResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_a_sample_without_a_tokenizer_is_analysed_in_bytes_and_says_so(
    tiny: LlamaForCausalLM,
) -> None:
    prompts = ["the same long system prompt, then question one", "the same long system prompt, 2"]
    result = caching.run_caching(
        tiny, None, small_plan(turns=1), device="cpu", prompt_sample=prompts, clock=FakeClock()
    )
    sample = result.prompt_sample
    assert sample is not None and sample.tokenization == "bytes"
    assert sample.total_tokens == sum(len(p) for p in prompts)
    assert sample.reusable_tokens == len("the same long system prompt, ")
    assert sample.cache_bytes_needed == sample.unique_tokens * 256
    assert result.shared_prefix is None
    assert any("no tokenizer" in w for w in result.warnings)
    share = round(100 * sample.reusable_tokens / sample.total_tokens)
    assert f"your prompts share {share} % of their tokens" in result.finding


def test_the_demo_reuses_its_prefix_with_identical_outputs_and_feeds_only_the_new_tokens(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What was timed, exactly: warm fed only each prompt's new tokens onto a cache holding
    its prefix, cold the whole prompt onto an empty cache. The clock says a prefill takes
    1 ms per token fed, so the figures follow from those calls alone (the measured saving
    is bench/caching.py's)."""
    model, tokenizer = demo
    prefills = Prefills(monkeypatch)
    clock = prefills.clock(seconds_per_token=1e-3)
    prompts = [f"The forecast for city {i} calls for rain and a north wind." for i in range(20)]
    plan = small_plan(prompt_tokens=256, turns=2)
    result = caching.run_caching(
        model, tokenizer, plan, device="cpu", prompt_sample=prompts, clock=clock
    )
    assert all(p.outputs_match for p in result.prefix_sweep)
    assert all(t.outputs_match for t in result.multi_turn)
    sample = result.prompt_sample
    assert sample is not None and sample.measured is not None
    # (prompt tokens, cached tokens) of each point, in the order they were measured
    reused = [(p.prompt_tokens, p.prefix_tokens) for p in [*result.prefix_sweep, sample.measured]]
    reused += [(t.prompt_tokens, t.cached_tokens) for t in result.multi_turn]
    samples = plan.warmup + plan.repeats
    pairs = reuse_pairs(prefills.timed, samples)
    expected = [((total, 0), (total - cached, cached)) for total, cached in reused
                for _ in range(samples)]  # fmt: skip
    assert [((c.fed, c.held), (w.fed, w.held)) for c, w in pairs] == expected
    assert all(warm.ids == cold.ids[warm.held :] for cold, warm in pairs)  # the same prompt
    for p in result.prefix_sweep:  # the figures are those calls' (1 ms per token fed)
        assert p.warm_ttft_seconds.samples == pytest.approx([(256 - p.prefix_tokens) * 1e-3] * 2)
        assert p.cold_ttft_seconds.samples == pytest.approx([256 * 1e-3] * 2)
    largest = result.prefix_sweep[-1]
    assert largest.prefix_share == pytest.approx(0.9, abs=0.01)
    assert largest.warm_to_cold == pytest.approx((256 - largest.prefix_tokens) / 256)
    assert sample.tokenization == "tokenizer" and sample.prompts == 20
    assert 0 < sample.reuse_fraction < 1 and sample.hit_rate == pytest.approx(19 / 20)
    assert sample.warm_ttft_seconds and sample.cold_ttft_seconds and sample.prompt_tokens == 256
    measured = sample.measured  # the point the sample's TTFT figures come from
    assert measured.label == "prompt sample" and measured.outputs_match
    assert measured.prefix_tokens == round(sample.reuse_fraction * 256)
    assert sample.warm_ttft_seconds == measured.warm_ttft_seconds.median
    assert f"{sample.reuse_fraction * 100:.0f} % of their tokens" in result.finding


def test_the_plan_follows_the_workload_capped_by_quick_mode_and_positions() -> None:
    plan = caching.make_plan(Workload(prompt_tokens=2048, shared_prefix_tokens=1024), True, None)
    assert (plan.prompt_tokens, plan.shared_prefix_tokens) == (512, 256)  # same share
    plan = caching.make_plan(Workload(prompt_tokens=2048, shared_prefix_tokens=2048), False, 1024)
    assert plan.prompt_tokens == 1024 - caching.FULL_GREEDY_TOKENS
    assert plan.shared_prefix_tokens == plan.prompt_tokens - 1  # the last token is computed
    plan = caching.make_plan(Workload(prompt_tokens=300), False, None)
    assert (plan.prompt_tokens, plan.shared_prefix_tokens, plan.repeats) == (300, 0, 5)


def test_caching_is_registered() -> None:
    assert technique("caching").run is not None


# -- the command line ---------------------------------------------------------------


def test_the_cli_profiles_caching_with_a_prompt_file(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    system = {"role": "system", "content": "You answer questions about the weather, briefly."}
    prompts.write_text(
        "\n".join(
            json.dumps({"messages": [system, {"role": "user", "content": f"Rain in town {i}?"}]})
            for i in range(30)
        )
    )
    out = tmp_path / "out.json"
    done = run_cli(
        *("profile", "demo", "--device", "cpu", "--quick", "--experiments", "caching"),
        *("--prompts", str(prompts), "--json", str(out), "--prompt-tokens", "128"),
        *("--output-tokens", "8", "--concurrency", "1", "--shared-prefix-tokens", "64"),
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert "caching" in data["experiments_run"]
    sweep = data["caching"]["prefix_sweep"]
    assert [p["prefix_tokens"] for p in sweep] == [0, 32, 64, 96, 115]
    for p in sweep:
        assert {"median", "p10", "p90", "samples"} <= p["warm_ttft_seconds"].keys()
        assert p["outputs_match"] is True and p["prompt_tokens"] == 128
    sample = data["caching"]["prompt_sample"]
    assert sample["prompts"] == 30 and sample["reusable_tokens"] > 0
    assert data["config"]["prompt_sample"] == []  # its figures are kept, not the prompts again
    assert {"total_tokens", "reuse_fraction", "hit_rate", "shared_prefix_histogram"} <= (
        sample.keys()
    )
    assert data["caching"]["shared_prefix"]["prefix_tokens"] == 64
    assert data["caching"]["multi_turn"] and data["caching"]["finding"]
    profile = Profile.from_dict(data)
    result = profile.experiments.caching
    assert isinstance(result, CachingResult) and result.to_dict() == data["caching"]


def test_the_cli_refuses_a_bad_prompt_file_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n')
    done = run_cli("profile", "demo", "--experiments", "caching", "--prompts", str(bad))
    assert done.returncode == 2
    assert "line 2: not valid JSON" in done.stderr and "Traceback" not in done.stderr
