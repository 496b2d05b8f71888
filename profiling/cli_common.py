"""What both commands of the CLI share (`profile` in `profiling.cli`, `estimate` in
`profiling.estimate_cli`): the workload flags, `--conversations` and writing the result JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from profiling import units
from profiling.config import (
    BOTTLENECKS,
    CONVERSATIONS_MAX_BYTES,
    DTYPES,
    ConfigError,
    Hardware,
    Workload,
)
from profiling.measure import hardware
from profiling.options import (
    BOOL,
    CHOICE,
    FLOAT,
    INT,
    INTS,
    NAMES,
    Option,
    family,
    parse_ints,
    parse_names,
)
from profiling.projection.conversation_workloads import MAX_TURNS
from profiling.techniques import techniques


def add_option_flags(p: argparse.ArgumentParser, *families: str) -> None:
    """One flag per declared option of `families` (`profiling.options`)."""
    for name in families:
        for option in family(name):
            flag, kwargs = flag_arguments(option)
            p.add_argument(flag, **kwargs)


def add_technique_flags(p: argparse.ArgumentParser) -> None:
    """One flag per option of every registered technique, in the registry's order."""
    add_option_flags(p, *(t.name for t in techniques()))


def technique_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Each technique option's value from its flag, by the config's name for it: lists
    from their comma text (a ConfigError names the flag of numbers that are not)."""
    values: dict[str, Any] = {}
    for option in (o for t in techniques() for o in t.options):
        value = getattr(args, option.name)
        if option.kind == INTS:
            value = parse_ints(value)
            if value is None:
                raise ConfigError(
                    f"{option.flag} takes whole numbers separated by commas, e.g. 1,2,4"
                )
        elif option.kind == NAMES:
            value = parse_names(value)
        values[option.config_name] = option.library_value(value)
    return values


def add_workload_flags(p: argparse.ArgumentParser) -> None:
    """The user's workload, deployment GPU and dtype: shared by `profile` and `estimate`."""
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    add_option_flags(p, "workload")
    p.add_argument("--gpu", metavar="KIND", help="deployment GPU for the fit check, e.g. h100")
    add_option_flags(p, "hardware")
    p.add_argument("--stated-bottleneck", choices=BOTTLENECKS, default="unsure")


def add_conversations_flag(p: argparse.ArgumentParser, needs: str = "") -> None:
    """`--conversations FILE`, said once for `profile` and `estimate` (both read it with
    `profiling.projection.conversation_workloads.read_conversation_file`, as the site reads
    an upload)."""
    p.add_argument(
        "--conversations", metavar="FILE",
        help="your conversations, JSON Lines (OpenAI chat messages or ShareGPT), up to "
        f"{units.size(CONVERSATIONS_MAX_BYTES)} and {MAX_TURNS:,} turns, replayed through the "
        f"prefix cache{needs}",
    )  # fmt: skip


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The validated Workload of the shared flags."""
    workload = Workload(**{o.name: getattr(args, o.name) for o in family("workload")})
    workload.validate()
    return workload


def hardware_from_args(args: argparse.Namespace) -> Hardware:
    """The validated deployment target of the shared flags."""
    hardware = Hardware(
        gpu_kind=gpu_kind_from_args(args),
        **{o.name: getattr(args, o.name) for o in family("hardware")},
    )
    hardware.validate()
    return hardware


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


def flag_arguments(option: Option) -> tuple[str, dict[str, Any]]:
    """(flag, argparse keyword arguments) for `option`; lists are read as comma text."""
    help_text = option.off_help if option.negated_flag else option.help
    if option.range_text() and option.kind in (INT, FLOAT):
        help_text = f"{help_text} {option.range_text()}."
    kwargs: dict[str, Any] = {"dest": option.name, "help": help_text}
    if option.kind == BOOL:
        kwargs["action"] = "store_false" if option.negated_flag else "store_true"
        return option.flag, kwargs
    kwargs["metavar"] = option.metavar or {INT: "N", FLOAT: "MS", CHOICE: "N"}.get(option.kind)
    if option.kind in (INT, FLOAT):
        kwargs.update(type=int if option.kind == INT else float, default=option.default)
    elif option.kind == CHOICE:
        number = all(isinstance(c, int) for c in option.choices)
        kwargs.update(type=int if number else str, choices=option.choices, default=option.default)
    elif option.kind in (INTS, NAMES):
        kwargs["default"] = ",".join(map(str, option.default))
        if option.choices:
            kwargs["help"] = f"{help_text} ({', '.join(map(str, option.choices))})"
    else:
        kwargs["default"] = option.default
    return option.flag, kwargs
