"""Bottleneck Advisor: the Django project. The Celery app loads with Django."""

from __future__ import annotations

from advisor.celery import app as celery_app

__all__ = ("celery_app",)
