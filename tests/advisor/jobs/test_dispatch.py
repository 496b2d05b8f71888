"""Queues, submit (row first, message after commit) and the embedded broker."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.db import transaction
from django.utils import timezone

from advisor import embedded_redis
from advisor.celery import app
from advisor.jobs import dispatch
from advisor.jobs.models import Job, Worker

# No worker consumes this queue: a published message stays there to be seen.
IDLE_QUEUE = "gpu-b200"


def queue_length(redis_url: str, queue: str) -> int:
    socket = redis_url.removeprefix("redis+socket://")
    client = (
        redis.Redis(unix_socket_path=socket) if redis_url != socket else redis.from_url(redis_url)
    )
    try:
        return client.llen(queue)
    finally:
        client.close()


@pytest.fixture
def dead_broker(settings):
    """Point the site at a broker that is not there (and must not be started)."""
    saved = app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS = None
    app.conf.broker_url = "redis+socket:///nonexistent/advisor/redis.sock"
    yield app.conf.broker_url
    app.conf.broker_url = saved


@pytest.mark.parametrize(
    ("gpu_kind", "queue"),
    [("", "default"), ("H100", "gpu-h100-sxm"), ("h100-sxm", "gpu-h100-sxm"), ("L4", "gpu-l4")],
)
def test_a_job_goes_to_its_target_gpu_queue(gpu_kind, queue):
    assert dispatch.queue_for(Job(gpu_kind=gpu_kind)) == queue


@pytest.mark.django_db
def test_available_queues_lists_only_live_workers(settings):
    stale = timezone.now() - timedelta(seconds=settings.ADVISOR_WORKER_STALE_S + 1)
    cpu = Worker.objects.create(name="a@x", host="x", queues=Worker.wrap_queues(["cpu", "default"]))
    gpu = Worker.objects.create(
        name="b@y", host="y", queues=Worker.wrap_queues(["gpu-l4", "default"])
    )
    Worker.objects.create(name="c@z", host="z", queues=",gpu-h100-sxm,", last_seen=stale)
    served = dispatch.available_queues()
    assert list(served) == ["default", "gpu-l4", "cpu"]
    assert served["default"] == [cpu, gpu] and served["cpu"] == [cpu]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_submit_saves_the_row_then_publishes_the_id(redis_url):
    before = queue_length(redis_url, IDLE_QUEUE)
    job = dispatch.submit(model_source="demo", model_name="demo", queue=IDLE_QUEUE)
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and job.dispatched_at is not None
    assert queue_length(redis_url, IDLE_QUEUE) == before + 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_submit_takes_the_target_queue_unless_told(redis_url):
    assert dispatch.submit(model_name="demo", gpu_kind="B200").queue == IDLE_QUEUE
    job = Job(model_name="demo", gpu_kind="B200", queue="cpu")
    dispatch.submit(job)
    assert Job.objects.get(pk=job.pk).queue == "cpu"  # the form's choice stands


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_submit_with_redis_down_raises_and_leaves_no_row(dead_broker, monkeypatch):
    tries: list[object] = []
    connect = socket.socket.connect

    def counted(sock: socket.socket, address: object) -> None:
        tries.append(address)
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", counted)
    job = Job(model_name="demo", queue="cpu")
    with pytest.raises(dispatch.QueueUnavailable, match="unreachable"):
        dispatch.submit(job)
    # A page must not hang on a dead broker: a bounded number of tries, short pauses.
    policy = app.conf.task_publish_retry_policy
    broker = app.conf.broker_url.removeprefix("redis+socket://")
    assert tries.count(broker) == policy["max_retries"] + 1, tries
    assert policy["max_retries"] * policy["interval_max"] <= 1.0
    assert not Job.objects.exists()
    assert job.pk is None  # the form can show the same input again


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_submit_with_redis_down_on_tcp_fails_fast_too(settings):
    saved = app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS = None
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        with pytest.raises(dispatch.QueueUnavailable):
            dispatch.submit(model_name="demo", queue="cpu")
    finally:
        app.conf.broker_url = saved
    assert not Job.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_publish_waits_for_the_commit(redis_url, dead_broker):
    with pytest.raises(dispatch.QueueUnavailable), transaction.atomic():
        job = dispatch.submit(model_name="demo", queue="cpu")
        assert Job.objects.filter(pk=job.pk).exists()  # saved, not yet published
    assert not Job.objects.exists()


def test_the_embedded_redis_is_reused_when_it_answers(tmp_path):
    socket = tmp_path / "r.sock"
    try:
        assert embedded_redis.ensure(socket)
        assert not embedded_redis.ensure(socket)
        assert embedded_redis.is_running(socket)
    finally:
        embedded_redis.stop(socket)
    assert not embedded_redis.is_running(socket)


def test_two_processes_starting_the_embedded_redis_share_one(tmp_path):
    socket = tmp_path / "r.sock"
    code = f"from advisor import embedded_redis as e; print(e.ensure({str(socket)!r}))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    try:
        outputs = sorted(p.communicate(timeout=600)[0].strip() for p in procs)
        assert outputs == ["False", "False", "True"]  # exactly one started it
        assert embedded_redis.is_running(socket)
    finally:
        embedded_redis.stop(socket)


def test_a_stale_socket_file_is_replaced(tmp_path):
    socket = tmp_path / "r.sock"
    Path(socket).write_text("")  # left behind by a server that died
    try:
        assert embedded_redis.ensure(socket)
        assert embedded_redis.is_running(socket)
    finally:
        embedded_redis.stop(socket)
