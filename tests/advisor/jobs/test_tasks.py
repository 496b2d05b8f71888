"""run_job on a real worker: claim, child process, progress, outcome, cancel."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from advisor.jobs import child, dispatch, profile_config
from advisor.jobs.models import Job, Worker
from profiling.config import ConfigError, ProfileConfig
from profiling.profile import Profile
from tests.conftest import JOB_TIMEOUT_S, wait_for_job
from tests.gate import Gate
from tests.polling import until

pytestmark = pytest.mark.django_db(transaction=True)
State = Job.State
# A small workload keeps the quick profile to seconds on two cores.
SMALL = {"prompt_tokens": 64, "output_tokens": 16, "concurrency": 2}


def submit_demo(queue: str = "cpu") -> Job:
    return dispatch.submit(model_source="demo", model_name="demo", quick=True, queue=queue, **SMALL)


def submit_local(path: Path | str, queue: str = "cpu") -> Job:
    return dispatch.submit(model_source="local", model_name=str(path), queue=queue, **SMALL)


def missing_model() -> Path:
    return Path(settings.ADVISOR_MODEL_ROOTS[0]) / "no-such-model"


def pid_gone(pid: int, timeout_s: float = 60) -> bool:
    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return until(gone, timeout_s)


@pytest.mark.slow
def test_a_demo_job_succeeds_with_a_measured_result(worker, demo_model_dir):
    job = wait_for_job(submit_demo().pk)
    assert job.state == State.SUCCEEDED, job.error
    assert job.result["memory"]["weights_bytes"] > 0
    profile = Profile.from_dict(job.result)
    assert profile.model.name == "demo"
    assert job.device.startswith("cpu")
    assert (job.progress, job.attempts, job.child_pid) == (1.0, 1, None)
    assert job.worker_host == worker.name
    assert job.started_at <= job.heartbeat_at <= job.finished_at


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "reason"),
    [("missing", "bad model: model path"), ("outside", "not allowed: ")],
)
def test_a_bad_model_fails_with_the_reason(worker, tmp_path, where, reason):
    path = missing_model() if where == "missing" else tmp_path
    job = wait_for_job(submit_local(path).pk)
    assert job.state == State.FAILED
    assert job.error.startswith(reason), job.error
    assert "Traceback" not in job.error and job.message == job.error[:512]


@pytest.mark.postgres
@pytest.mark.slow
def test_the_same_job_delivered_twice_runs_once(worker):
    job = submit_local(missing_model())
    dispatch.enqueue(job)  # a second message for the same row
    sentinel = submit_local(missing_model())  # one worker, FIFO: it runs after both
    wait_for_job(sentinel.pk)
    job.refresh_from_db()
    assert job.state == State.FAILED and job.attempts == 1


@pytest.mark.slow
def test_cancel_stops_a_running_child_and_a_queued_job_never_starts(
    worker_factory, demo_model_dir, tmp_path
):
    gate = Gate(tmp_path / "gate")  # the first job runs until cancelled, however fast
    gated = worker_factory(["test-cancel"], gate.env())
    try:
        running, queued = submit_demo(queue="test-cancel"), submit_demo(queue="test-cancel")
        job = wait_for_job(running.pk, until=gate.holds)
        child_pid = job.child_pid
        assert dispatch.cancel(queued) and queued.state == State.CANCELLED
        assert dispatch.cancel(job)
        job = wait_for_job(job.pk)
        assert job.state == State.CANCELLED and job.result is None
        assert not gate.is_open() and pid_gone(child_pid)  # stopped while still held
        gate.open()
        sentinel = wait_for_job(submit_local(missing_model(), queue="test-cancel").pk)
        assert sentinel.state == State.FAILED
        queued.refresh_from_db()
        assert queued.state == State.CANCELLED and queued.attempts == 0
    finally:
        gated.stop()


@pytest.mark.slow
def test_the_worker_announces_itself_and_never_loads_torch(worker):
    row = wait_for_worker_row(worker.name, lambda w: bool(w.devices))
    assert row.queue_list == ["cpu", "default"]
    assert row.devices[0]["device"] == "cpu"
    served = dispatch.available_queues()
    assert row in served["cpu"] and row in served["default"]
    main = psutil.Process(worker.proc.pid)
    for proc in [main, *main.children(recursive=True)]:
        try:
            if "profiling" not in " ".join(proc.cmdline()):  # a job's own child may load torch
                assert not loads_torch(proc.pid), proc.cmdline()
        except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):
            continue  # a pool process or a probe that just exited (one task per child)


def wait_for_worker_row(name: str, until, timeout_s: float = JOB_TIMEOUT_S) -> Worker:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = Worker.objects.filter(name=name).first()
        if row is not None and until(row):
            return row
        time.sleep(0.2)
    pytest.fail(f"worker row {name} not ready in {timeout_s} s")


def loads_torch(pid: int) -> bool:
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs /proc (Linux)")
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


# --- The child's protocol, without a worker -----------------------------------


def test_progress_lines_are_parsed_and_anything_else_ignored():
    line = b'{"event": "progress", "phase": "decode", "fraction": 1.7, "message": "step"}\n'
    assert child.parse_progress(line) == child.Progress("decode", 1.0, "step")
    for junk in (b"Loading weights...\n", b'{"event": "log"}', b"[1, 2]", b""):
        assert child.parse_progress(junk) is None


@pytest.mark.parametrize(
    ("returncode", "written", "error"),
    [
        (3, {"error": {"kind": "out_of_memory", "message": "CUDA OOM"}}, "out of memory: CUDA OOM"),
        (2, {"error": {"kind": "remote_code", "message": "no"}}, "remote code refused: no"),
        (-9, None, "killed by signal 9 (SIGKILL) — the system may have run out of memory"),
        (-11, None, "killed by signal 11 (SIGSEGV)"),
        (0, None, "the profiler exited without writing a result"),
        (1, None, "the profiler exited with status 1: ValueError: boom"),
    ],
)
def test_exit_statuses_become_reasons(tmp_path, returncode, written, error):
    out = tmp_path / "result.json"
    if written is not None:
        out.write_text(json.dumps(written))
    outcome = child.outcome_of(returncode, out, "ValueError: boom")
    assert (outcome.status, outcome.error) == (child.Outcome.FAILED, error)


def test_a_result_with_exit_zero_succeeds(tmp_path):
    out = tmp_path / "result.json"
    out.write_text(json.dumps({"memory": {"weights_bytes": 1}}))
    outcome = child.outcome_of(0, out, "")
    assert outcome.status == child.Outcome.SUCCEEDED and outcome.result["memory"]


def test_the_stderr_tail_keeps_the_error_not_the_traceback(tmp_path):
    code = "import sys; print('warming up', file=sys.stderr); raise ValueError('boom')"
    proc = child.Child.start([sys.executable, "-c", code], tmp_path, {})
    assert proc.wait(30) == 1
    assert proc.stderr_tail() == "warming up | ValueError: boom"


def test_a_row_becomes_the_config_the_child_runs(settings):
    settings.ADVISOR_MODEL_ROOTS = ["/models"]
    job = Job(
        model_source=Job.ModelSource.LOCAL, model_name="/models/llama", dtype="bfloat16",
        quick=False, gpu_kind="H100-SXM", gpu_count=2, prompt_tokens=900, shared_prefix_tokens=100,
        tpot_ms=40.0, stated_bottleneck=Job.Bottleneck.MEMORY,
    )  # fmt: skip
    config = profile_config.config_for(job)
    assert (config.model, config.source, config.device, config.dtype) == (
        "/models/llama", "local", "auto", "bfloat16"
    )  # fmt: skip
    assert (config.hardware.gpu_kind, config.hardware.gpu_count) == ("H100-SXM", 2)
    assert (config.workload.prompt_tokens, config.workload.tpot_ms) == (900, 40.0)
    assert config.allowed_roots == ["/models"] and config.stated_bottleneck == "memory"
    assert ProfileConfig.from_dict(config.to_dict()) == config


def test_a_row_the_library_rejects_fails_before_any_child_starts():
    job = Job(model_name="demo", prompt_tokens=10, shared_prefix_tokens=20)
    with pytest.raises(ConfigError, match="shared_prefix_tokens"):
        profile_config.config_for(job)


def test_a_database_call_retries_with_doubling_waits_until_the_lease_runs_out(settings) -> None:
    from django.db import OperationalError

    from advisor.jobs.tasks import RETRY_MAX_S, LeaseClock, LeaseRanOut, retried

    # The lease can be valid for 60 s after the last beat: the stale limit less two beats.
    settings.ADVISOR_HEARTBEAT_S, settings.ADVISOR_HEARTBEAT_STALE_S = 5, 70
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    failures = iter([True, True, True])

    def write() -> bool:
        if next(failures, False):
            raise OperationalError("the database is away")
        return True

    assert retried(write, LeaseClock(lambda: now[0]), sleep=sleep)
    assert slept == [0.5, 1.0, 2.0]
    # Away for good: it waits up to RETRY_MAX_S at a time and gives up at the lease's end.
    now[0], slept[:] = 0.0, []

    def away() -> bool:
        raise OperationalError("the database is away")

    with pytest.raises(LeaseRanOut):
        retried(away, LeaseClock(lambda: now[0]), sleep=sleep)
    assert max(slept) == RETRY_MAX_S and sum(slept) == 60.0
