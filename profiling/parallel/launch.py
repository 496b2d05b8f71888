"""Run `tp_worker` under torchrun as a subprocess and turn its JSON into a `MeasuredTP`.

A failed or timed-out run is a result, not an exception: `MeasuredTP.status`
says "failed" and `reason` says why (the worker's own error when rank 0
wrote one, else the last lines torchrun printed), so the profile goes on.
On a timeout the whole process group (torchrun and its ranks) is killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiling.parallel.results import MeasuredTP
from profiling.results import Samples

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 300.0
# Split and whole logits agree to rounding: relative to the largest logit,
# float32 sums in another order stay within 1e-4; 16-bit types within 2e-2.
LOGIT_TOLERANCE = {"float32": 1e-4}
HALF_LOGIT_TOLERANCE = 2e-2
_NOISE = ("Warning", "warn(", "W1", "Failed to load", "Loading weights", "register_constant")


@dataclass
class TPRequest:
    """What the worker measures: sizes, repeats and where the model lives."""

    model_path: str
    tp_size: int
    device: str  # "cpu" or "cuda"
    dtype: str  # torch dtype name
    prompt_tokens: int
    decode_batch: int
    decode_context: int
    warmup: int = 1
    repeats: int = 5
    greedy_tokens: int = 8
    seed: int = 0
    threads_per_rank: int | None = None  # CPU only; default cores / tp_size


def command(spec_path: Path, tp_size: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(tp_size),
        "-m",
        "profiling.parallel.tp_worker",
        str(spec_path),
    ]


def _env(threads: int) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT),
        "OMP_NUM_THREADS": str(threads),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


def run_tp(request: TPRequest, timeout_s: float = DEFAULT_TIMEOUT_S) -> MeasuredTP:
    """Launch torchrun with `request.tp_size` ranks; a MeasuredTP either way."""
    threads = request.threads_per_rank or max(1, (os.cpu_count() or 1) // request.tp_size)
    base = _base(request, threads)
    with tempfile.TemporaryDirectory(prefix="tp-run-") as tmp:
        spec_path, out = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec = {**vars(request), "threads_per_rank": threads, "out": str(out)}
        spec_path.write_text(json.dumps(spec))
        started = time.monotonic()
        code, stderr = _run(command(spec_path, request.tp_size), _env(threads), timeout_s)
        base.wall_seconds = time.monotonic() - started
        data = _read(out)
    if code is None:
        return _failed(base, f"torchrun did not finish within {timeout_s:.0f} s and was killed")
    if "run" in data and code == 0:
        return from_run(base, data["run"], request.dtype)
    reason = data.get("error") or _tail(stderr) or f"torchrun exited with status {code}"
    return _failed(base, f"torchrun failed (exit status {code}): {reason}")


def _base(request: TPRequest, threads: int) -> MeasuredTP:
    return MeasuredTP(
        status="failed",
        tp_size=request.tp_size,
        backend="nccl" if request.device == "cuda" else "gloo",
        device=request.device,
        threads_per_rank=None if request.device == "cuda" else threads,
        prompt_tokens=request.prompt_tokens,
        decode_batch=request.decode_batch,
        decode_context_tokens=request.decode_context,
    )


def _failed(base: MeasuredTP, reason: str) -> MeasuredTP:
    base.status, base.reason = "failed", reason
    return base


def _run(cmd: list[str], env: dict[str, str], timeout_s: float) -> tuple[int | None, str]:
    """(exit status or None on timeout, stderr + stdout text)."""
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, so a timeout kills every rank
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return None, output
    return proc.returncode, output


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


# A rank's exception line ("OSError: ...", "[rank1]: torch.OutOfMemoryError: ...").
_RAISED = re.compile(r"^(?:\[rank\d+\]:\s*)?(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): ")


def _tail(text: str, lines: int = 3) -> str:
    """The last exception a rank printed, else the last lines: torchrun's own summary
    ("error_file: <N/A>", a banner of '=') comes after the rank's traceback when the
    rank that failed was not the one writing the result."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    kept = [line for line in kept if not any(noise in line for noise in _NOISE)]
    raised = [line for line in kept if _RAISED.match(line)]
    if raised:
        return raised[-1][:800]
    return " | ".join(kept[-lines:])[-800:]


def _ratio(a: Samples | None, b: Samples | None) -> float | None:
    return a.median / b.median if a and b and b.median else None


def logits_match(difference: float | None, scale: float | None, dtype: str) -> bool | None:
    """Whether split logits equal the whole model's to rounding for `dtype`."""
    if difference is None:
        return None
    tolerance = LOGIT_TOLERANCE.get(dtype, HALF_LOGIT_TOLERANCE)
    return difference <= tolerance * max(1.0, scale or 0.0)


def from_run(base: MeasuredTP, run: dict[str, Any], dtype: str = "float32") -> MeasuredTP:
    """The MeasuredTP of a finished worker's `run` object."""
    samples = {
        key: Samples(run[key]) if run.get(key) else None
        for key in (
            "prefill_samples",
            "single_prefill_samples",
            "decode_samples",
            "single_decode_samples",
        )
    }
    shards = [int(b) for b in run["weights_bytes_per_rank"]]
    single = int(run.get("single_weights_bytes") or 0)
    base.status = "measured"
    base.backend = run.get("backend", base.backend)
    base.weights_bytes_per_rank = shards
    base.weights_storage_bytes_per_rank = [int(b) for b in run["weights_storage_bytes_per_rank"]]
    base.single_weights_bytes = single
    base.weights_ratio = max(shards) / single if single else None
    base.kv_bytes_per_token_per_rank = [int(b) for b in run["kv_bytes_per_token_per_rank"]]
    base.single_kv_bytes_per_token = run.get("single_kv_bytes_per_token")
    base.prefill_seconds = samples["prefill_samples"]
    base.single_prefill_seconds = samples["single_prefill_samples"]
    base.prefill_ratio = _ratio(base.prefill_seconds, base.single_prefill_seconds)
    base.decode_step_seconds = samples["decode_samples"]
    base.single_decode_step_seconds = samples["single_decode_samples"]
    base.decode_ratio = _ratio(base.decode_step_seconds, base.single_decode_step_seconds)
    base.max_logit_difference = run.get("max_logit_difference")
    base.logits_match = logits_match(base.max_logit_difference, run.get("logits_scale"), dtype)
    base.greedy_tokens_match = run.get("greedy_tokens_match")
    base.greedy_tokens = int(run.get("greedy_tokens") or 0)
    return base
