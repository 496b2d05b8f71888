"""Settings come from the environment, with safe defaults and loud errors."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured

from advisor.celery import app
from advisor.settings import env_bool, env_int, env_list, local_secret_key

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_FILE = ROOT / "advisor" / "settings.py"
# Variables that change what the settings module computes.
ENV_KEYS = (
    "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS",
    "ADVISOR_PRODUCTION", "ADVISOR_DEBUG", "ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME",
    "ADVISOR_CACHE_URL",
)  # fmt: skip


def load_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> dict:
    """The settings module evaluated afresh under `env` (the live settings stay as they are)."""
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ADVISOR_VAR_DIR", str(tmp_path / "var"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(SETTINGS_FILE))


@pytest.mark.parametrize(
    ("raw", "value"), [("1", True), ("TRUE", True), ("no", False), ("0", False)]
)
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, value):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG") is value


def test_env_bool_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        env_bool("X_FLAG")


def test_env_int_refuses_words_and_values_below_the_minimum(monkeypatch):
    monkeypatch.setenv("X_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="not a whole number"):
        env_int("X_N", 1)
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("X_N", 5, minimum=1)
    monkeypatch.delenv("X_N")
    assert env_int("X_N", 5) == 5


def test_env_list_splits_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("X_LIST", " a, b ,,c ")
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    monkeypatch.setenv("X_LIST", "")
    assert env_list("X_LIST", ["default"]) == []


def test_local_defaults_are_sqlite_files_and_an_embedded_redis(monkeypatch, tmp_path):
    conf = load_settings(monkeypatch, tmp_path)
    db = conf["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == str(tmp_path / "var" / "advisor.sqlite3")
    assert db["TEST"]["NAME"].endswith(".sqlite3")  # a file workers can open, never :memory:
    assert conf["DEBUG"] is False
    assert conf["CELERY_BROKER_URL"] == f"redis+socket://{tmp_path / 'var' / 'redis.sock'}"


def test_database_url_and_redis_url_replace_the_defaults(monkeypatch, tmp_path):
    conf = load_settings(
        monkeypatch, tmp_path,
        DATABASE_URL="postgres://u@db.internal:5432/advisor", REDIS_URL="redis://r.internal:6379/0",
        ADVISOR_DB_NAME="test_advisor",
    )  # fmt: skip
    db = conf["DATABASES"]["default"]
    assert (db["ENGINE"], db["HOST"], db["NAME"]) == (
        "django.db.backends.postgresql",
        "db.internal",
        "test_advisor",
    )
    assert conf["CELERY_BROKER_URL"] == "redis://r.internal:6379/0"
    assert conf["ADVISOR_EMBEDDED_REDIS"] is None


def test_production_refuses_the_development_secret(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        load_settings(monkeypatch, tmp_path, ADVISOR_PRODUCTION="1")


def test_production_refuses_a_short_secret_and_no_allowed_hosts(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        load_settings(monkeypatch, tmp_path, ADVISOR_PRODUCTION="1", SECRET_KEY="short")
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        load_settings(
            monkeypatch, tmp_path, ADVISOR_PRODUCTION="1", SECRET_KEY=secrets.token_urlsafe(50)
        )


def test_without_a_secret_a_random_key_of_this_machine_is_made_once(monkeypatch, tmp_path):
    first = load_settings(monkeypatch, tmp_path)["SECRET_KEY"]
    again = load_settings(monkeypatch, tmp_path)["SECRET_KEY"]
    key_file = tmp_path / "var" / "secret_key"
    assert first == again == key_file.read_text() and len(first) >= 50
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert "insecure" not in first


def _read_key_at_once(barrier: Any, path: Path, keys: Any) -> None:
    barrier.wait()
    keys.put(local_secret_key(path))


def test_processes_starting_at_once_all_read_one_whole_key(tmp_path):
    # The two lanes of the suite, or a site's processes, start together on a fresh var/:
    # none may read the file between its making and its writing (an empty SECRET_KEY).
    fork = multiprocessing.get_context("fork")
    path, keys = tmp_path / "var" / "secret_key", fork.Queue()
    barrier = fork.Barrier(8)
    started = [fork.Process(target=_read_key_at_once, args=(barrier, path, keys))
               for _ in range(8)]  # fmt: skip
    for process in started:
        process.start()
    for process in started:
        process.join(60)
    read = {keys.get(timeout=10) for _ in started}
    assert read == {path.read_text()} and len(path.read_text()) >= 50
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no file left behind


def test_while_the_key_is_written_the_key_file_is_not_there_yet(monkeypatch, tmp_path):
    # A process reading the key between the file's making and its writing read ""; the
    # key is written elsewhere first, so the file is whole whenever it is there.
    path, seen = tmp_path / "secret_key", []
    real_fdopen = os.fdopen

    def writing(fd: int, *args: Any, **kwargs: Any) -> Any:
        seen.append(path.exists())
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", writing)
    key = local_secret_key(path)
    assert seen == [False] and path.read_text() == key


def test_an_empty_key_file_is_refused_by_name(tmp_path):
    path = tmp_path / "secret_key"
    path.write_text("")
    with pytest.raises(ImproperlyConfigured, match=f"{path} is empty: delete it"):
        local_secret_key(path)


def test_the_shared_cache_sits_beside_the_broker(monkeypatch, tmp_path):
    conf = load_settings(monkeypatch, tmp_path, CELERY_BROKER_URL="redis://r.internal:6379/0")
    assert conf["CACHES"]["default"]["LOCATION"] == "redis://r.internal:6379/1"
    conf = load_settings(monkeypatch, tmp_path)
    assert conf["CACHES"]["default"]["LOCATION"] == f"unix://{tmp_path / 'var' / 'redis.sock'}?db=1"
    with pytest.raises(ImproperlyConfigured, match="ADVISOR_CACHE_URL"):
        load_settings(monkeypatch, tmp_path, CELERY_BROKER_URL="amqp://guest@localhost//")


def test_a_malformed_rate_stops_the_start(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="ADVISOR_COMMENT_RATE"):
        load_settings(monkeypatch, tmp_path, ADVISOR_COMMENT_RATE="lots")


def test_a_bad_number_in_the_environment_stops_the_start(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="ADVISOR_JOB_TIME_LIMIT_S"):
        load_settings(monkeypatch, tmp_path, ADVISOR_JOB_TIME_LIMIT_S="an hour")


def test_production_passes_the_deploy_checks(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(
        DJANGO_SETTINGS_MODULE="advisor.settings", ADVISOR_PRODUCTION="1",
        SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="advisor.example.com",
        ADVISOR_VAR_DIR=str(tmp_path),
    )  # fmt: skip
    argv = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_plotly_js_is_served_from_the_installed_package():
    found = finders.find("plotly/plotly.min.js")
    assert found and Path(found).stat().st_size > 1_000_000


def test_celery_is_set_up_for_long_jobs():
    conf = app.conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_ignore_result and conf.task_acks_late
    assert conf.worker_prefetch_multiplier == 1 and not conf.task_reject_on_worker_lost
    limit = settings.ADVISOR_JOB_TIME_LIMIT_S
    assert limit < conf.task_soft_time_limit < conf.task_time_limit
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    # No beat: the reaper runs in each worker's announcer thread, never behind queued jobs.
    assert not conf.beat_schedule


@pytest.mark.django_db
def test_the_admin_lists_jobs_and_workers(admin_client):
    from advisor.jobs.models import Job, Worker

    job = Job.objects.create(model_name="demo", result={"memory": {"weights_bytes": 7}})
    Worker.objects.create(name="w@h", host="h", queues=",cpu,")
    assert b"demo" in admin_client.get("/admin/jobs/job/?state__exact=queued").content
    assert b"weights_bytes" in admin_client.get(f"/admin/jobs/job/{job.pk}/change/").content
    assert b"w@h" in admin_client.get("/admin/jobs/worker/").content
