"""Fixtures shared by the site's tests: a browser-like client and a live CPU worker row."""

from __future__ import annotations

import pytest
from django.test import Client

from advisor.jobs.models import Worker


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
