"""`python -m profiling`: profile a model, run a site job, list devices.

    profile MODEL [flags]        readable summary on stdout, progress on stderr,
                                 Profile JSON with --json PATH
    estimate MODEL --gpu KIND    advice and projected figures from a config alone
                                 (profiling.estimate_cli); no weights, no download
    job --spec S.json --out R.json
                                 the web app's worker entry: progress as JSON lines
                                 on stdout, the result (or an error) in R.json
    devices                      this machine's devices as JSON

Exit codes: 0 done; 2 bad input or a refused model (ConfigError or
ProfilingError); 3 out of memory; 4 (job only) an internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from profiling import estimate_cli
from profiling.advice.summary import render_summary
from profiling.caching.sample import read_prompt_sample
from profiling.cli_common import (
    add_conversations_flag,
    add_option_flags,
    add_technique_flags,
    add_workload_flags,
    hardware_from_args,
    technique_options_from_args,
    workload_from_args,
    write_json_atomic,
)
from profiling.config import (
    DEVICES,
    SOURCES,
    ConfigError,
    ProfileConfig,
)
from profiling.errors import OutOfMemory, ProfilingError, error_kind, is_out_of_memory, one_line
from profiling.estimate_cli import render_deployments
from profiling.fleet_cli import render_fleet
from profiling.projection.conversation_workloads import read_conversation_file
from profiling.techniques import experiment_names

if TYPE_CHECKING:
    from profiling.profile import Profile

EXIT_OK, EXIT_BAD_INPUT, EXIT_OOM, EXIT_INTERNAL = 0, 2, 3, 4
JOB_PROGRESS_INTERVAL_S = 0.25  # at most ~4 progress lines a second (plus phase changes)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m profiling", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    profile = commands.add_parser("profile", help="profile a model on this machine")
    _add_profile_flags(profile)
    profile.set_defaults(func=cmd_profile)
    job = commands.add_parser("job", help="run one site job (worker entry)")
    job.add_argument("--spec", required=True, type=Path, help="ProfileConfig JSON")
    job.add_argument("--out", required=True, type=Path, help="where the result JSON goes")
    job.set_defaults(func=cmd_job)
    devices = commands.add_parser("devices", help="list this machine's devices as JSON")
    devices.set_defaults(func=cmd_devices)

    estimate_cli.register(commands)
    return parser


def _add_profile_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="demo name, Hugging Face repo id, or local directory")
    p.add_argument("--source", choices=SOURCES, default="auto")
    p.add_argument("--device", choices=DEVICES, default="auto")
    p.add_argument("--quick", action="store_true", help="a short sweep (seconds on a tiny model)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the Profile JSON here")
    add_workload_flags(p)
    p.add_argument(
        "--experiments", default="", metavar="A,B",
        help=f"optional experiments: {', '.join(experiment_names())}",
    )  # fmt: skip
    add_technique_flags(p)
    add_option_flags(p, "engine", "fleet")
    p.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help="caching: your prompts, one per line, or JSON Lines with a prompt or messages",
    )
    add_conversations_flag(p, needs=", tokenized with the model's own tokenizer")
    p.add_argument(
        "--allow-root",
        action="append",
        default=[],
        metavar="DIR",
        dest="allowed_roots",
        help="only load local models under DIR (repeatable)",
    )


def config_from_args(args: argparse.Namespace) -> ProfileConfig:
    """The validated ProfileConfig the `profile` flags describe."""
    conversations, conversations_name = conversations_from_args(args)
    config = ProfileConfig(
        model=args.model,
        source=args.source,
        device=args.device,
        dtype=args.dtype,
        quick=args.quick,
        workload=workload_from_args(args),
        hardware=hardware_from_args(args),
        stated_bottleneck=args.stated_bottleneck,
        experiments=[e.strip() for e in args.experiments.split(",") if e.strip()],
        allowed_roots=[str(Path(r).expanduser()) for r in args.allowed_roots] or None,
        technique_options=technique_options_from_args(args),
        engine=args.engine,
        load_rps=args.load_rps,
        load_users=args.load_users,
        prompt_sample=read_prompt_sample(args.prompts) if args.prompts else [],
        conversations=conversations,
        conversations_name=conversations_name,
    )
    config.validate()
    return config


def conversations_from_args(args: argparse.Namespace) -> tuple[str, str]:
    """(the text, the file's name) of `--conversations FILE`, refused here, before any
    model loads, in the words `estimate` and the site's upload use; ("", "") without it."""
    if not args.conversations:
        return "", ""
    text, _ = read_conversation_file(args.conversations)
    return text, Path(args.conversations).name


def _quiet_libraries() -> None:
    """No download or weight-loading progress bars: we print our own progress."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # heavy: transformers, only for a run that loads a model
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


# -- profile --------------------------------------------------------------------


class StderrProgress:
    """One progress line on stderr: rewritten in place on a terminal,
    else a new line when the message changes."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr  # looked up now: tests and callers swap it
        self.tty = self.stream.isatty()
        self.last = ""

    def __call__(self, phase: str, fraction: float, message: str) -> None:
        line = f"[{fraction * 100:3.0f}%] {phase}: {message}"
        if self.tty:
            self.stream.write("\r" + line[:119].ljust(119) + ("\n" if fraction >= 1 else ""))
        elif message != self.last:
            self.stream.write(line + "\n")
        self.last = message
        self.stream.flush()


def readable(profile: Profile) -> str:
    """The summary `profile` prints, then the deployments its advice searched, each with its
    launch command or why there is none (as `estimate` prints them), then the fleet for
    `--load-rps` / `--load-users` where one was given."""
    found = profile.advice.deployments if profile.advice else None
    return "\n".join([render_summary(profile), *render_deployments(found),
                      *render_fleet(profile.fleet)])  # fmt: skip


def cmd_profile(args: argparse.Namespace) -> int:
    # torch: runner imports torch; kept out of the CLI's start
    from profiling.runner import run_profile

    try:
        config = config_from_args(args)
        _quiet_libraries()
        profile = run_profile(config, progress=StderrProgress())
    except (ConfigError, ProfilingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_OOM if isinstance(exc, OutOfMemory) else EXIT_BAD_INPUT
    print(readable(profile))
    if args.json:
        write_json_atomic(args.json, profile.to_dict())
        print(f"\nwrote {args.json}", file=sys.stderr)
    return EXIT_OK


# -- job ------------------------------------------------------------------------


@contextlib.contextmanager
def protocol_stdout() -> Iterator[IO[str]]:
    """A stream to the real stdout, with everything else sent to stderr.

    The worker parses stdout line by line, so stray prints from libraries
    (Python or C level) must not land there: file descriptor 1 is pointed at
    stderr for the duration and the protocol gets a private copy of it.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    stream = os.fdopen(os.dup(saved), "w", buffering=1)
    python_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        yield stream
    finally:
        stream.close()
        sys.stdout = python_stdout
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class JobProgress:
    """Progress as `{"event": "progress", ...}` lines, throttled."""

    def __init__(self, stream: IO[str], interval_s: float = JOB_PROGRESS_INTERVAL_S) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self.last_time = 0.0
        self.last_phase = ""

    def __call__(self, phase: str, fraction: float, message: str) -> None:
        now = time.monotonic()
        if phase == self.last_phase and fraction < 1 and now - self.last_time < self.interval_s:
            return
        self.last_time, self.last_phase = now, phase
        event = {
            "event": "progress",
            "phase": phase,
            "fraction": round(fraction, 4),
            "message": message,
        }
        self.stream.write(json.dumps(event) + "\n")
        self.stream.flush()


def read_spec(path: Path) -> ProfileConfig:
    try:
        data = json.loads(Path(path).read_text())
        config = ProfileConfig.from_dict(data)
    except ConfigError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"cannot read the job spec {path}: {one_line(exc)}") from None
    config.validate()
    return config


def cmd_job(args: argparse.Namespace) -> int:
    # torch: runner imports torch; kept out of the CLI's start
    from profiling.runner import run_profile

    with protocol_stdout() as events:
        try:
            config = read_spec(args.spec)
            _quiet_libraries()
            profile = run_profile(config, progress=JobProgress(events))
        except Exception as exc:
            return _job_failed(args.out, exc)
    write_json_atomic(args.out, profile.to_dict())
    return EXIT_OK


def _job_failed(out: Path, exc: Exception) -> int:
    kind = "out_of_memory" if is_out_of_memory(exc) else error_kind(exc)
    if kind == "internal":
        traceback.print_exc(file=sys.stderr)
    write_json_atomic(out, {"error": {"kind": kind, "message": one_line(exc)}})
    if kind == "out_of_memory":
        return EXIT_OOM
    return EXIT_INTERNAL if kind == "internal" else EXIT_BAD_INPUT


# -- the readable summary -------------------------------------------------------


def cmd_devices(args: argparse.Namespace) -> int:
    # torch: measure.environment imports torch; kept out of the CLI's start
    from profiling.measure.environment import list_devices

    print(json.dumps(list_devices(), indent=1))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
