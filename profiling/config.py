"""What to profile: the model, the device to run on, the user's workload.

These are plain values with no torch import, so the web process can build
and validate them. `ProfileConfig` is what the site sends to a worker and
what `python -m profiling profile` builds from its flags.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from profiling import serde, units
from profiling.option_type import TEXT, Option
from profiling.options import (  # re-exported: the choices are the options'
    BOTTLENECKS,
    DTYPES,
    INT,
    KV_CACHE_FORMATS,
    OPTIONS,
    PRECISIONS,
    QUANT_VARIANTS,
    TP_MEASURE_SIZES,
    WEIGHT_FORMATS,
)
from profiling.techniques import experiment_names, techniques

__all__ = ["BOTTLENECKS", "DTYPES", "QUANT_VARIANTS", "PRECISIONS", "TP_MEASURE_SIZES"]

BOTTLENECK_LABELS = {
    "memory": "Save model memory",
    "prompt": "Reuse prompt work",
    "generation": "Speed up token generation",
    "devices": "Split work across devices",
    "unsure": "Not sure",
}
SOURCES = ("auto", "demo", "hub", "local", "config")
DEVICES = ("auto", "cpu", "cuda", "mps")

# Hugging Face repo ids: "name" or "namespace/name", 96 chars at most,
# letters, digits, "-", "_", "."; no "--" or ".." and no leading/trailing
# separators (the rules of huggingface_hub.utils.validate_repo_id).
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^(?:{_REPO_PART}/)?{_REPO_PART}$")

# Bounds that keep a typo from asking a worker for a 10^9-token sweep (declared in
# profiling.options, with every other fact about each option).
LIMITS = {o.name: (o.low, o.high) for o in OPTIONS.values() if o.kind == INT}


def technique_options() -> dict[str, Option]:
    """Every registered technique's options, by the name the config keeps each under."""
    return {o.config_name: o for t in techniques() for o in t.options}


# Prefix caching: the most a prompt sample may hold (the file, and the parsed
# prompts a config carries to a worker). See profiling.caching.sample.
PROMPT_SAMPLE_MAX_BYTES = 16 * 2**20  # 16 MiB
PROMPT_SAMPLE_MAX_PROMPTS = 20_000
# Conversations: the most a conversation file may hold when a config carries it to a
# worker (about a thousand long chats; the replay stays to seconds).
CONVERSATIONS_MAX_BYTES = 8 * 2**20  # 8 MiB


class ConfigError(ValueError):
    """A config value is out of range or malformed; the message says which."""


def is_repo_id(text: str) -> bool:
    """Whether `text` is a syntactically valid Hugging Face repo id."""
    return len(text) <= 96 and bool(_REPO_ID.match(text)) and "--" not in text and ".." not in text


@dataclass
class Workload:
    """The request shape the user serves, and their latency targets."""

    prompt_tokens: int = OPTIONS["prompt_tokens"].default
    output_tokens: int = OPTIONS["output_tokens"].default
    concurrency: int = OPTIONS["concurrency"].default
    shared_prefix_tokens: int = OPTIONS["shared_prefix_tokens"].default
    ttft_ms: float | None = OPTIONS["ttft_ms"].default
    tpot_ms: float | None = OPTIONS["tpot_ms"].default
    # Open-loop load (requests per second, Poisson) instead of `concurrency` users.
    request_rate: float | None = OPTIONS["request_rate"].default
    requests: int | None = OPTIONS["requests"].default
    # A synthetic conversation (`profiling.conversation_options`): None or 1 turn is none.
    conversation_turns: int | None = OPTIONS["conversation_turns"].default
    conversation_think_s: float | None = OPTIONS["conversation_think_s"].default

    @property
    def context_tokens(self) -> int:
        """Tokens held in the KV cache per request at the end of generation."""
        return self.prompt_tokens + self.output_tokens

    def validate(self) -> None:
        for name in ("prompt_tokens", "output_tokens", "concurrency", "shared_prefix_tokens",
                     "ttft_ms", "tpot_ms", "request_rate", "requests", "conversation_turns",
                     "conversation_think_s"):  # fmt: skip
            _check_option(name, getattr(self, name))
        if self.shared_prefix_tokens > self.prompt_tokens:
            raise ConfigError("shared_prefix_tokens cannot exceed prompt_tokens")


@dataclass
class Hardware:
    """The deployment target: a GPU kind from the catalog, how many, and how it serves
    (the engine whose limits the projections stand for, the weights' and the KV cache's
    formats, and a fixed layout where one is given)."""

    gpu_kind: str | None = None
    gpu_count: int = OPTIONS["gpu_count"].default
    serving_engine: str = OPTIONS["serving_engine"].default
    weights: str = OPTIONS["weights"].default
    kv_cache: str = OPTIONS["kv_cache"].default
    tp: int | None = OPTIONS["tp"].default
    pp: int | None = OPTIONS["pp"].default
    replicas: int | None = OPTIONS["replicas"].default
    gpu_hourly_usd: float | None = OPTIONS["gpu_hourly_usd"].default
    host_memory_gib: float | None = OPTIONS["host_memory_gib"].default

    def validate(self) -> None:
        names = ("gpu_count", "serving_engine", "weights", "kv_cache", "tp", "pp", "replicas",
                 "gpu_hourly_usd", "host_memory_gib")  # fmt: skip
        for name in names:
            _check_option(name, getattr(self, name))
        if self.layout() is None and self.fixed_layout:
            tp, pp, replicas = self.tp or 1, self.pp or 1, self.replicas
            used = f"{tp} × {pp}" + (f" × {replicas} replicas" if replicas else "")
            raise ConfigError(
                f"the layout TP {used} does not use the {self.gpu_count} GPUs: give TP × PP "
                "× replicas equal to the GPU count"
            )

    @property
    def fixed_layout(self) -> bool:
        return any(v is not None for v in (self.tp, self.pp, self.replicas))

    def layout(self) -> tuple[int, int, int] | None:
        """(tp, pp, replicas) of a fixed layout, the missing parts filled in so that they
        use every GPU; None when none is fixed or the parts do not add up."""
        if not self.fixed_layout:
            return None
        tp, pp = self.tp or 1, self.pp or 1
        if self.tp is None and self.pp is None and self.replicas:
            tp = max(1, self.gpu_count // self.replicas)
        replicas = self.replicas or max(1, self.gpu_count // (tp * pp))
        return (tp, pp, replicas) if tp * pp * replicas == self.gpu_count else None

    def serving_dtype(self, model_dtype: str) -> str:
        """The precision the projection serves in: the weights' format, else the model's."""
        return WEIGHT_FORMATS[self.weights] or model_dtype

    @property
    def kv_dtype(self) -> str:
        return KV_CACHE_FORMATS[self.kv_cache]


@dataclass
class ProfileConfig:
    """One profiling run: model, where to run it, and the user's workload."""

    model: str
    source: str = "auto"
    device: str = "auto"
    dtype: str = "auto"
    quick: bool = False
    workload: Workload = field(default_factory=Workload)
    hardware: Hardware = field(default_factory=Hardware)
    stated_bottleneck: str = "unsure"
    experiments: list[str] = field(default_factory=list)
    # Local model directories are accepted only under these roots; an empty
    # list allows none. None means "any directory" (the CLI on the user's own
    # box); the site always passes its configured list.
    allowed_roots: list[str] | None = None
    seed: int = 0
    # Each registered technique's options (`technique_options()`), by the config's name
    # for each: read as attributes (`config.draft`, `config.precisions`), given as keyword
    # arguments like the fields, and kept flat in the JSON beside them. A value not given
    # is the option's default.
    technique_options: dict[str, Any] = field(default_factory=dict, metadata={"flatten": True})
    # Prefix caching: the user's own prompts, in the order a server would see
    # them (parsed by profiling.caching.sample; chat messages are already
    # rendered to one string each there). Empty: no sample.
    prompt_sample: list[str] = field(default_factory=list)
    # Conversations: the text of the user's JSON Lines file (parsed on the worker by
    # profiling.projection.conversation_workloads, tokenized with the model's tokenizer) and the
    # file's name; empty: the workload's synthetic conversations, if it has turns.
    conversations: str = ""
    conversations_name: str = ""
    # The serving engine to measure on as well ("vllm"), or "" for none.
    engine: str = OPTIONS["engine"].default
    # The fleet (`profiling.projection.fleet`): the load it is sized for, requests per
    # second or closed-loop users, at most one; None for both: no fleet.
    load_rps: float | None = OPTIONS["load_rps"].default
    load_users: int | None = OPTIONS["load_users"].default

    def validate(self) -> None:
        if not self.model or len(self.model) > 1024:
            raise ConfigError("model must be a Hub id, a local directory or a demo name")
        _check_choice("source", self.source, SOURCES)
        _check_choice("device", self.device, DEVICES)
        _check_choice("dtype", self.dtype, DTYPES)
        _check_choice("stated_bottleneck", self.stated_bottleneck, BOTTLENECKS)
        for name in self.experiments:
            _check_choice("experiment", name, experiment_names())
        for name, option in technique_options().items():
            value = self.technique_options.get(name, option.library_default)
            if value is not None or option.kind != TEXT:  # a text's None: its default
                _check_option(option.name, value)
        for name in ("engine", "load_rps", "load_users"):
            _check_option(name, getattr(self, name))
        problem = load_problem(self.load_rps, self.load_users, self.workload)
        if problem:
            raise ConfigError(problem)
        _check_prompt_sample(self.prompt_sample)
        _check_conversations(self.conversations, self.conversations_name)
        self.workload.validate()
        self.hardware.validate()

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileConfig:
        return serde.from_dict(cls, data)

    def replace(self, **changes: Any) -> ProfileConfig:
        return dataclasses.replace(self, **changes)

    def __getattr__(self, name: str) -> Any:
        # Only for names that are not fields: a technique's option.
        held = self.__dict__.get("technique_options")
        if held is not None and name in held:
            return held[name]
        raise AttributeError(f"{type(self).__name__!r} has no attribute or option {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        held = self.__dict__.get("technique_options")
        if held is not None and name in held:
            held[name] = value
        else:
            object.__setattr__(self, name, value)


_fields_init = ProfileConfig.__init__


def _init(self: ProfileConfig, *args: Any, **kwargs: Any) -> None:
    """The fields' own __init__, which also takes each technique option by its name and
    fills in the defaults of those not given (in `technique_options` or as a keyword)."""
    declared = technique_options()
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in declared}
    _fields_init(self, *args, **kwargs)
    held = {k: v for k, v in self.technique_options.items() if k in declared}
    self.technique_options = {
        name: option.library_value(given.get(name, held.get(name, option.default)))
        for name, option in declared.items()
    }


ProfileConfig.__init__ = _init  # type: ignore[method-assign]


def load_problem(load_rps: float | None, load_users: int | None, w: Workload) -> str | None:
    """What is wrong with a target load beside its own range, in one sentence, or None."""
    if load_rps is None and load_users is None:
        return None
    if load_rps is not None and load_users is not None:
        return "Give the target load as a request rate or as users, not both."
    if not (w.ttft_ms or w.tpot_ms):
        return "A target load is sized within targets: give a TTFT or a TPOT target too."
    return None


def _check_option(name: str, value: Any) -> None:
    problem = OPTIONS[name].problem(value)
    if problem is not None:
        raise ConfigError(f"{name}: {problem}")


def _check_prompt_sample(prompts: list[str]) -> None:
    if len(prompts) > PROMPT_SAMPLE_MAX_PROMPTS:
        raise ConfigError(
            f"the prompt sample has {len(prompts):,} prompts; the limit is "
            f"{PROMPT_SAMPLE_MAX_PROMPTS:,}"
        )
    if any(not isinstance(p, str) or not p for p in prompts):
        raise ConfigError("every prompt of the prompt sample must be a non-empty string")
    size = sum(len(p.encode("utf-8", "surrogatepass")) for p in prompts)
    if size > PROMPT_SAMPLE_MAX_BYTES:
        raise ConfigError(
            f"the prompt sample holds {units.size(size)} of text; the limit is "
            f"{units.size(PROMPT_SAMPLE_MAX_BYTES)}"
        )


def _check_conversations(text: str, name: str) -> None:
    if not isinstance(text, str) or not isinstance(name, str) or len(name) > 255:
        raise ConfigError("the conversations must be a file's text and a name of 255 or fewer")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > CONVERSATIONS_MAX_BYTES:
        raise ConfigError(
            f"the conversation file is {units.size(size)}; the limit is "
            f"{units.size(CONVERSATIONS_MAX_BYTES)}"
        )


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")
