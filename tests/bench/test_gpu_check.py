"""The GPU readiness check, run as its CPU smoke run: every check runs and says something.

`python bench/gpu_check.py --device cpu` is what a GPU user runs with `--device
cuda`; here it runs whole, in its own process, on the small shape. Its speed
goals are printed by the script, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model  # bench/gpu_check.py on this CPU: real models, real timings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("gpu-check") / "out.json"
    done = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--device", "cpu", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def test_copy_bandwidth_and_decode_on_both_paths(check):
    report, printed = check
    copy = report["copy_bandwidth_bytes_per_s"]
    assert copy > 0 and "copy bandwidth" in printed
    decode = report["shapes"]["small"]["decode"]
    for path in ("static-compiled", "eager"):
        for batch in ("1", "32"):
            row = decode[path][batch]
            assert row["path"] == path, row["path_reason"]
            assert row["p10_ms"] <= row["ms_per_step"] <= row["p90_ms"]
            assert len(row["samples_s"]) >= 5
            assert row["fraction_of_copy"] == pytest.approx(row["bytes_per_s"] / copy)
    assert set(report["shapes"]["small"]["eager_over_compiled"]) == {"1", "32"}
    assert "step time eager / static-compiled" in printed


def test_prefill_and_bf16_exactness_are_reported(check):
    report, printed = check
    shape = report["shapes"]["small"]
    assert shape["prefill"]["flops_per_s"] > 0 and shape["prefill"]["fraction_of_peak"] is None
    assert "no datasheet peak" in printed
    exact = shape["exactness_bf16"]
    assert 0 <= exact["agreement"] <= 1 and exact["tokens"] == 32
    assert exact["first_divergence"] is None or 0 <= exact["first_divergence"] < 32
    assert exact["max_abs_logit_diff"] >= 0 and "bf16 exactness" in printed


def test_every_quantization_method_says_whether_it_runs_here(check):
    report, _ = check
    methods = report["quantization"]
    assert methods["fp32"] == "runs" and methods["int8"] == "runs"
    # CUDA-only kernels say so, with the reason rather than a failure.
    assert methods["int4"].startswith("not available: ") and "CUDA" in methods["int4"]
    assert methods["fp8"].startswith("not available: ")
    assert all(
        s == "runs" or s.startswith(("not available: ", "failed: ")) for s in methods.values()
    )


def test_a_quick_profile_runs_through_the_command_line(check):
    report, printed = check
    quick = report["quick_profile"]
    assert quick["status"] == "ran", quick.get("error")
    assert quick["wall_s"] > 0 and quick["decode_paths"] == ["static"]
    assert f"{report['wall_s']} s" in printed
