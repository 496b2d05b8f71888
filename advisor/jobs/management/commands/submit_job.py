"""`manage.py submit_job`: submit a job from the terminal and watch it to the end.

The flags are the new-job form's fields and go through the same form, so the
checks and messages are the browser's; --conversations FILE is read by the form's
own upload check, as a browser's upload of it is. While the job runs, a progress bar
(phase, %, message) is redrawn in place; then the share link (its path) and a
one-paragraph summary are printed.

Exit status: 0 succeeded (or submitted, with --no-wait), 1 failed, cancelled or
not submitted (queue down), 2 bad input, 3 still running at --timeout.
"""

from __future__ import annotations

import os
import time
from argparse import ArgumentParser
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from advisor.jobs import dispatch, reaper, submission
from advisor.jobs.models import Job
from profiling.cli_common import add_option_flags, add_technique_flags
from profiling.options import NAMES, OPTIONS, parse_names
from profiling.techniques import experiment_names

BAR_WIDTH = 30
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_TIMEOUT = 1, 2, 3
# Form field → the flag that sets it, so an error names what the user typed. The
# declared options' flags are the library CLI's own (profiling.options).
SITE_FLAGS = {
    "model_name": "--model", "model_source": "--source", "dtype": "--dtype",
    "quick": "--full", "gpu_kind": "--gpu", "run_on": "--run-on",
    "stated_bottleneck": "--stated-bottleneck", "notes": "--notes",
    "conversation_file": "--conversations",
}  # fmt: skip


def flag_of(field: str) -> str:
    """The flag that sets a form field ("" for none)."""
    option = OPTIONS.get(field)
    return option.flag if option is not None else SITE_FLAGS.get(field, "")


def bar(job: Job) -> str:
    """`[#########.....]  42 %  decode: batch 4` for a job row."""
    done = max(0.0, min(1.0, job.progress))
    filled = round(done * BAR_WIDTH)
    what = ": ".join(part for part in (job.phase, job.message) if part) or job.state
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done:4.0%}  {what}"[:120]


def summary(job: Job) -> str:
    """One paragraph: the verdict and the advice's first line, or why it ended."""
    if job.state != Job.State.SUCCEEDED:
        reason = job.error or job.message or "no reason was recorded"
        return f"The job {job.get_state_display().lower()}: {reason}"
    result = job.result or {}
    parts = [
        (result.get("verdict") or {}).get("summary"),
        (result.get("advice") or {}).get("summary"),
    ]
    return " ".join(f"{p.rstrip('.')}." for p in parts if p) or "Profile complete."


class Command(BaseCommand):
    help = "Submit a profiling job (the new-job form's fields as flags) and follow it."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--model", default="demo", help="demo, a Hub id or /a/local/dir")
        parser.add_argument("--source", default="demo", choices=list(Job.ModelSource.values))
        parser.add_argument("--dtype", default="auto")
        parser.add_argument("--full", action="store_true", help="full sweeps (default: quick)")
        parser.add_argument("--gpu", default="", help="target GPU kind (H100, L4, …); blank: any")
        parser.add_argument("--run-on", default="", help="a live queue, or wait-for-target")
        add_option_flags(parser, "hardware", "workload")
        parser.add_argument("--stated-bottleneck", default="unsure")
        parser.add_argument("--notes", default="")
        parser.add_argument(
            "--conversations", default="", metavar="FILE",
            help="your conversations, JSON Lines (OpenAI chat messages or ShareGPT), as the "
            "form's upload and estimate --conversations take them",
        )  # fmt: skip
        parser.add_argument(
            "--experiments", default="", help=f"comma-separated: {','.join(experiment_names())}"
        )
        add_technique_flags(parser)
        add_option_flags(parser, "engine", "fleet")
        parser.add_argument(
            "--token",
            default=os.environ.get("ADVISOR_API_TOKEN", ""),
            help="the site's access token when it sets one (default: $ADVISOR_API_TOKEN)",
        )
        parser.add_argument("--no-wait", action="store_true", help="print the link and return")
        parser.add_argument("--timeout", type=float, help="stop watching after this many seconds")
        parser.add_argument("--poll", type=float, default=0.5, help="seconds between polls")

    def handle(self, *args: Any, **options: Any) -> None:
        experiments = parse_names(options["experiments"])
        unknown = [name for name in experiments if name not in experiment_names()]
        if unknown:
            raise self.bad_input(
                [f"--experiments: unknown {', '.join(unknown)}; "
                 f"choose from {', '.join(experiment_names())}"]
            )  # fmt: skip
        if not submission.token_accepted(options["token"]):
            raise self.bad_input(["--token: this site creates jobs only with its access token"])
        with self.uploads(options["conversations"]) as files:
            form, errors = submission.check(self.values(options, experiments), files)
        if errors:
            raise self.bad_input(
                [f"{flag_of(field)}: {m}".lstrip(": ") for field, ms in errors.items()
                 for m in ms]
            )  # fmt: skip
        try:
            job = submission.submit(form, Job.Origin.CLI)
        except dispatch.QueueUnavailable as exc:
            raise CommandError(f"not submitted: {exc}", returncode=EXIT_FAILED) from exc
        link = reverse("jobs:detail", args=[job.share_token])
        self.stdout.write(f"submitted: {link}")
        if options["no_wait"]:
            return
        job = self.follow(job, options["poll"], options["timeout"])
        self.stdout.write(f"share link: {link}\n\n{summary(job)}")
        if not job.is_final:
            raise CommandError(
                "still running; it goes on without this command", returncode=EXIT_TIMEOUT
            )
        if job.state != Job.State.SUCCEEDED:
            raise CommandError(f"job {job.state}", returncode=EXIT_FAILED)

    def values(self, options: dict[str, Any], experiments: list[str]) -> dict[str, Any]:
        """The form's fields from the flags (a GPU alias such as H100 is resolved by
        `submission.check`, as the API's is)."""
        values = {
            "model_name": options["model"], "model_source": options["source"],
            "dtype": options["dtype"], "quick": not options["full"],
            "gpu_kind": options["gpu"], "run_on": options["run_on"],
            "stated_bottleneck": options["stated_bottleneck"], "notes": options["notes"],
        }  # fmt: skip
        for option in OPTIONS.values():
            value = options[option.name]
            if option.kind == NAMES:
                if not value:
                    continue  # the form's own ticks, as a field left out
                value = parse_names(value)
            values[option.name] = value
        values.update({f"run_{name}": True for name in experiments})
        return values

    @contextmanager
    def uploads(self, conversations: str) -> Iterator[dict[str, File]]:
        """The files the form checks as a browser's uploads: --conversations FILE, open
        while the form reads it (its size is checked before it is read); {} without one."""
        if not conversations:
            yield {}
            return
        try:
            opened = open(conversations, "rb")  # noqa: SIM115 - closed below, after the check
        except OSError as exc:  # in the words of estimate --conversations
            raise self.bad_input(
                [f"--conversations: cannot read {conversations}: {exc.strerror}"]
            ) from None
        with opened:
            yield {"conversation_file": File(opened, name=os.path.basename(conversations))}

    def bad_input(self, lines: list[str]) -> CommandError:
        return CommandError("bad input:\n  " + "\n  ".join(lines), returncode=EXIT_BAD_INPUT)

    def follow(self, job: Job, poll_s: float, timeout_s: float | None) -> Job:
        """Redraw the bar until the job ends (or the timeout); returns the fresh row."""
        tty = self.stdout.isatty()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        shown = ""
        while True:
            reaper.reap_if_due()  # a lost worker is noticed without a beat process
            job.refresh_from_db()
            line = bar(job)
            if line != shown:
                # In place on a terminal; one line per change in a log.
                self.stdout.write(f"\r{line:<120}" if tty else line, ending="" if tty else "\n")
                self.stdout.flush()
                shown = line
            if job.is_final or (deadline is not None and time.monotonic() > deadline):
                if tty:
                    self.stdout.write("")
                return job
            time.sleep(poll_s)
