"""The one ranking rule (`profiling.advice.ranking`), checked by the properties the advice
promises, over generated recommendations and over every stored profile and estimate.

- Nothing needing more devices than the job named ranks above a change to those named.
- Nothing its own section says cannot meet the target is ranked at all (it is set aside
  with its own words), so it never ranks above one that helps.
- No ranked figure breaks its physical limit.
- An effect and its evidence are at the same operating point, or its text says which
  batch the evidence was measured at.
- A shown interval holds the gain it is shown beside.
- The first action is stable under resampling, or the advice says it is within the noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiling.advice.build import advise_profile, estimate_report
from profiling.advice.ranking import (
    BOUND_MARGIN,
    CRITERIA,
    OUTLIER,
    RANKING,
    Candidate,
    advice_broken_promises,
    breaks_limit,
    broken_promises,
    rank,
    resampled,
    screen,
    uncertainty_note,
)
from profiling.config import Workload
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.projection.estimate import shipped_configs
from profiling.technique_kit.advice_results import (
    ESTIMATED,
    MEASURED,
    Change,
    Evidence,
    ExpectedEffect,
    Recommendation,
)

ROOT = Path(__file__).resolve().parents[3]
STORED = sorted((ROOT / "tests" / "advisor" / "fixtures").glob("cli_*.json")) + [
    ROOT / "tests" / "profiling" / "fixtures" / "profile_v1.json"
]
TECHNIQUES = ["quantization", "speculative", "caching", "parallel", "disaggregation", "engine"]
BOTTLENECKS = ["memory", "generation", "prompt", "devices"]


# -- generated recommendations ---------------------------------------------------------


@st.composite
def recommendations(draw: st.DrawFn) -> Recommendation:
    gain = draw(st.floats(0.5, 12.0))
    measured = draw(st.booleans())
    low = high = None
    if measured and draw(st.booleans()):
        low = gain / draw(st.floats(1.0, 2.0))
        high = gain * draw(st.floats(1.0, 2.0))
    bound = draw(st.none() | st.floats(1.0, 6.0))
    tpot_after = draw(st.floats(1.0, 20.0))
    batch = draw(st.none() | st.sampled_from([1, 2, 4, 8, 16]))
    caveats = [f"measured at batch {batch}"] if batch is not None else []
    return Recommendation(
        technique=draw(st.sampled_from(TECHNIQUES)),
        setting=f"setting {draw(st.integers(0, 10**6))}",
        expected_effect=ExpectedEffect("", [Change("tpot_ms", 10.0, tpot_after, "ms")]),
        evidence=[Evidence("#x", "x", "x")],
        caveats=caveats,
        basis=MEASURED if measured else ESTIMATED,
        serves=draw(st.sampled_from(BOTTLENECKS)),
        gain=gain,
        gain_low=low,
        gain_high=high,
        meets_targets=draw(st.sampled_from([None, True, False])),
        more_hardware=draw(st.booleans()),
        devices=draw(st.none() | st.integers(1, 16)),
        cannot=draw(st.sampled_from(["", "even decode alone misses the target"])),
        gain_bound=bound,
        bound_why="tokens per target pass" if bound is not None else "",
        measured_at_batch=batch,
    )


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(recommendations(), min_size=0, max_size=7),
    st.sampled_from(BOTTLENECKS),
    st.integers(1, 8),
    st.sampled_from([None, 3.0, 8.0]),
    st.integers(1, 16),
)
def test_the_rule_keeps_every_promise_on_generated_recommendations(
    generated: list[Recommendation], bottleneck: str, named: int, tpot: float | None, users: int
) -> None:
    w = Workload(concurrency=users, tpot_ms=tpot)
    kept, set_aside = screen(generated)
    ranked = rank(kept, bottleneck, w, named)
    assert broken_promises(ranked, bottleneck, w, named) == []
    # Nothing is lost: every recommendation is either ranked or set aside with why.
    assert len(ranked) + len(set_aside) == len(generated)
    for r in generated:
        if r.cannot:
            assert any(r.cannot in n.why for n in set_aside)
        elif breaks_limit(r):
            assert any(OUTLIER in n.why and n.inconclusive for n in set_aside)
    # The order is the criteria's, in the order the sentence states them.
    candidates = [Candidate.of(r, bottleneck, w, named) for r in ranked]
    keys = [tuple(criterion(c, c.gain) for _, criterion in CRITERIA) for c in candidates]
    assert keys == sorted(keys)
    # The stability check is a pure function of the figures: the same draws, the same answer.
    once = resampled(ranked, bottleneck, w, named, draws=200, seed=7)
    again = resampled(ranked, bottleneck, w, named, draws=200, seed=7)
    assert once == again
    if once is not None:
        assert 0.0 <= once.first_share <= 1.0 and once.first_share + once.rival_share <= 1.0
        assert bool(uncertainty_note(once, ranked[0])) == once.uncertain


def _win(setting: str, gain: float, low: float, high: float) -> Recommendation:
    return Recommendation("quantization", setting, ExpectedEffect("", []), [], [], MEASURED,
                          "generation", gain, gain_low=low, gain_high=high)  # fmt: skip


def test_two_wins_inside_each_others_noise_are_named_together() -> None:
    # int8 1.25× (1.05–1.50) against a split 1.15× (1.02–1.35): either wins a draw often.
    ranked = rank([_win("int8", 1.25, 1.05, 1.50), _win("split", 1.15, 1.02, 1.35)],
                  "generation")  # fmt: skip
    found = resampled(ranked, "generation")
    assert found is not None and found.uncertain and found.rival is ranked[1]
    note = uncertainty_note(found, ranked[0])
    assert note.startswith("int8 or split: within the noise of this machine")
    # Far apart, the first always wins: no note.
    apart = rank([_win("int8", 2.0, 1.9, 2.1), _win("split", 1.15, 1.1, 1.2)], "generation")
    found = resampled(apart, "generation")
    assert found is not None and found.first_share == 1.0 and not found.uncertain


def test_a_speedup_above_its_tokens_per_pass_is_set_aside_as_an_outlier() -> None:
    # The case: prompt lookup 1.52× at 1.00 tokens per target pass.
    impossible = _win("prompt lookup", 1.52, 1.3, 1.7)
    impossible.gain_bound, impossible.bound_why = 1.0, "1.00 tokens per target pass"
    kept, set_aside = screen([impossible])
    assert kept == [] and set_aside[0].inconclusive
    assert "1.52× exceeds the most it can give, 1.00×" in set_aside[0].why
    # Inside the timing margin it stays.
    close = _win("prompt lookup", 1.0 * BOUND_MARGIN, 1.0, 1.2)
    close.gain_bound = 1.0
    assert screen([close])[0] == [close]


def test_the_sentence_names_every_criterion_in_order() -> None:
    positions = [RANKING.index(text) for text, _ in CRITERIA]
    assert positions == sorted(positions)
    assert RANKING.startswith("set aside first")


# -- every stored profile, and estimates over the shipped configs ----------------------


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_every_stored_profile_keeps_every_promise(path: Path) -> None:
    profile = Profile.from_dict(json.loads(path.read_text()))
    if profile.verdict is None:
        pytest.skip(f"{path.name} has no verdict")
    advice = advise_profile(profile)
    w, named = profile.config.workload, profile.config.hardware.gpu_count
    assert advice_broken_promises(advice, w, named) == []
    # And what the stored advice itself says, as the report shows it.
    if profile.advice is not None:
        stored = profile.advice
        assert broken_promises(stored.recommendations, stored.bottleneck, w, named) == []


CASES = [
    ("llama-3.1-8b", "H100", 1, Workload(concurrency=8, tpot_ms=5.0, ttft_ms=500.0)),
    ("llama-3.1-70b", "L40S", 1, Workload(concurrency=8)),
    ("llama-3.1-70b", "H100", 4, Workload(concurrency=64, tpot_ms=20.0, shared_prefix_tokens=384)),
    ("mixtral-8x7b", "A100-80GB", 2, Workload(concurrency=32, tpot_ms=15.0)),
    ("qwen3-30b-a3b", "H100", 1, Workload(concurrency=16, ttft_ms=200.0)),
    ("gpt-oss-120b", "H100", 1, Workload(concurrency=4, tpot_ms=10.0)),
    ("deepseek-v3", "H200", 8, Workload(concurrency=64, tpot_ms=50.0)),
]


@pytest.mark.parametrize(
    ("model", "gpu", "count", "w"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_every_estimate_keeps_every_promise(model: str, gpu: str, count: int, w: Workload) -> None:
    shapes = Shapes.from_config(shipped_configs()[model])
    advice, _ = estimate_report(shapes, hardware.lookup(gpu), count, "bfloat16", w,
                                stated_bottleneck="generation", spec_acceptance=0.6)  # fmt: skip
    assert advice_broken_promises(advice, w, count) == []


def _bench_rows():  # noqa: ANN202  (bench/_published_rows, as the bench reads the rows)
    import importlib
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module("_published_rows")


def _published_setups() -> list[tuple[str, str, int, Workload]]:
    """Each distinct (model, GPU, count) a published serving row names that the estimate
    can express, with the first such row's workload (bench/data, read as the bench does)."""
    import re

    rows = _bench_rows()
    configs, seen, out = rows.load_configs(), set(), []
    for row in rows.load_rows():
        model, gpu = row.get("model") or "", rows.resolve_gpu(row.get("gpu"))
        if gpu is None or any(re.search(p, model, re.I) for p, _ in rows.UNMODELLED):
            continue
        name = next((n for p, n in rows.MODELS if re.search(p, model, re.I)), None)
        isl, osl, count = row.get("input_tokens"), row.get("output_tokens"), row.get("gpu_count")
        if name not in configs or not (isl and osl and count) or (name, gpu.key, count) in seen:
            continue
        seen.add((name, gpu.key, count))
        users = int(row.get("concurrency") or 64)
        w = Workload(prompt_tokens=int(isl), output_tokens=int(osl), concurrency=min(users, 4096),
                     tpot_ms=row.get("itl_or_tpot_ms"), ttft_ms=row.get("ttft_ms"))  # fmt: skip
        out.append((name, gpu.key, int(count), w))
    return out


def test_every_published_rows_setup_keeps_every_promise() -> None:
    # The published rows' models on their GPUs at their workloads, their figures as the
    # targets: the rule's promises hold on each estimate's advice.
    setups = _published_setups()
    assert len(setups) >= 30
    configs, broken = _bench_rows().load_configs(), []
    for name, gpu, count, w in setups:
        shapes = Shapes.from_config(configs[name])
        advice, _ = estimate_report(shapes, hardware.lookup(gpu), count, "bfloat16", w,
                                    stated_bottleneck="generation")  # fmt: skip
        found = advice_broken_promises(advice, w, count)
        broken += [f"{name} on {count}× {gpu}: {p}" for p in found]
    assert broken == []
