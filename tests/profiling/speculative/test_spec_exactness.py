"""Speculation's greedy text against plain decoding, judged with the dtype's numerics."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from profiling.speculative.exactness import compare


class Scores(torch.nn.Module):
    """A target whose next-token logits are fixed: token 5 scores 10, token 7 `rival`."""

    def __init__(self, dtype: torch.dtype, rival: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1, dtype=dtype))
        self.rival = rival

    def forward(self, input_ids: Any, logits_to_keep: int = 0) -> Any:
        logits = torch.zeros(1, input_ids.shape[1], 16)
        logits[..., 5], logits[..., 7] = 10.0, self.rival
        return SimpleNamespace(logits=logits.to(self.weight.dtype))


def test_identical_outputs_agree_fully():
    exact = compare(Scores(torch.float32, 0.0), [[1, 2]], [[5, 5, 5]], [[5, 5, 5]])
    assert (exact.agreement, exact.first_divergence, exact.divergence) == (1.0, None, "")


def test_in_float32_any_difference_is_real_and_located():
    exact = compare(Scores(torch.float32, 9.99), [[1], [2]], [[5, 5, 5, 5], [5, 5]],
                    [[5, 5, 7, 7], [5, 5]])  # fmt: skip
    assert exact.divergence == "real" and exact.first_divergence == 2
    assert exact.agreement == 4 / 6  # two tokens of the first row, both of the second


def test_in_bf16_a_near_tie_is_numerics_and_a_clear_gap_is_real():
    near = compare(Scores(torch.bfloat16, 9.9), [[1, 2]], [[5, 5, 5]], [[5, 7, 5]])
    assert near.divergence == "numerics" and near.first_divergence == 1
    assert near.logit_gap is not None and near.logit_gap <= near.tolerance
    far = compare(Scores(torch.bfloat16, 2.0), [[1, 2]], [[5, 5, 5]], [[5, 7, 5]])
    assert far.divergence == "real" and far.logit_gap > far.tolerance


def test_an_output_cut_short_differs_where_it_stopped():
    exact = compare(Scores(torch.float32, 0.0), [[1]], [[5, 5, 5]], [[5, 5]])
    assert exact.first_divergence == 2 and exact.divergence == "real"
