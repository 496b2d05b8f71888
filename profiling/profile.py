"""One profile's whole result: the measurements, each technique's typed result, the advice.

The job's child process builds a `Profile`, serialises it once (`to_dict`) at
its boundary, and the site parses it once (`Profile.from_dict`) when it loads a
job. Every reader then works on attributes: a technique that did not run is
`None`, never a missing key.

The JSON keeps the shape of every earlier version: each technique's result sits
at the top level under its name, listed in `experiments_run`. `schema_version`
says which reader applies; a result from a newer version than this code is
refused with a ValueError rather than misread.

    1  typed results were dicts inside the profile (same JSON shape)
    2  `experiments` typed per technique; later additive sections (`engine`,
       `eager_verdict`, `conversations`) are None when absent, so version 2 readers
       still read it. Conversations are now a technique's result: listed in
       `experiments_run` where present, absent (not null) where not
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.config import ProfileConfig
from profiling.engine.results import EngineResult
from profiling.model.info import ModelInfo
from profiling.results import DecodePoint, Environment, MemoryResult, PhaseVerdict, PrefillPoint
from profiling.technique_kit.advice_results import Advice, PredictionPoint
from profiling.techniques import technique, techniques

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


class Experiments:
    """Each registered technique's result by its name (`experiments.speculative`,
    `experiments["speculative"]`); None where it did not run. Typed by each technique's
    declaration (`Technique.result_path`)."""

    def __init__(self, **results: Any) -> None:
        known = {t.name for t in techniques()}
        unknown = sorted(set(results) - known)
        if unknown:
            raise TypeError(f"no technique is registered as {', '.join(unknown)}")
        self.__dict__["_results"] = {name: results.get(name) for name in known}

    def __getattr__(self, name: str) -> Any:
        results = self.__dict__.get("_results", {})
        if name in results:
            return results[name]
        raise AttributeError(f"no technique is registered as {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __getitem__(self, name: str) -> Any:
        return self._results.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        if name not in self._results:
            raise AttributeError(f"no technique is registered as {name!r}")
        self._results[name] = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Experiments) and self._results == other._results

    def __repr__(self) -> str:
        return f"Experiments({', '.join(f'{k}={v!r}' for k, v in self.items())})"

    def items(self) -> list[tuple[str, Any]]:
        """(name, result) of the techniques that ran, in the registry's order."""
        return [(t.name, r) for t in techniques() if (r := self._results.get(t.name)) is not None]

    def names(self) -> list[str]:
        """The techniques that ran, sorted."""
        return sorted(name for name, _ in self.items())

    def to_json(self) -> dict[str, Any]:
        return {name: serde.to_dict(result) for name, result in self.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Experiments:
        # Every technique whose result is there; a result written before its technique was
        # registered (the conversations of version 2) is read too.
        results = {
            t.name: serde.from_dict(t.result_type, data[t.name])
            for t in techniques()
            if isinstance(data.get(t.name), dict)
        }
        return cls(**results)


@dataclass
class Profile:
    """Everything one profiling run measured."""

    config: ProfileConfig
    model: ModelInfo
    environment: Environment
    memory: MemoryResult
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]
    verdict: PhaseVerdict | None = None
    warnings: list[str] = field(default_factory=list)
    experiments: Experiments = field(default_factory=Experiments)
    schema_version: int = SCHEMA_VERSION
    # Derived after the measurements (profiling.advice.build). None in results written
    # before they existed.
    advice: Advice | None = None
    predictions: list[PredictionPoint] | None = None
    # The same model measured on the serving engine (`--engine vllm`); None otherwise.
    engine: EngineResult | None = None
    # The eager-mode verdict, kept when the engine's replaced it (profiling.engine.engine_verdict).
    eager_verdict: PhaseVerdict | None = None
    # Wall time of each phase, in the order they ran: "load", "baseline" (with the memory
    # readings), each experiment by name, "engine". Empty in results written before.
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # What each experiment's plan was costed at before it ran (its folder's budget.py,
    # from the baseline's measurements), by name; only experiments that cost their plan.
    planned_seconds: dict[str, float] = field(default_factory=dict)
    # The fleet for the job's target load (`profiling.advice.fleet`: the JSON of
    # `profiling.projection.fleet.Fleet`, each row with its launch command); None without one.
    fleet: dict[str, Any] | None = None

    @property
    def conversations(self) -> dict[str, Any] | None:
        """The conversation workload's prefix-cache replay and host-tier projection: the
        JSON of the estimate's section (`profiling.caching.conversation_estimate`), kept as
        the conversations technique's result; None without one."""
        result = self.experiments.conversations
        return result.section if result is not None else None

    @conversations.setter
    def conversations(self, section: dict[str, Any] | None) -> None:
        kept = None if section is None else technique("conversations").result_type(section)
        self.experiments.conversations = kept

    def time_spent(self) -> str:
        """ "load 1.2 s · baseline 8.0 s · speculative 31.4 s (planned 28.0 s)", or ""
        when not recorded."""
        planned = self.planned_seconds
        return " · ".join(
            f"{name} {s:,.1f} s" + (f" (planned {p:,.1f} s)" if (p := planned.get(name)) else "")
            for name, s in self.phase_seconds.items()
        )

    def decode_paths(self) -> list[str]:
        """How the timed decode steps ran, one line per path ("static-compiled",
        "static: <why not compiled>"), in the order the points ran them."""
        lines: list[str] = []
        for point in self.decode:
            line = f"{point.path}: {point.path_reason}" if point.path_reason else point.path
            if line not in lines:
                lines.append(line)
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The JSON tree; each experiment's result sits at the top level under its name
        (`speculative.sweeps`, `quantization.variants`), beside `memory` and `decode`."""
        out = serde.to_dict(self)
        out.pop("experiments")
        experiments = self.experiments.to_json()
        out["experiments_run"] = sorted(experiments)
        out.update(experiments)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        """Read a stored result of any readable version (ValueError for a newer one)."""
        version = data.get("schema_version", 1)
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"result schema version {version} is newer than this code reads "
                f"(up to {SCHEMA_VERSION})"
            )
        body = {k: v for k, v in data.items() if k != "experiments"}
        profile = serde.from_dict(cls, body)
        nested = data.get("experiments")
        nested = nested if isinstance(nested, dict) else {}
        profile.experiments = Experiments.from_json({**nested, **data})
        profile.schema_version = SCHEMA_VERSION
        return profile
