"""What the engine profile needs from a serving engine: one module per engine.

`experiment.py`, `techniques.py` and `bench.py` speak only to this interface;
`vllm.py` is the one implementation today. An OpenAI-compatible engine with a
benchmark client that saves per-request figures and a Prometheus `/metrics`
(SGLang: `python -m sglang.launch_server`, `sglang.bench_serving`) is a second
module with these names, listed in `ENGINES` (`__init__.py`).

A module conforms structurally (as `typing.Protocol` checks modules); the
test suite checks every listed engine has every member.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class MetricNames:
    """The engine's Prometheus names for the counters the profile reads."""

    ttft_histogram: str  # a histogram: `<name>_sum` and `<name>_count` are read
    tpot_histogram: str
    preemptions: str
    prefix_cache_queries: str  # tokens looked up in the prefix cache
    prefix_cache_hits: str  # tokens found there
    kv_cache_usage: str  # a gauge, 0–1
    spec_drafts: str  # verify steps that carried a draft
    spec_draft_tokens: str
    spec_accepted_tokens: str
    spec_accepted_per_position: str  # labelled `position="i"`
    # The KV-offload connector's: the tokens it was asked for and had, the prompt tokens
    # served by tier (labelled `source`, the host's `host`), and its transfers.
    external_queries: str = ""
    external_hits: str = ""
    cached_by_source: str = ""
    offload_load_bytes: str = ""
    offload_store_bytes: str = ""
    offload_load_seconds: str = ""
    offload_store_seconds: str = ""


class Engine(Protocol):
    NAME: str  # as the option and the result name it ("vllm")
    PYTHON_ENV: str  # the worker setting naming the engine environment's Python
    DRIVER: Path  # the script that runs the engine's benchmark client from that Python
    METRICS: MetricNames

    # -- where it lives and how it starts -------------------------------------------
    def python_path(self) -> Path: ...
    def version(self, python: Path | None = None, device: str = "cpu") -> str | None: ...
    # The one environment of every engine process (server, client, probes) on a device.
    def environment(self, device: str, tensor_parallel: int = 1) -> dict[str, str]: ...
    def client_unusable(
        self, python: Path | None = None, device: str = "cpu", version_found: str | None = None
    ) -> str | None: ...
    def server_flags(
        self, model: str, dtype: str, max_model_len: int, flags: list[str]
    ) -> list[str]: ...
    def server_argv(self, python: Path, port: int, flags: list[str]) -> list[str]: ...
    def serve_command(self, model: str, flags: list[str]) -> str: ...
    def launch_command(self, python: Path, flags: list[str]) -> str: ...
    def failure_reason(self, log: str) -> str: ...

    # -- what its log says --------------------------------------------------------------
    def kv_cache_tokens(self, log: str) -> int | None: ...
    def weights_bytes(self, log: str) -> int | None: ...
    def threads(self, log: str) -> str: ...
    # (block size, blocks) of the KV cache, from its `/metrics` text or else its log.
    def kv_cache_blocks(self, metrics_text: str, log: str) -> tuple[int, int, str] | None: ...

    # -- each technique's flags ---------------------------------------------------------
    def prefix_caching_flags(self, on: bool) -> list[str]: ...
    def offload_flags(self, size_bytes: int) -> list[str]: ...  # a host-memory KV tier
    def speculative_flags(
        self, method: str, k: int, draft: str, ngram: dict[str, int]
    ) -> list[str]: ...
    def quantization_flags(self, method: str) -> list[str] | None: ...
    # Why the engine refuses `method` here before a server starts ("" where it may run),
    # and the kernels its build for this CPU lacks, by method.
    def quantization_unsupported(
        self, method: str, device: str, head_dim: int, lacking: dict[str, str] | None = None
    ) -> str: ...
    def missing_kernels(
        self, python: Path | None = None, device: str = "cpu"
    ) -> dict[str, str]: ...
    def checkpoint_flags(self, path: str, served_as: str) -> list[str]: ...
    def dtype_flags(self, dtype: str) -> list[str]: ...
    def tensor_parallel_flags(self, size: int) -> list[str]: ...
    def names_another_checkpoint(self, flags: list[str]) -> bool: ...

    # -- its benchmark client ---------------------------------------------------------
    def bench_argv(
        self, url: str, model: str, prompt_flags: list[str], requests: int, concurrency: int,
        warmups: int, folder: Path, name: str, goodput: dict[str, float] | None,
    ) -> list[str]: ...  # fmt: skip
    def prompt_flags(
        self, prompt_tokens: int, output_tokens: int, shared_prefix_tokens: int,
        sample_path: Path | None, seed: int,
    ) -> list[str]: ...  # fmt: skip


MEMBERS = tuple(
    name for name in (*Engine.__annotations__, *vars(Engine)) if not name.startswith("_")
)
"""Every name an engine module must define (checked by the test suite)."""
