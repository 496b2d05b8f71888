"""One shape, one measurement: the speculative experiment's one-token step is the baseline's
decode step (same cache, same compile choice), on the demo model."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from profiling.baseline import sweeps as baseline
from profiling.config import ProfileConfig
from profiling.measure import decode_path
from profiling.measure.timing import CpuClock
from profiling.model import loading
from profiling.model.memory import weights_bytes
from profiling.model.prompts import load_prompts
from profiling.speculative import verify_cost
from profiling.speculative.sweep import encode_prompts

# The demo model, loaded and stepped.
pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]

BATCH, CONTEXT = 8, 64  # a decode point of the quick plan at the form's concurrency


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


def ran(model: torch.nn.Module, step: verify_cost.Pass) -> dict[str, Any]:
    """What one timed call of `step` runs: each forward's input shape, cache class, length
    and room, its layers' key shapes and the logits kept; and each operator's FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    forwards = []

    def record(_module: Any, args: tuple, kwargs: dict) -> None:
        cache = kwargs["cache"]
        forwards.append(
            (tuple(kwargs["input_ids"].shape), type(cache).__name__,
             int(cache.get_seq_length()), cache.get_max_length(),
             {tuple(layer.keys.shape) for layer in cache.layers}, kwargs.get("logits_to_keep"))
        )  # fmt: skip

    step.setup()  # rolled back to the context, as before every timed sample
    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        with FlopCounterMode(display=False) as flops:
            step.run()
    finally:
        hook.remove()
    # The operators torch's counter knows (on CPU the matmuls: attention's extent is
    # the cache's length and shape above).
    by_operator = {str(op): n for op, n in flops.get_flop_counts()["Global"].items()}
    return {"forwards": forwards, "flops": flops.get_total_flops(), "by_operator": by_operator}


@torch.inference_mode()
def test_the_one_token_step_runs_the_baselines_decode_step_exactly(demo) -> None:
    """The same path, the same forward (batch x 1 token onto a static cache of the same
    context and size, one row of logits kept) and the same FLOPs, operator by operator:
    one shape, one measurement, whatever the machine's noise. (The dynamic cache the
    speculative loop runs on took 1.3-2x the baseline's step at this shape: it would
    show here as another cache class.)"""
    subject = demo["subject"]
    ids = verify_cost.rectangle(demo["rows"], 1)
    one = verify_cost.prepare_pass(subject.model, ids, CONTEXT, 1, compiled=subject.compiled)
    base = baseline_step(subject)
    assert ids.shape == (BATCH, CONTEXT + 1) and one.path == base.path == "static"
    spec, baseline_ran = ran(subject.model, one), ran(subject.model, base)
    (forward,) = spec["forwards"]
    assert forward[:4] == ((BATCH, 1), "StaticCache", CONTEXT, CONTEXT + 1) and forward[5] == 1
    assert spec == baseline_ran and spec["flops"] > 0


def _plan() -> Any:
    from profiling.baseline.plan import Plan

    return Plan([CONTEXT], [1], [BATCH], [CONTEXT], warmup=1, repeats=3)
