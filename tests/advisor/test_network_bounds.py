"""Every network client has its bounds: the settings reach the real sockets.

Read from the sockets themselves (timeouts, SO_KEEPALIVE, the TCP keepalive and
user-timeout options) of real connections to a real redis-server on TCP, and from libpq
for PostgreSQL; a server that accepts and never answers shows the read bound in action.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import ConnectionHandler

from advisor import embedded_redis
from advisor.cache import SharedRedisCache
from advisor.celery import app
from tests.advisor.test_settings import load_settings

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "TCP_USER_TIMEOUT"), reason="reads Linux's TCP socket options"
)
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def tcp_redis() -> Iterator[str]:
    """A redis-server of this module's own on a TCP port (the embedded one has none)."""
    port = free_port()
    server = subprocess.Popen(
        [embedded_redis.executable(), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            assert time.monotonic() < deadline and server.poll() is None, "no redis-server"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: a link that died quietly."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for conn in held:
        conn.close()


def tcp_bounds(sock: socket.socket) -> dict[str, float]:
    tcp = socket.IPPROTO_TCP
    return {
        "timeout_s": sock.gettimeout(),
        "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        "idle_s": sock.getsockopt(tcp, socket.TCP_KEEPIDLE),
        "interval_s": sock.getsockopt(tcp, socket.TCP_KEEPINTVL),
        "probes": sock.getsockopt(tcp, socket.TCP_KEEPCNT),
        "user_timeout_ms": sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
    }


def expected(timeout_s: float | None = None) -> dict[str, float]:
    """What a socket of these settings carries (`timeout_s`: its read timeout)."""
    found = {
        "keepalive": 1, "idle_s": settings.KEEPALIVE_IDLE_S,
        "interval_s": settings.KEEPALIVE_INTERVAL_S, "probes": settings.KEEPALIVE_PROBES,
        "user_timeout_ms": settings.ADVISOR_DEAD_LINK_S * 1000,
    }  # fmt: skip
    return found if timeout_s is None else {"timeout_s": timeout_s, **found}


BOUNDS = ("ADVISOR_DEAD_LINK_S", "ADVISOR_DB_CONNECT_TIMEOUT_S", "ADVISOR_REDIS_TIMEOUT_S",
          "ADVISOR_REDIS_CONNECT_TIMEOUT_S", "ADVISOR_CACHE_TIMEOUT_S",
          "ADVISOR_BROKER_HEALTH_CHECK_S")  # fmt: skip


def test_by_default_a_dead_link_is_found_within_25_s(monkeypatch, tmp_path):
    for name in BOUNDS:
        monkeypatch.delenv(name, raising=False)
    conf = load_settings(monkeypatch, tmp_path)
    assert conf["KEEPALIVE_IDLE_S"] + conf["KEEPALIVE_PROBES"] * conf["KEEPALIVE_INTERVAL_S"] == 25
    assert conf["ADVISOR_DEAD_LINK_S"] == 25
    assert (conf["ADVISOR_REDIS_TIMEOUT_S"], conf["ADVISOR_CACHE_TIMEOUT_S"]) == (5, 2)


def test_a_dead_link_bound_too_short_for_three_probes_stops_the_start(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="ADVISOR_DEAD_LINK_S"):
        load_settings(monkeypatch, tmp_path, ADVISOR_DEAD_LINK_S="3")


def test_the_brokers_connections_carry_the_timeouts_and_keepalives(tcp_redis):
    with app.connection_for_write(url=f"{tcp_redis}/0") as conn:
        channel = conn.default_channel  # connects and PINGs
        # The publisher's and the ack's pool, and the worker's BRPOP and pub/sub pool.
        for pool in (channel.client.connection_pool, channel.async_pool):
            connection = pool.get_connection()
            try:
                connection.connect()
                assert tcp_bounds(connection._sock) == expected(settings.ADVISOR_REDIS_TIMEOUT_S)
                assert connection.socket_connect_timeout == settings.ADVISOR_REDIS_CONNECT_TIMEOUT_S
                assert connection.health_check_interval == settings.ADVISOR_BROKER_HEALTH_CHECK_S
            finally:
                pool.release(connection)
    # However long the cut, a worker keeps reconnecting (Celery's default stops at 100 tries).
    assert app.conf.broker_connection_max_retries is None
    # No result backend: the job row is the result, so there is no other Redis client to bound.
    assert app.conf.result_backend is None


def test_the_shared_caches_connection_carries_the_timeouts_and_keepalives(tcp_redis):
    cache = SharedRedisCache(f"{tcp_redis}/1", settings.CACHES["default"])
    cache.set("bounded", 1)
    connection = cache._cache.get_client(write=True).connection_pool.get_connection()
    assert tcp_bounds(connection._sock) == expected(settings.ADVISOR_CACHE_TIMEOUT_S)
    assert connection.socket_connect_timeout == settings.ADVISOR_CACHE_TIMEOUT_S


def test_on_a_unix_socket_both_clients_work_without_tcp_options(tmp_path):
    # redis-py's unix-socket connection refuses keepalive arguments: kombu drops them for
    # redis+socket://, and the cache must drop them for unix:// or every call would fail.
    sock = Path(f"/tmp/advisor-bounds-{os.getpid()}.sock")
    embedded_redis.ensure(sock)
    try:
        cache = SharedRedisCache(f"unix://{sock}?db=1", settings.CACHES["default"])
        cache.set("unix", 2)
        assert cache.get("unix") == 2
        with app.connection_for_write(url=embedded_redis.url(sock)) as conn:
            assert conn.default_channel.client.ping()
    finally:
        embedded_redis.stop(sock)


def test_a_silent_cache_fails_a_call_within_its_timeout(silent_server):
    cache = SharedRedisCache(f"redis://127.0.0.1:{silent_server}/1", settings.CACHES["default"])
    start = time.monotonic()
    with pytest.raises(Exception, match="[Tt]imeout"):
        cache.get("anything")
    assert time.monotonic() - start < settings.ADVISOR_CACHE_TIMEOUT_S + 1.5


# Run with the environment under test, so the chain env → settings → kombu is what answers.
SILENT_BROKER = """
import json, sys, time, django
django.setup()
from advisor.celery import app
start = time.monotonic()
try:
    with app.connection_for_read(url=sys.argv[1]) as conn:
        conn.default_channel
    error = ""
except Exception as exc:
    error = repr(exc)
print(json.dumps({"took_s": time.monotonic() - start, "error": error}))
"""


def test_a_silent_broker_fails_a_call_within_the_setting_from_the_environment(silent_server):
    env = {**os.environ, "ADVISOR_REDIS_TIMEOUT_S": "2", "ADVISOR_REDIS_CONNECT_TIMEOUT_S": "1",
           "DJANGO_SETTINGS_MODULE": "advisor.settings"}  # fmt: skip
    url = f"redis://127.0.0.1:{silent_server}/0"
    done = subprocess.run([sys.executable, "-c", SILENT_BROKER, url], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # Without a socket timeout this call waits for as long as the server stays silent.
    assert "Timeout reading" in found["error"], found
    assert 2 <= found["took_s"] < 4, found


def test_postgresqls_connection_carries_the_bounds_libpq_accepts(monkeypatch, tmp_path):
    conf = load_settings(
        monkeypatch, tmp_path, DATABASE_URL="postgres://u@db.invalid:5432/advisor",
        ADVISOR_DEAD_LINK_S="40", ADVISOR_DB_CONNECT_TIMEOUT_S="7",
    )  # fmt: skip
    params = ConnectionHandler({"default": conf["DATABASES"]["default"]})[
        "default"
    ].get_connection_params()
    keys = {k: v for k, v in params.items() if isinstance(v, str | int)}
    # libpq's own parser: an option it did not know would raise here, not at the first outage.
    parsed = {
        o.keyword.decode(): o.val.decode()
        for o in psycopg.pq.Conninfo.parse(psycopg.conninfo.make_conninfo(**keys).encode())
        if o.val is not None
    }
    assert {k: parsed[k] for k in ("connect_timeout", "keepalives", "keepalives_idle",
                                   "keepalives_interval", "keepalives_count",
                                   "tcp_user_timeout")} == {
        "connect_timeout": "7", "keepalives": "1", "keepalives_idle": "16",
        "keepalives_interval": "8", "keepalives_count": "3", "tcp_user_timeout": "40000",
    }  # fmt: skip


PG_SOCKET = """
import json, os, socket, django
django.setup()
from django.db import connection
connection.ensure_connection()
sock = socket.socket(fileno=os.dup(connection.connection.pgconn.socket))
tcp = socket.IPPROTO_TCP
print(json.dumps({
    "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
    "idle_s": sock.getsockopt(tcp, socket.TCP_KEEPIDLE),
    "interval_s": sock.getsockopt(tcp, socket.TCP_KEEPINTVL),
    "probes": sock.getsockopt(tcp, socket.TCP_KEEPCNT),
    "user_timeout_ms": sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
}))
"""


def test_a_real_postgresql_connection_carries_them_on_its_socket():
    url = os.environ.get("ADVISOR_TEST_POSTGRES_URL", "")
    if not url.startswith(("postgres://", "postgresql://")) or "@/" in url:
        pytest.skip("needs ADVISOR_TEST_POSTGRES_URL, a PostgreSQL reached over TCP")
    # The server's maintenance database: the URL's own is made by the PostgreSQL tier's
    # test runner (as test_<name>), so it may not exist when this test runs.
    url = urlsplit(url)._replace(path="/postgres").geturl()
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "advisor.settings"}
    for name in ("ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", PG_SOCKET], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == expected()
