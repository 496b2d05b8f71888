"""One shape, one measurement: the speculative experiment's one-token step is the baseline's
decode step (same cache, same compile choice), on the demo model."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from profiling.config import ProfileConfig
from profiling.experiments import baseline
from profiling.measure import decode_path
from profiling.measure.timing import CpuClock
from profiling.model import loading
from profiling.model.memory import weights_bytes
from profiling.model.prompts import load_prompts
from profiling.results import Samples
from profiling.speculative import verify_cost
from profiling.speculative.sweep import encode_prompts

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BATCH, CONTEXT = 8, 64  # a decode point of the quick plan at the form's concurrency
PAIRS = 30


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    loaded = loading.load(ProfileConfig(model="demo", device="cpu", quick=True), "cpu", "float32")
    subject = baseline.Subject(
        loaded.model, loaded.tokenizer, loaded.info, "cpu", "float32",
        weights_bytes(loaded.model)[0], kv_bytes_per_token=1,
    )  # fmt: skip
    prompts = encode_prompts(loaded.tokenizer, load_prompts().prompts, loaded.info.vocab_size)
    rows = [(p * CONTEXT)[:CONTEXT] for p in prompts[:BATCH]]
    return {"subject": subject, "rows": rows}


def baseline_step(subject: baseline.Subject) -> verify_cost.Pass:
    """The step `baseline.decode_point` times at (BATCH, CONTEXT), prepared the same way."""
    prepared = decode_path.prepare(
        subject.model,
        baseline.input_ids(subject, BATCH, CONTEXT),
        baseline.input_ids(subject, BATCH, 1, offset=CONTEXT),
        subject.decode_path,
        subject.device,
        subject.compiled,
    )
    run, setup = decode_path.rolled_back(prepared.step, prepared.cache)
    return verify_cost.Pass(run, setup, prepared.path, prepared.reason)


@torch.inference_mode()
def test_the_verify_cost_runs_on_the_baselines_decode_path_at_its_shape(demo) -> None:
    subject = demo["subject"]
    points = verify_cost.verify_cost_curve(
        subject.model, None, demo["rows"], [1, 3], clock=CpuClock(), repeats=3,
        compiled=subject.compiled,
    )  # fmt: skip
    step = baseline.decode_point(subject, _plan(), CpuClock(), BATCH, CONTEXT)
    assert [(p.batch_size, p.context_tokens) for p in points] == [(BATCH, CONTEXT)] * 2
    assert {(p.path, p.path_reason) for p in points} == {(step.path, step.path_reason)}
    assert step.path == "static" and step.path_reason == decode_path.CPU_REASON


@torch.inference_mode()
def test_the_one_token_step_times_as_the_baselines_decode_step_within_their_noise(demo) -> None:
    """Timed pair by pair (a shared machine's load hits both alike): the per-pair ratios
    straddle 1, so neither is slower beyond the noise. The dynamic cache the speculative
    loop runs on took 1.3-2x the baseline's step at this shape."""
    subject = demo["subject"]
    ids = verify_cost.rectangle(demo["rows"], 1)
    one = verify_cost.prepare_pass(subject.model, ids, CONTEXT, 1, compiled=subject.compiled)
    base = baseline_step(subject)
    assert ids.shape == (BATCH, CONTEXT + 1) and one.path == base.path
    spec_s, base_s = verify_cost.interleaved(CpuClock(), [one, base], PAIRS)
    ratios = Samples([s / b for s, b in zip(spec_s.samples, base_s.samples, strict=True)])
    assert ratios.p10 <= 1.0 <= ratios.p90, (
        f"one-token step {spec_s.median * 1e3:.2f} ms vs the baseline's {base_s.median * 1e3:.2f}"
        f" ms: pair ratios p10 {ratios.p10:.2f}, median {ratios.median:.2f}, p90 {ratios.p90:.2f}"
    )


def _plan() -> Any:
    from profiling.experiments.baseline_plan import Plan

    return Plan([CONTEXT], [1], [BATCH], [CONTEXT], warmup=1, repeats=3)
