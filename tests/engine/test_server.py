"""The engine server's life, with a real process standing in for the engine.

A stdlib HTTP server answers `GET /health` (a file named `health` in its folder),
so every test here starts, watches and stops real processes in their own process
group: the parts that keep a profile from leaving a server behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from profiling.engine import vllm
from profiling.engine.server import EngineFailed, Server, port_listening
from tests.processes import alive_with_tag, tagged_environment


def http_server(folder: Path):
    (folder / "health").write_text("ok")

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                "--directory", str(folder)]  # fmt: skip

    return command


def wait_until(check, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def make(folder: Path, command, timeout_s: float = 30.0, env: dict | None = None) -> Server:
    env = dict(os.environ) if env is None else env
    return Server(command, folder / "server.log", env, timeout_s, vllm.failure_reason)


def test_a_server_starts_healthy_and_stopping_it_leaves_nothing_listening(tmp_path):
    server = make(tmp_path, http_server(tmp_path))
    with server:
        assert port_listening(server.port)
        assert server.start_seconds > 0
    assert not port_listening(server.port)


def test_two_servers_at_once_never_share_a_port(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    with make(a, http_server(a)) as one, make(b, http_server(b)) as two:
        assert one.port != two.port
        assert port_listening(one.port) and port_listening(two.port)


def test_a_server_that_exits_fails_with_the_reason_from_its_log(tmp_path):
    said = "ValueError: unsupported architecture Foo"
    script = f"import sys; print({said!r}, file=sys.stderr); sys.exit(1)"
    server = make(tmp_path, lambda port: [sys.executable, "-c", script])
    with pytest.raises(EngineFailed, match="ValueError: unsupported architecture Foo"):
        server.start()


def test_a_server_that_never_becomes_healthy_is_stopped_at_its_timeout(tmp_path):
    tag, env = tagged_environment()
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    server = make(tmp_path, lambda port: sleeper, 3, env)
    with pytest.raises(EngineFailed, match="did not become healthy within 3 s"):
        server.start()
    assert alive_with_tag(tag) == []  # stopped, not left sleeping


def test_killing_the_job_that_started_it_ends_the_server(tmp_path):
    """A job child killed with SIGKILL cannot stop its server: the guard does."""
    (tmp_path / "health").write_text("ok")
    job = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from tests.engine.test_server import http_server, make
        from pathlib import Path
        server = make(Path({str(tmp_path)!r}), http_server(Path({str(tmp_path)!r}))).start()
        print(server.port, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", job], stdout=subprocess.PIPE, text=True)
    port = int(child.stdout.readline())
    assert port_listening(port)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert wait_until(lambda: not port_listening(port)), "the server outlived its job"
