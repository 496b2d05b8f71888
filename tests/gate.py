"""A gate that holds a real job mid-run until the test opens it.

A test that must act while a job runs (cancel it, kill its child, freeze its worker)
cannot count on the job still running: a fast machine may finish it first. A worker
started with `gate.env()` runs its jobs' children with tests/gate_site on PYTHONPATH;
there, a `python -m profiling job` child loads the model, reporting its progress, and
stops at its first report of the next phase (STOP_PHASE) until the gate is opened.
So once `gate.holds(job)`, the job is RUNNING, its row shows the progress the child
stopped at, and it stays so until `gate.open()`, however fast the machine.

    gate = Gate(tmp_path / "gate")
    worker = worker_factory(["test-q"], gate.env())
    job = wait_for_job(submit_demo(queue="test-q").pk, until=gate.holds)
    ...  # act on the running job
    gate.open()  # let it (and every later job of that worker) run on

A job that fails before its model has loaded (a missing model) never reaches the gate.
Only tests/gate_site/sitecustomize.py calls `hold_this_child`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.jobs.models import Job

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(__file__).resolve().parent / "gate_site"
GATE_ENV = "ADVISOR_TEST_GATE"
OPEN = "open"
# The runner's first phase once the model has loaded (profiling.runner._run); the load's
# own reports carry other names too ("load", "demo" while the demo model is built).
STOP_PHASE = "memory"
POLL_S = 0.05

Report = Callable[[str, float, str], None]


@dataclass(frozen=True)
class Gate:
    """A folder: `open` in it lets children pass; `held-<pid>` says child pid stopped there,
    holding the fraction it reported."""

    folder: Path

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        """A worker's extra environment: its jobs' children stop at this gate."""
        # ROOT too, so the site can import this module whatever the child's PYTHONPATH.
        path = [str(SITE), str(ROOT), os.environ.get("PYTHONPATH", "")]
        return {GATE_ENV: str(self.folder), "PYTHONPATH": os.pathsep.join(p for p in path if p)}

    def held_at(self, child_pid: int | None) -> float | None:
        """The fraction child `child_pid` stopped at, or None if it has not reached the gate."""
        try:
            return float((self.folder / f"held-{child_pid}").read_text())
        except (OSError, ValueError):  # not there yet, or caught mid-write
            return None

    def holds(self, job: Job) -> bool:
        """`job` runs, its child waits here, and the row shows the progress it stopped at
        (so no report of the child's is still on its way to the row)."""
        held = self.held_at(job.child_pid)
        return (
            job.state == job.State.RUNNING
            and held is not None
            and abs(job.progress - held) < 1e-3  # the protocol rounds fractions to 4 places
        )

    def is_open(self) -> bool:
        return (self.folder / OPEN).exists()

    def open(self) -> None:
        (self.folder / OPEN).touch()


def hold_this_child() -> None:
    """In a job's child: make `profiling.runner.run_profile` stop at the gate named by
    $ADVISOR_TEST_GATE, at its first progress report of STOP_PHASE."""
    from profiling import runner

    gate = Gate(Path(os.environ[GATE_ENV]))
    run_profile = runner.run_profile

    def gated_run_profile(config: Any, progress: Report | None = None, clock: Any = None) -> Any:
        return run_profile(config, _stopping_once(progress, gate), clock)

    runner.run_profile = gated_run_profile  # cmd_job imports it when it runs


def _stopping_once(progress: Report | None, gate: Gate) -> Report:
    stopped = False

    def report(phase: str, fraction: float, message: str) -> None:
        nonlocal stopped
        if progress is not None:
            progress(phase, fraction, message)  # a new phase: the line is written at once
        if stopped or phase != STOP_PHASE:
            return
        stopped = True
        held = gate.folder / f"held-{os.getpid()}"
        partial = held.with_suffix(".tmp")
        partial.write_text(repr(round(fraction, 4)))
        partial.rename(held)
        while not gate.is_open():
            time.sleep(POLL_S)

    return report
