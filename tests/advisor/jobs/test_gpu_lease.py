"""GPU leases: each job's child gets its own devices, across worker processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.jobs import gpus

# A backstop for a process that never answers, not a speed check: a slow machine waits.
# The holders are daemons, so a failed test does not wait this long for them at exit.
BACKSTOP_S = 600


def _hold(folder: str, devices: list[int], count: int, out, release) -> None:
    with gpus.lease(devices, count, Path(folder)) as held:
        out.put(held)
        release.wait(BACKSTOP_S)


def test_two_processes_never_share_a_gpu_and_a_third_waits(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out, release = ctx.Queue(), ctx.Event()
    holders = [
        ctx.Process(target=_hold, args=(str(tmp_path), [0, 1, 2, 3], 2, out, release), daemon=True)
        for _ in range(2)
    ]
    for p in holders:
        p.start()
    first, second = out.get(timeout=BACKSTOP_S), out.get(timeout=BACKSTOP_S)
    assert sorted(first + second) == [0, 1, 2, 3]  # disjoint, all four used
    waits: list[str] = []
    with (
        pytest.raises(gpus.NoDevices, match="gave up after 1 s waiting for 1 free GPU of 4"),
        gpus.lease([0, 1, 2, 3], 1, tmp_path, lambda m: waits.append(m) or True, timeout_s=1),
    ):
        pass
    assert waits and waits[0] == "waiting for 1 free GPU of 4"
    release.set()
    for p in holders:
        p.join(BACKSTOP_S)
    with gpus.lease([0, 1, 2, 3], 4, tmp_path) as held:
        assert held == [0, 1, 2, 3]  # the holders' exits released every lock


def test_a_killed_holder_releases_its_gpus(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out, release = ctx.Queue(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), [5], 1, out, release), daemon=True)
    holder.start()
    assert out.get(timeout=BACKSTOP_S) == [5]
    holder.kill()
    holder.join(BACKSTOP_S)
    # Free at the first try: a wait would stop the lease at once (NoDevices).
    with gpus.lease([5], 1, tmp_path, on_wait=lambda message: False) as held:
        assert held == [5]


def test_a_cancelled_job_stops_waiting(tmp_path):
    with (
        gpus.lease([0], 1, tmp_path),
        pytest.raises(gpus.NoDevices, match="stopped while waiting"),
        gpus.lease([0], 1, tmp_path, on_wait=lambda message: False),
    ):
        pass


def test_what_a_job_needs_and_sees():
    config = SimpleNamespace(tp_measure=None, experiments=["parallel"])
    assert gpus.needed(config, 4) == 2 and gpus.needed(config, 1) == 1
    assert gpus.needed(config, 0) == 0  # a CPU worker leases nothing
    assert gpus.needed(SimpleNamespace(tp_measure=4, experiments=[]), 8) == 4
    assert gpus.needed(SimpleNamespace(tp_measure=0, experiments=["parallel"]), 8) == 1
    with (
        pytest.raises(gpus.NoDevices, match="needs 4 GPUs and the worker has 2"),
        gpus.lease([0, 1], 4, Path("/nonexistent")),
    ):
        pass
    assert gpus.visible([2, 3]) == {"CUDA_VISIBLE_DEVICES": "2,3"} and gpus.visible([]) == {}
    assert gpus.declared("0, 2") == [0, 2] and gpus.declared("") == []
    with pytest.raises(ValueError, match="distinct indices"):
        gpus.declared("1,1")


@pytest.mark.django_db(transaction=True)
def test_the_jobs_child_sees_only_the_gpus_it_was_given(settings, tmp_path, demo_model_dir):
    from advisor.jobs import dispatch, tasks
    from advisor.jobs.models import Job

    settings.ADVISOR_WORKER_GPUS = "3,7"
    settings.VAR_DIR = tmp_path
    job = dispatch.submit(
        model_source="demo", model_name="demo", quick=True, queue="nowhere",
        prompt_tokens=64, output_tokens=16, concurrency=2,
    )  # fmt: skip
    lease = Job.objects.claim(job.pk, "test-host")
    with gpus.lease([3], 1, tmp_path / "gpus"):  # another job holds GPU 3
        outcome = tasks._run_child(Job.objects.get(pk=job.pk), lease)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result["environment"]["visible_devices"] == "7"
