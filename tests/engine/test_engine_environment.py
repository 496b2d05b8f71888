"""Every engine process runs in one environment, and a process that dies says how.

A stand-in for the engine's Python (a script that records the environment it was
given, then acts as the server, the benchmark client or a probe) shows that the
server, the client (which also reads the server's counters) and the probes are
started with the same variables. Processes killed by a real signal show that the
failure names it. Where the engine's environment exists, its own platform check
is run under that environment and must find the CPU (on a CPU without AVX-512,
any other answer kills the client with SIGILL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiling.engine import vllm
from profiling.engine.experiment import Session, Target
from profiling.engine.plan import make_plan
from profiling.engine.server import EngineFailed, Server, ended, signal_of
from tests.engine.engine_env import require_engine

# A stand-in for the engine's interpreter: it appends the environment it got
# (and what it was asked to do) to ENV_LOG, then behaves as asked:
#   -c CODE                a probe: prints a version
#   -m <server module> ... a server: answers /health until killed
#   DRIVER PLAN            the benchmark client: ACT decides (ok, sigill)
STAND_IN = textwrap.dedent(
    """\
    #!{python}
    import json, os, signal, sys
    with open({log!r}, "a") as out:
        out.write(json.dumps({{"argv": sys.argv[1:4], "env": dict(os.environ)}}) + "\\n")
    args = [a for a in sys.argv[1:] if a != "-I"]
    if args[0] == "-c":
        print("0.32.0")
    elif args[0] == "-m":
        port = args[args.index("--port") + 1]
        os.execv({python!r}, [{python!r}, "-m", "http.server", port, "--bind", "127.0.0.1",
                             "--directory", {folder!r}])
    elif os.environ.get("STAND_IN_ACT") == "sigill":
        os.kill(os.getpid(), signal.SIGILL)
    """
)


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    (tmp_path / "health").write_text("ok")
    log = tmp_path / "env.jsonl"
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(STAND_IN.format(python=sys.executable, log=str(log), folder=str(tmp_path)))
    python.chmod(0o755)
    monkeypatch.setenv(vllm.PYTHON_ENV, str(python))
    return python, log


def recorded(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def session(tmp_path: Path, python: Path) -> Session:
    target = Target(
        model="m", device="cpu", dtype="float32", prompt_tokens=16, output_tokens=4,
        shared_prefix_tokens=0, concurrency=1, max_model_len=128, goodput=None,
        prompt_sample=[], check_prompts=[], eval_ids=[],
    )  # fmt: skip
    plan = make_plan(1, quick=True, ks=None, ngram=False, draft=None, tensor_parallel=0)
    plan.start_timeout_s, plan.run_timeout_s = 30, 60
    return Session(vllm, python, target, plan, tmp_path)


def test_the_server_the_client_and_the_probes_get_one_environment(tmp_path, stand_in):
    python, log = stand_in
    s = session(tmp_path, python)
    assert vllm.version(python, "cpu") == "0.32.0"
    # The stand-in client saves no result: the run fails after it started.
    with s.server("reference", []) as server, pytest.raises(EngineFailed):
        s.runs(server, [s.run("sweep", 1)])
    calls = recorded(log)
    probe, server_call, client_call = (
        next(c for c in calls if what in c["argv"]) for what in ("-c", "-m", str(vllm.DRIVER))
    )
    assert probe["env"] == server_call["env"] == client_call["env"]
    assert server_call["env"]["VLLM_TARGET_DEVICE"] == "cpu"
    assert "PYTHONPATH" not in client_call["env"]


def test_the_client_check_runs_in_that_environment_too(tmp_path, stand_in):
    python, log = stand_in
    assert vllm.client_unusable(python, "cpu") is None
    (check,) = [c for c in recorded(log) if "--check" in c["argv"]]
    assert check["env"] == vllm.environment("cpu")
    log.unlink()
    assert vllm.client_unusable(python, "cpu") is None  # kept: not imported again
    assert not [c for c in recorded(log) if "--check" in c["argv"]]


def test_a_client_killed_by_sigill_is_named_and_its_log_kept(tmp_path, stand_in, monkeypatch):
    python, _ = stand_in
    monkeypatch.setenv("STAND_IN_ACT", "sigill")
    s = session(tmp_path, python)
    with s.server("reference", []) as server, pytest.raises(EngineFailed) as failed:
        s.runs(server, [s.run("sweep", 1)])
    message = str(failed.value)
    assert message.startswith("benchmark: killed by SIGILL (illegal instruction: a binary built")
    assert "no output" in message and "exited without a message" not in message
    assert failed.value.logs["client"] == [] and "server" in failed.value.logs
    s.failed("reference", failed.value)
    assert s.launches[-1].logs == failed.value.logs


def test_the_unusable_client_is_reported_not_offered(tmp_path, stand_in, monkeypatch):
    python, _ = stand_in
    monkeypatch.setenv("STAND_IN_ACT", "sigill")
    said = vllm.client_unusable(python, "cpu")
    assert said is not None
    assert said.startswith("engine client unusable on this CPU: killed by SIGILL (illegal")


def test_a_server_killed_by_a_signal_names_it(tmp_path):
    script = "import os, signal, sys; print('loading', flush=True); os.kill(os.getpid(), 11)"
    server = Server(
        lambda port: [sys.executable, "-c", script], tmp_path / "server.log", dict(os.environ),
        30, vllm.failure_reason,
    )  # fmt: skip
    with pytest.raises(EngineFailed) as failed:
        server.start()
    assert str(failed.value).startswith("killed by SIGSEGV (segmentation fault")
    assert failed.value.logs["server"] == ["loading"]


def test_a_silent_exit_says_no_output_and_its_status(tmp_path):
    server = Server(
        lambda port: [sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path / "server.log",
        dict(os.environ), 30, vllm.failure_reason,
    )  # fmt: skip
    with pytest.raises(EngineFailed, match=r"^no output \(exit status 3\)$"):
        server.start()


@pytest.mark.parametrize(
    ("code", "name"),
    [(-signal.SIGILL, "SIGILL"), (132, "SIGILL"), (-9, "SIGKILL"), (139, "SIGSEGV"), (1, None)],
)
def test_exit_statuses_read_as_signals_the_way_a_shell_reports_them(code, name):
    found = signal_of(code)
    assert (found.name if found else None) == name


def test_a_signal_keeps_the_reason_the_log_gave():
    said = ended(-9, "RuntimeError: CPU out of memory\n", vllm.failure_reason)
    assert (
        said == "killed by SIGKILL (killed outright: most often the kernel's out-of-memory "
        "killer): RuntimeError: CPU out of memory"
    )


@pytest.mark.engine
def test_the_engines_own_platform_check_finds_the_cpu_in_that_environment():
    python = require_engine()
    # The driver's version mapping, then vLLM's platform check: what the client does.
    code = (
        f"import runpy, sys; d = runpy.run_path({str(vllm.DRIVER)!r}); "
        "import importlib.metadata as m; m.version = d['_vllm_version']; "
        "from vllm.platforms import current_platform as p; print(p.device_type)"
    )
    done = subprocess.run(
        [str(python), "-I", "-c", code], capture_output=True, text=True, timeout=300,
        env=vllm.environment("cpu"),
    )  # fmt: skip
    assert done.returncode == 0, ended(done.returncode, done.stderr, vllm.failure_reason)
    assert done.stdout.strip().splitlines()[-1] == "cpu"
    assert vllm.client_unusable(python, "cpu") is None


def test_a_worker_offers_the_engine_only_where_its_client_runs(stand_in, monkeypatch):
    from advisor.jobs.workers import probe_engines

    cpu = [{"device": "cpu"}]
    assert probe_engines(cpu) == {"vllm": "0.32.0"}
    monkeypatch.setenv("STAND_IN_ACT", "sigill")
    for stamp in stand_in[0].parent.parent.glob(".client-check-*"):
        stamp.unlink()  # the answer kept for the CPU above; this "CPU" differs
    assert probe_engines(cpu) == {}
