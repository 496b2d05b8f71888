"""One set of weights on the GPU: which phases set the reference aside, and when it moves."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from profiling.measure.resident import can_move, set_aside
from profiling.techniques import technique


def test_on_a_cpu_the_weights_stay_where_they_are() -> None:
    model = torch.nn.Linear(4, 4)
    before = model.weight.data_ptr()
    with set_aside(model, "cpu") as moved:
        assert moved is False and model.weight.data_ptr() == before
    assert model.weight.data_ptr() == before


def test_only_a_model_on_one_gpu_is_moved() -> None:
    assert can_move(SimpleNamespace(), "cuda:0")
    assert not can_move(SimpleNamespace(hf_device_map={"model": 0, "lm_head": 1}), "cuda:0")
    assert not can_move(SimpleNamespace(), "cpu") and not can_move(SimpleNamespace(), "mps")


def test_the_experiments_that_load_their_own_weights_are_marked() -> None:
    # Quantization builds every variant fresh and never runs the reference; the parallel
    # experiment runs the reference for disaggregation, so it sets it aside itself.
    assert technique("quantization").own_weights
    assert not technique("parallel").own_weights and not technique("speculative").own_weights


def test_weights_larger_than_one_gpu_go_over_the_visible_ones() -> None:
    from profiling.model.loading import spread_over

    gib = 2**30
    assert spread_over(10 * gib, [80 * gib, 80 * gib]) is None  # fits the first
    assert spread_over(10 * gib, [80 * gib]) is None  # one GPU: nothing to spread over
    room = spread_over(120 * gib, [80 * gib, 80 * gib])
    assert room == {0: int(0.8 * 80 * gib), 1: int(0.8 * 80 * gib)}
    # A 70B in bf16 (140 GB) leaves too little room on two 80 GB GPUs; three hold it.
    assert spread_over(140 * gib, [80 * gib, 80 * gib]) is None
    assert spread_over(140 * gib, [80 * gib, 80 * gib, 80 * gib]) is not None
    assert spread_over(200 * gib, [80 * gib, 80 * gib]) is None  # not even together
