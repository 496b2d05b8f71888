"""The engine profile: the user's model served by an engine, measured at the user's workload.

One server per configuration, each started, used for every run it serves and
stopped (always, under `_guard.py`):
- the reference server (the engine's defaults; vLLM's have prefix caching on): the concurrency
  sweep at the user's workload, prefix caching's "on" side, the greedy text and
  the perplexity every variant is checked against;
- prefix caching off: the same prompts again;
- speculative decoding, n-gram and a draft model, one server per draft length;
- the quantizations the engine runs itself (fp8 weights, fp8 KV cache, our GPTQ
  checkpoint when the quantization experiment saved one);
- tensor parallelism over two ranks when asked;
- the profile's conversations, turn by turn, on the reference server, and on a GPU again
  on a server with a host-memory KV tier (`profiling.engine.conversation_replay`).
A configuration the engine cannot start or finish is recorded as
"engine failed: <its reason>" and the rest of the profile stands.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from profiling.engine import ENGINES, bench, client
from profiling.engine.chat_results import RAN
from profiling.engine.conversation_replay import offload_replay, reference_replay
from profiling.engine.interface import Engine
from profiling.engine.plan import CHECK_PROMPTS, CHECK_TOKENS, EVAL_WINDOW, NGRAM, EnginePlan
from profiling.engine.results import EngineResult, Launch, ServingPoint
from profiling.engine.server import EngineFailed, Server, tail
from profiling.engine.techniques import (
    measure_quantization,
    measure_speculative,
    measure_tensor_parallel,
    prefix_result,
)
from profiling.projection.conversation_workloads import Conversation

Progress = Callable[[str, float, str], None]


@dataclass
class Target:
    """What the engine serves and how the user's traffic looks."""

    model: str  # a directory or a Hub id, as the engine takes it
    device: str
    dtype: str
    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int
    concurrency: int
    max_model_len: int
    goodput: dict[str, float] | None  # the user's targets, {"ttft": ms, "tpot": ms}
    prompt_sample: list[str]
    check_prompts: list[str]
    eval_ids: list[int]  # our evaluation text, tokenized; [] when quality is meaningless
    gptq_dir: str | None = None  # a checkpoint our quantization experiment saved
    engine: str = "vllm"  # a name in ENGINES
    head_dim: int = 0  # the attention heads' width (0: unknown), which some formats need
    # The profile's conversations (none: not replayed), the model's vocabulary their ids
    # are mapped into, and on a GPU the host tier to measure: its bytes, and the KV bytes
    # of a token that turn them into tokens.
    conversations: list[Conversation] = field(default_factory=list)
    vocab_size: int = 0
    offload_bytes: int | None = None
    kv_bytes_per_token: int = 0


class Session:
    """Starts servers for one profile; records every launch and failure."""

    def __init__(
        self, engine: Engine, python: Path, target: Target, plan: EnginePlan, folder: Path
    ) -> None:
        self.engine, self.python, self.target = engine, python, target
        self.plan, self.folder = plan, folder
        self.launches: list[Launch] = []
        self.failures: list[str] = []
        self._count = 0

    def flags(self, extra: list[str]) -> list[str]:
        t = self.target
        return self.engine.server_flags(t.model, t.dtype, t.max_model_len, extra)

    def server(self, purpose: str, extra: list[str], tensor_parallel: int = 1) -> Server:
        self._count += 1
        flags = self.flags(extra)
        log = self.folder / f"server-{self._count}.log"
        engine = self.engine
        launch = Launch(purpose, engine.launch_command(self.python, flags), "starting")
        self.launches.append(launch)
        return Server(
            lambda port: engine.server_argv(self.python, port, flags),
            log,
            self.environment(tensor_parallel),
            self.plan.start_timeout_s,
            engine.failure_reason,
        )

    def environment(self, tensor_parallel: int = 1) -> dict[str, str]:
        """The one environment of the server, its client and any probe of this profile."""
        return self.engine.environment(self.target.device, tensor_parallel)

    def failed(self, purpose: str, exc: Exception) -> str:
        reason = str(exc) or type(exc).__name__
        if self.launches and self.launches[-1].purpose == purpose:
            self.launches[-1].status, self.launches[-1].error = "failed", reason
            self.launches[-1].logs = getattr(exc, "logs", {})
        self.failures.append(f"{purpose}: engine failed: {reason}")
        return reason

    def ran(self, server: Server) -> None:
        self.launches[-1].status = "ran"
        self.launches[-1].start_s = round(server.start_seconds, 1)

    def runs(self, server: Server, runs: list[bench.Run]) -> list[ServingPoint]:
        """The client's runs against `server`; a failure keeps both logs' last lines."""
        t = self.target
        try:
            return bench.run_all(
                self.engine, self.python, server.url, t.model, runs, self.folder,
                self.plan.run_timeout_s, self.environment(),
            )  # fmt: skip
        except EngineFailed as exc:
            exc.logs.setdefault("server", tail(server.log_text()))
            raise

    def workload(self, concurrency: int) -> bench.Prompts:
        """The prompts of the run at `concurrency`: the same on every server, so variants
        compare request for request, and different at each concurrency, so no run finds
        another run's whole prompts in the cache (only the shared prefix, as a server
        in steady state has it; the benchmark's warm-up request puts it there)."""
        t = self.target
        seed = 1 + (
            self.plan.concurrencies.index(concurrency)
            if concurrency in self.plan.concurrencies
            else len(self.plan.concurrencies)
        )
        sample = None
        if t.prompt_sample:
            sample = self.folder / "prompt_sample.jsonl"
            if not sample.exists():
                sample.write_text(
                    "".join(json.dumps({"prompt": p}) + "\n" for p in t.prompt_sample)
                )
        return bench.Prompts(t.prompt_tokens, t.output_tokens, t.shared_prefix_tokens, sample, seed)

    def run(self, name: str, concurrency: int) -> bench.Run:
        requests = self.plan.requests.get(concurrency, max(2 * concurrency, 8))
        return bench.Run(
            f"{name}-c{concurrency}", concurrency, requests, self.workload(concurrency),
            self.plan.warmups, self.target.goodput,
        )  # fmt: skip


def run_engine(
    target: Target, plan: EnginePlan, progress: Progress, folder: Path | None = None
) -> EngineResult:
    """Measure `target` on its engine; the parts that fail are recorded, never raised."""
    started = time.monotonic()
    engine = ENGINES[target.engine]
    python = engine.python_path()
    version = engine.version(python, target.device)
    result = EngineResult(
        name=engine.NAME, version=version or "", command="",
        serve_command=engine.serve_command(target.model, engine.server_flags(
            target.model, target.dtype, target.max_model_len, [])),
        dtype=target.dtype, max_model_len=target.max_model_len,
    )  # fmt: skip
    if version is None:
        result.failures.append(
            f"engine failed: no {engine.NAME} in {python} (create it with scripts/engine-env, "
            f"or set {engine.PYTHON_ENV})"
        )
        return result
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    kept = contextlib.nullcontext(str(folder)) if folder is not None else None
    with kept or tempfile.TemporaryDirectory(prefix="engine-") as d:
        session = Session(engine, python, target, plan, Path(d))
        _measure(session, result, progress)
    result.launches, result.failures = session.launches, session.failures
    result.wall_s = round(time.monotonic() - started, 1)
    return result


def _measure(session: Session, result: EngineResult, progress: Progress) -> None:
    t, plan = session.target, session.plan
    reference: dict = {}
    engine = session.engine
    progress("engine", 0.0, f"starting {engine.NAME} with its defaults")
    try:
        with session.server("reference", []) as server:
            session.ran(server)
            result.command = session.launches[-1].command
            result.serving = session.runs(
                server, [session.run("sweep", c) for c in plan.concurrencies]
            )
            reference["texts"] = client.greedy_texts(
                server.url, t.model, t.check_prompts[:CHECK_PROMPTS], CHECK_TOKENS
            )
            reference["nll"] = client.nll_of(server.url, t.model, t.eval_ids, EVAL_WINDOW)
            if reference["nll"]:
                result.perplexity = client.perplexity(*reference["nll"])
                result.eval_tokens = reference["nll"][1]
            log = server.log_text()
            result.kv_cache_tokens = engine.kv_cache_tokens(log)
            result.threads = engine.threads(log)
            if t.conversations:
                progress("engine", 0.2, "the conversations, turn by turn")
                result.conversations = reference_replay(session, server)
    except EngineFailed as exc:
        session.failed("reference", exc)
        return  # without the reference nothing else can be compared
    progress("engine", 0.25, "prefix caching off, on the same prompts")
    try:
        off_flags = engine.prefix_caching_flags(on=False)
        with session.server("prefix caching off", off_flags) as server:
            session.ran(server)
            off = session.runs(server, [session.run("prefix-off", t.concurrency)])[0]
            on = next(p for p in result.serving if p.concurrency == t.concurrency)
            result.prefix_caching = prefix_result(off, on, t, engine.prefix_caching_flags(True))
    except EngineFailed as exc:
        session.failed("prefix caching off", exc)
    chats = result.conversations
    if chats is not None and chats.offload_status == RAN:
        progress("engine", 0.35, "the conversations with a host-memory KV tier")
        offload_replay(session, chats)
    progress("engine", 0.4, "speculative decoding")
    result.speculative = measure_speculative(session, result.serving, reference, NGRAM)
    progress("engine", 0.7, "quantization on the engine")
    result.quantization = measure_quantization(session, result.serving, reference)
    if plan.tensor_parallel > 1:
        progress("engine", 0.9, f"tensor parallel over {plan.tensor_parallel} ranks")
        result.tensor_parallel = measure_tensor_parallel(session, result.serving, reference)
    progress("engine", 1.0, "engine measurements done")
