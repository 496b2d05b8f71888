"""`deployments` dicts as a job stores them: the advice's real search (`Advice.deployments`,
`Deployments.to_dict()` with each configuration's launch command), on the datasheet alone
(a fraction of a second), and on the stored demo profile through `advise_profile`.

- `meets()`: an 8B model on one H100 at 16 users, TTFT 500 ms and TPOT 8 ms: fp8 weights on
  the one GPU meets both, so the search's pick is theirs and no more GPUs are offered.
- `misses()`: the same at TPOT 4 ms: nothing on one H100 does at 16 users, so there is no
  pick, the nearest of theirs meets at fewer users, and a more-hardware line is given.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from profiling.advice.build import advise_profile, estimate_report
from profiling.config import Hardware, Workload
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.projection.estimate import shipped_configs
from tests.advisor.reports.test_charts import real_demo_profile

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "H100"
USERS = 16


@functools.cache
def _searched(tpot_ms: float) -> dict[str, Any]:
    shapes = Shapes.from_config(shipped_configs()["llama-3.1-8b"])
    workload = Workload(concurrency=USERS, ttft_ms=500, tpot_ms=tpot_ms)
    advice, _ = estimate_report(
        shapes, hardware.lookup(GPU), 1, "bfloat16", workload, "generation",
        deployment=Hardware(gpu_kind=GPU, gpu_count=1), model=MODEL,
    )  # fmt: skip
    assert advice.deployments is not None
    return advice.deployments


def meets() -> dict[str, Any]:
    """A fresh copy: the one GPU meets the targets (TPOT 8 ms)."""
    return copy.deepcopy(_searched(8.0))


def misses() -> dict[str, Any]:
    """A fresh copy: nothing on the one GPU meets the targets (TPOT 4 ms)."""
    return copy.deepcopy(_searched(4.0))


def demo_with_search(result: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored demo profile (a real CLI run; the quick one by default) with the advice the
    library derives from it, the deployment search included, as the worker stores it."""
    result = result if result is not None else real_demo_profile()
    profile = Profile.from_dict(result)
    model = result["model"]
    shapes = profile.model.shapes or Shapes.from_config({
        "model_type": "llama", "hidden_size": model["hidden_size"],
        "num_hidden_layers": model["num_layers"], "intermediate_size": model["intermediate_size"],
        "num_attention_heads": model["num_attention_heads"],
        "num_key_value_heads": model["num_key_value_heads"], "head_dim": model["head_dim"],
        "vocab_size": model["vocab_size"], "torch_dtype": "float32",
    })  # fmt: skip
    result["advice"] = advise_profile(profile, shapes).to_dict()
    return result
