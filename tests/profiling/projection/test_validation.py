"""The estimate against published serving measurements: the stored error bands match
what the model projects today, the comparison runs from a clone projecting each row
once, and it fails when the error passes today's bound.

The issue's goal is a median error of 15 % per metric: TTFT 11.5 % and ITL/TPOT 10.5 %
(68 headline rows each), output throughput 10.3 % (108) today (see
bench/estimate_vs_published.py's output). Each bound below is today's figure, a
ratchet: a change that makes the projections worse against the published rows fails
here, and one that makes them better lowers it.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiling.projection import validation

BENCH = Path(__file__).resolve().parents[3] / "bench" / "estimate_vs_published.py"
# How the script reads a published row (its regexes, `stated`, `express`), beside it.
ROWS = BENCH.with_name("_published_rows.py")
# Today's median |error| over the rows of dense models: output throughput (10.0 %), TTFT
# (11.5 %) and ITL/TPOT (10.5 %), with a little room for the simulation; the goal is 15 %
# for each. TTFT's bound moved from 0.11 with the six GPUStack Qwen3-32B rows (vLLM, every
# request sent at once: queue-dominated TTFTs), which took its median from 10.1 % to 11.5 %.
BOUND_ALL_ROWS = 0.11
BOUND_TTFT = 0.12
BOUND_ITL_TPOT = 0.11
# The rows of mixtures of experts (Mixtral, DeepSeek-V3/R1, Qwen3-MoE, Llama-4, gpt-oss)
# miss by their own, wider margin: throughput 17.7 % over 26 rows, ITL/TPOT 39.2 % over 8,
# TTFT 61.9 % over 4 (two of them bursts of every request at once). A ratchet as above;
# their band is the one an estimate of such a model carries.
MOE_BOUNDS = {"throughput": 0.18, "itl_tpot": 0.40, "ttft": 0.62}
# The TensorRT-LLM v0.17 table: every row states its KV cache's format and layout (21.2 %:
# saturated offline runs, which a pass's arithmetic and memory traffic added
# under-predict by ~20 %, where the max of the two had 15.9 %).
V017 = "trtllm-v0.17-"
BOUND_V017 = 0.22


@pytest.fixture(scope="module")
def bench() -> dict:
    return runpy.run_path(str(BENCH))


@pytest.fixture(scope="module")
def compared(bench) -> dict:
    """The comparison, with the projections and engine simulations it ran counted."""
    from profiling.projection import estimate

    calls = {"project": 0, "project_expert_parallel": 0, "simulate": 0}

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    rows = sys.modules["bench._published_rows"]  # imported by the script, where it projects
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows, "project", counted("project", rows.project))
        # MoE rows run with attention in data parallel: the expert-parallel ranks' engines
        patch.setattr(
            rows,
            "project_expert_parallel",
            counted("project_expert_parallel", rows.project_expert_parallel),
        )
        patch.setattr(estimate, "simulate", counted("simulate", estimate.simulate))
        result = bench["compare"](bench["load_rows"]())
    result["calls"] = calls
    return result


def test_the_comparison_projects_each_row_once_and_explains_every_row_it_skips(compared):
    # Its work, not its seconds (bench/estimate_vs_published.py prints those): one
    # projection per expressible row (tensor-parallel or expert-parallel), each
    # `project()` one engine simulation at most.
    calls, counts = compared["calls"], compared["counts"]
    projected = calls["project"] + calls["project_expert_parallel"]
    assert projected == counts["expressible"] and calls["simulate"] <= calls["project"]
    # the collection, the rows added from its sources, and the other rows: other engines',
    # and the 2026 models' (DeepSeek-R1, Qwen3-MoE and Next, Llama-4, gpt-oss)
    assert compared["counts"]["rows"] == 88 + 67 + 51
    for row in compared["rows"]:
        assert row["expressible"] or row["reasons"], row["id"]


def test_the_stored_error_bands_are_what_the_model_projects_today(compared):
    fresh = validation.summary_of(compared)
    stored = validation.stored()
    assert stored["bands"] == fresh["bands"], (
        "profiling/data/validation.json is stale: python bench/estimate_vs_published.py "
        "--write-validation"
    )
    assert stored["points"] == fresh["points"]
    assert stored["kinds"] == fresh["kinds"] and stored["features"] == fresh["features"]


def test_an_estimated_figure_carries_the_band_of_its_metric():
    tput = validation.band("output_tokens_per_second")
    assert tput is not None and tput.rows >= 20
    assert tput.text().startswith(f"± {tput.median_error:.0%} against {tput.rows} published")
    assert validation.band("memory_bytes") is None  # exact, not validated against serving


def test_the_median_error_stays_within_todays_bound(compared, bench):
    kinds = validation.summary_of(compared)["kinds"]
    dense = kinds["dense"]
    assert dense["throughput"]["median_error"] <= BOUND_ALL_ROWS, dense
    assert dense["ttft"]["median_error"] <= BOUND_TTFT, dense
    assert dense["itl_tpot"]["median_error"] <= BOUND_ITL_TPOT, dense
    for metric, bound in MOE_BOUNDS.items():
        moe = kinds["mixture of experts"][metric]
        assert moe["median_error"] <= bound, (metric, moe)
    subset = [r for r in bench["load_rows"]() if r["id"].startswith(V017)]
    result = bench["compare"](subset)
    v017 = result["summary"]["overall"]["throughput"]
    assert v017["rows"] >= 10
    assert v017["median_error"] <= BOUND_V017, v017


def test_a_mixture_of_experts_carries_the_band_of_its_own_kind():
    from profiling.model.shapes import Shapes
    from profiling.projection.estimate import shipped_configs

    configs = shipped_configs()
    tput = "output_tokens_per_second"
    moe = validation.band(tput, Shapes.from_config(configs["qwen3-235b-a22b"]))
    dense = validation.band(tput, Shapes.from_config(configs["llama-3.1-8b"]))
    assert moe is not None and dense is not None
    assert moe.kind == "mixture of experts" and dense.kind == "dense"
    assert moe.median_error > dense.median_error
    assert "of mixture of experts models" in moe.text()
    # A hybrid's state layers were on too few published rows: no band, and the note says so.
    hybrid = Shapes.from_config(configs["nemotron-h-56b"])
    assert validation.band(tput, hybrid) is None
    assert "linear-attention or state-space layers" in validation.unchecked(hybrid)


def test_the_bound_can_fail(bench):
    # The same rows projected at half the datasheet efficiencies miss by far more.
    subset = [r for r in bench["load_rows"]() if r["id"].startswith(V017)]
    worse = bench["compare"](subset, (0.25, 0.35))["summary"]["overall"]["throughput"]
    assert worse["median_error"] > BOUND_V017


def test_a_request_count_is_a_whole_figure_not_the_tail_of_a_name():
    reading = runpy.run_path(str(ROWS))
    stated, requests = reading["stated"], reading["REQUESTS"]
    assert stated(requests, "3000 prompts from ShareGPT_V3 prompts") == (3000, "3000 prompts")
    assert stated(requests, "sampled from ShareGPT_V3 prompts") is None
    assert stated(requests, "1,024 requests at 2 requests per second") == (1024, "1,024 requests")


def test_a_run_through_the_server_gets_the_servers_step_budget(compared):
    setup = {row["id"]: row["setup"] for row in compared["rows"] if row["expressible"]}
    # Every request sent at once to `vllm serve` on an A100: the server's 2,048 tokens a step.
    assert setup["gpustack-qwen3-32b-a100-vllm0110-rand-128-4"]["max_batched_tokens"] == 2048
    # vLLM's offline throughput script on an MI300X: the `LLM` class's budget.
    assert setup["oci-mi300x8-l31-405b-fp8-vllm-throughput-128-128"]["max_batched_tokens"] == 16384
