"""The registry of techniques: one line per technique, its declaration's dotted path.

Each technique has a folder, `profiling/<name>/`: its declaration (`technique.py`: name,
label, switch, options, and the paths below), its experiment (plan → run → typed result,
`experiment.py`), its typed result (`results.py`), the text its report draws (`report.py`)
and its advice rule (`advice.py`). Two folders declare a second technique beside their
own: `parallel/` disaggregation (its experiment measures it) and `caching/` conversations
(a workload of turns asks for them). Everything else is derived from this list: the config's
experiment names and technique options (`profiling.config`), the options every surface
declares (`profiling.options.OPTIONS`), `Profile`'s experiments, the runner's plan, the
advice's rules, both command lines' flags, the site's form, job row, API schema and the
report's sections. Adding a technique is its folder and a line here;
`tests/advisor/test_fake_technique.py` registers a fake one and finds it on each surface.

The lines are paths, imported on first use (`techniques()`), so this module imports no
technique and the site reads the declarations without importing an experiment. The order
is the order of the form, the report and the advice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from profiling.technique_type import Technique, resolve

REGISTRY: list[str] = [
    "profiling.quantization.technique:QUANTIZATION",
    "profiling.speculative.technique:SPECULATIVE",
    "profiling.caching.technique:CACHING",
    "profiling.caching.technique:CONVERSATIONS",
    "profiling.parallel.technique:PARALLEL",
    "profiling.parallel.technique:DISAGGREGATION",
]


@cache
def _load(paths: tuple[str, ...]) -> tuple[Technique, ...]:
    loaded = tuple(resolve(path) for path in paths)
    for path, technique in zip(paths, loaded, strict=True):
        if not isinstance(technique, Technique):
            raise TypeError(f"{path} is not a Technique")
        wrong = [o.name for o in technique.options if o.family != technique.name]
        if wrong:
            raise ValueError(f"{path}: options {wrong} are not of family {technique.name!r}")
    names = [t.name for t in loaded]
    if len(set(names)) != len(names):
        raise ValueError(f"two techniques share a name: {names}")
    return loaded


def techniques() -> tuple[Technique, ...]:
    """Every registered technique, in the registry's order."""
    return _load(tuple(REGISTRY))


def technique(name: str) -> Technique | None:
    return next((t for t in techniques() if t.name == name), None)


def experiment_names() -> tuple[str, ...]:
    """The techniques with an experiment of their own: what a config's `experiments` names."""
    return tuple(t.name for t in techniques() if t.run_path)


def switched() -> tuple[Technique, ...]:
    """The techniques a job turns on with a switch of their own (`run_<name>`)."""
    return tuple(t for t in techniques() if t.switch is not None)


@contextmanager
def registered(*paths: str) -> Iterator[None]:
    """The registry with `paths` added while the block runs (a test's extra technique)."""
    REGISTRY.extend(paths)
    try:
        yield
    finally:
        for path in paths:
            REGISTRY.remove(path)
