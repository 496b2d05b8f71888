"""Fixtures of the profiling tests."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profiling.config import Hardware, ProfileConfig
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from tests.profiling.advice_scenarios import WORKLOAD, bandwidth_bound_decode, set_shares


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Two cores shared with other processes: one torch thread is faster and steadier."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- the advice scenarios' starting point (test_advice.py) ------------------------


@pytest.fixture(scope="module")
def real(one_torch_thread: None, demo_model_dir: Path) -> Profile:
    from profiling.runner import run_profile

    config = ProfileConfig(
        model="demo", device="cpu", quick=True, workload=WORKLOAD,
        hardware=Hardware(gpu_kind="H100-SXM"),
    )  # fmt: skip
    return run_profile(config)


@pytest.fixture(scope="module")
def shapes(demo_model_dir: Path) -> Shapes:
    return Shapes.from_config(json.loads((demo_model_dir / "config.json").read_text()))


@pytest.fixture
def base(real: Profile, shapes: Shapes) -> dict[str, Any]:
    """The real profile's JSON, decode-dominated and bandwidth-bound, with no experiments."""
    data = copy.deepcopy(real.to_dict())
    set_shares(data, prefill=0.1)
    bandwidth_bound_decode(data, shapes)
    return data
