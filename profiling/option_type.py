"""What an option declaration is: `Option`, the kinds of value, and the one-sentence
problem of a value (`Option.problem`), so the library, the form and the API refuse it
in the same words. The declarations themselves are `profiling.options`'s."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

INT, FLOAT, BOOL, TEXT, INTS, NAMES, CHOICE = (
    "int", "float", "bool", "text", "ints", "names", "choice",
)  # fmt: skip


@dataclass(frozen=True)
class Option:
    name: str
    family: str  # "workload", "hardware", "speculative", "quantization", "parallel", "engine"
    kind: str  # INT, FLOAT, BOOL, TEXT, INTS (numbers), NAMES (of `choices`), CHOICE
    default: Any
    label: str
    help: str
    flag: str  # the command-line flag of both commands
    low: float | None = None
    high: float | None = None
    unit: str = ""  # "tokens", "ms", "requests", "GPUs", "processes"
    choices: tuple[Any, ...] = ()
    choice_labels: tuple[str, ...] = ()  # how each choice reads on the form, where not its name
    optional: bool = False  # None is a value: "no target", "the default"
    max_items: int | None = None  # INTS and NAMES
    max_length: int | None = None  # TEXT
    config: str = ""  # the ProfileConfig attribute when it is not `name`
    negated_flag: bool = False  # a BOOL that defaults on: the flag turns it off
    off_help: str = ""  # the help of that flag
    metavar: str = ""  # the flag's value in --help ("N" for a count by default)
    initial: Any = None  # what the form and the API start from, where not `default`

    @property
    def form_default(self) -> Any:
        return self.default if self.initial is None else self.initial

    @property
    def config_name(self) -> str:
        return self.config or self.name

    def library_value(self, value: Any) -> Any:
        """`value` as the library's config keeps it: a blank text is None (the library's
        default) and a sequence a list."""
        if self.kind == TEXT:
            return value or None
        return list(value) if isinstance(value, tuple) else value

    @property
    def library_default(self) -> Any:
        return self.library_value(self.default)

    def range_text(self) -> str:
        """ "1 to 1,048,576 tokens" (numbers), "" otherwise."""
        if self.low is None or self.high is None:
            return ""
        low, high = (f"{v:,.0f}" if v == int(v) else f"{v:g}" for v in (self.low, self.high))
        return f"{low} to {high} {self.unit}".strip()

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` in one sentence, or None when it is acceptable."""
        if value is None:
            return None if self.optional else f"{self.label} is required."
        if self.kind == BOOL:
            return None if isinstance(value, bool) else f"{self.label} must be true or false."
        if self.kind == TEXT:
            if not isinstance(value, str):
                return f"{self.label} must be text."
            if self.max_length is not None and len(value) > self.max_length:
                return f"{self.label} is longer than {self.max_length:,} characters."
            return None
        if self.kind in (INTS, NAMES) and not isinstance(value, list | tuple):
            return f"{self.label} must be a list."
        if self.kind == INT:
            whole = isinstance(value, int) and not isinstance(value, bool)
            if not whole or not self.low <= value <= self.high:
                return f"{self.label} must be a whole number from {self.range_text()}."
        elif self.kind == FLOAT:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or not self.low <= value <= self.high:
                return f"{self.label} must be a number from {self.range_text()}."
        elif self.kind == INTS:
            return self._ints_problem(value)
        elif self.kind == NAMES:
            unknown = [v for v in value if v not in self.choices]
            if unknown:
                shown, allowed = ", ".join(map(str, unknown)), ", ".join(map(str, self.choices))
                return f"Unknown: {shown}; choose from {allowed}."
            if len(set(value)) != len(value):
                return f"Each of {self.label.lower()} may be listed once."
        elif self.kind == CHOICE and value not in self.choices:
            shown = ", ".join(str(c) for c in self.choices)
            return f"{self.label} must be one of: {shown}."
        return None

    def _ints_problem(self, value: Any) -> str | None:
        if any(not isinstance(v, int) or isinstance(v, bool) for v in value):
            return f"{self.label}: whole numbers separated by commas, e.g. 1,2,4."
        if any(not self.low <= v <= self.high for v in value):
            return f"Each of {self.label} must be from {self.range_text()}."
        if self.max_items is not None and len(set(value)) > self.max_items:
            return f"At most {self.max_items} values of {self.label}."
        return None
