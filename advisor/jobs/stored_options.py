"""A job's options as the row stores them: one JSON value, checked by the declarations.

The keys are the declared options (`profiling.options.OPTIONS`, each technique's
included) and the switches of the registered techniques (`run_<name>`); the values
are the library's own types (lists for INTS and NAMES, None for an optional value
left out). A key that is missing is the option's default, so rows written before an
option existed read its default.
"""

from __future__ import annotations

from typing import Any

from profiling.options import OPTIONS
from profiling.techniques import switched


def switches() -> dict[str, str]:
    """The techniques' switches, as the registry declares them: the row's name → the
    library's name."""
    return {t.switch_name: t.name for t in switched()}


def stored_names() -> list[str]:
    """Every key the row's options may hold: the declared options, then the switches."""
    return [*OPTIONS, *switches()]


def default_of(name: str) -> Any:
    if name in switches():
        return False
    default = OPTIONS[name].default
    return list(default) if isinstance(default, tuple) else default


def read_option(job: Any, name: str) -> Any:
    """The row's stored value of option or switch `name`, or its declared default."""
    options = job.options if isinstance(job.options, dict) else {}
    return options[name] if name in options else default_of(name)


def write_option(job: Any, name: str, value: Any) -> None:
    if not isinstance(job.options, dict):
        job.options = {}
    job.options[name] = list(value) if isinstance(value, tuple) else value


def stored_option(name: str) -> property:
    """`job.<name>`: the stored value or the declared default; setting it stores it."""
    return property(
        lambda job: read_option(job, name),
        lambda job, value: write_option(job, name, value),
        doc=f"The job's {name!r} option (stored in `options`).",
    )


def options_problem(options: Any) -> str | None:
    """What is wrong with a stored options value, in one sentence, or None."""
    if not isinstance(options, dict):
        return "the options must be a JSON object."
    for name, value in options.items():
        if name in switches():
            if not isinstance(value, bool):
                return f"{name} must be true or false."
            continue
        option = OPTIONS.get(name)
        if option is None:
            return f"{name!r} is not an option."
        problem = option.problem(value)
        if problem is not None:
            return problem
    return None
