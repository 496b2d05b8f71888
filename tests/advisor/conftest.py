"""Fixtures shared by the site's tests: a browser-like client, a live CPU worker row, a
stopped rate-limit clock, a broker that is down, and real demo results (profiled once
per session, then cached)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import django_ratelimit.core
import pytest
from django.test import Client

from advisor.celery import app
from advisor.jobs.models import Worker
from tests.advisor.reports.test_charts import real_demo_profile, real_spec_profile


@pytest.fixture
def browser() -> Client:
    """A test client that enforces CSRF, as a browser's requests must pass it."""
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def cpu_worker() -> Worker:
    """A worker row serving `cpu` and `default`, seen just now (the form offers it)."""
    return Worker.objects.create(
        name="local@host", host="host", queues=",cpu,default,",
        devices=[{"device": "cpu", "name": "CPU"}],
    )  # fmt: skip


@pytest.fixture
def rate_clock_stopped(monkeypatch) -> None:
    """django-ratelimit's clock stopped: a test's hits all count in one window, however
    long it takes (a window turns over mid-test now and then, a minute's most often)."""
    now = time.time()
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: now))


@pytest.fixture
def dead_broker(settings):
    """A broker address nothing listens on (and that must not be started)."""
    saved = app.conf.broker_url
    settings.ADVISOR_EMBEDDED_REDIS = None
    app.conf.broker_url = "redis+socket:///nonexistent/advisor/redis.sock"
    yield
    app.conf.broker_url = saved


@pytest.fixture
def demo_result() -> dict[str, Any]:
    """A stored real profile of the demo model (see test_charts.stored_result): read, not
    measured, so a test that only reads a result needs no model."""
    return real_demo_profile()


@pytest.fixture
def spec_result() -> dict[str, Any]:
    """A stored real speculative profile of the demo model."""
    return real_spec_profile()


@pytest.fixture
def model_root(tmp_path: Path, settings) -> Path:
    root = tmp_path / "models"
    (root / "tiny").mkdir(parents=True)
    settings.ADVISOR_MODEL_ROOTS = [str(root)]
    return root
