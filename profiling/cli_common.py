"""What both commands of the CLI share (`profile` in `profiling.cli`, `estimate` in
`profiling.estimate_cli`): the workload flags and writing the result JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from profiling.config import BOTTLENECKS, DTYPES, ConfigError, Workload
from profiling.measure import hardware
from profiling.options import family, flag_arguments


def add_option_flags(p: argparse.ArgumentParser, *families: str) -> None:
    """One flag per declared option of `families` (`profiling.options`)."""
    for name in families:
        for option in family(name):
            flag, kwargs = flag_arguments(option)
            p.add_argument(flag, **kwargs)


def add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The user's workload, deployment GPU and dtype: shared by `profile` and `estimate`."""
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    add_option_flags(p, "workload")
    p.add_argument("--gpu", metavar="KIND", help="deployment GPU for the fit check, e.g. h100")
    add_option_flags(p, "hardware")
    p.add_argument("--stated-bottleneck", choices=BOTTLENECKS, default="unsure")


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The validated Workload of the shared flags."""
    workload = Workload(**{o.name: getattr(args, o.name) for o in family("workload")})
    workload.validate()
    return workload


def gpu_kind_from_args(args: argparse.Namespace) -> str | None:
    """The catalog key of `--gpu`, or None; a ConfigError for an unknown kind."""
    if not args.gpu:
        return None
    try:
        return hardware.lookup(args.gpu).key
    except hardware.UnknownGPU as exc:
        raise ConfigError(str(exc)) from None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file beside `path`, then rename it into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
