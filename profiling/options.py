"""Every job option's declaration: its name, type, default, range, unit and help text.

The workload's, the deployment's, the fleet's and the serving engine's options are declared
here; each technique's are declared in its own folder (`profiling/<name>/technique.py`) and
join these through the registry (`profiling.techniques`). `OPTIONS` holds them all. The
surfaces take them from there and never restate them: the library's config
(`profiling.config`: its defaults, limits, its technique options and the checks of
`Option.problem`), both command lines (through `cli_common.flag_arguments`), the new-job
form's fields, the job row, the JSON API and its OpenAPI document. A technique's options
appear on each surface from its declaration alone. The workload's and the deployment's are
also laid out by hand where a surface arranges them: `Workload`'s and `Hardware`'s fields,
the form's template and folds, the command lines' flag groups;
`tests/advisor/jobs/test_options.py` checks each declaration on every surface.

`name` is the option's field name in the form, the API and the job row's
`options` JSON; `config` is where `ProfileConfig` keeps it, when that differs.
`problem(value)` says in one sentence what is wrong with a value, so the
library, the form and the API refuse it in the same words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from profiling.conversation_options import CONVERSATION, HOST_TIER
from profiling.option_type import (  # re-exported: every surface reads the kinds from here
    BOOL,
    CHOICE,
    FLOAT,
    INT,
    INTS,
    NAMES,
    TEXT,
    Option,
)
from profiling.techniques import techniques

__all__ = ["BOOL", "CHOICE", "FLOAT", "INT", "INTS", "NAMES", "TEXT", "Option"]

BOTTLENECKS = ("memory", "prompt", "generation", "devices", "unsure")
DTYPES = ("auto", "float32", "bfloat16", "float16")
# Quantization: the precisions a job can compare (the first chosen is the
# reference). Every quantized precision keeps DEFAULT_KEPT in the reference
# precision, as engines ship them; QUANT_VARIANTS are the extra variants a job
# may ask for, each one part changed from that default.
PRECISIONS = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "int8": "int8 weight-only (torchao)",
    "int8-dynamic": "int8 weights and activations (torchao)",
    "int4": "int4 weight-only (torchao; CUDA)",
    "fp8": "float8 weight-only (torchao; GPUs with fp8)",
    "bnb-int8": "bitsandbytes LLM.int8()",
    "bnb-nf4": "bitsandbytes 4-bit NF4",
    "gptq-int4": "GPTQ int4, calibrated here (gptqmodel)",
}
DEFAULT_KEPT = ("lm_head", "embeddings")
QUANT_VARIANTS = {
    "lm_head": "the output head (lm_head) quantized too",
    "embeddings": "the token embeddings quantized too",
    "edge_blocks": "the first and last decoder blocks kept in the reference precision",
}
# The precision the deployment serves in, as engines name it, to a serving precision
# (`profiling.projection.precision`; "auto": the model's own dtype).
# fmt: off
WEIGHT_FORMATS = {"auto": "", "bf16": "bfloat16", "fp16": "float16", "fp8": "fp8",
                  "int8": "int8-weight-only", "int4": "int4-weight-only", "fp4": "fp4"}
# fmt: on
# The KV cache's format ("auto": the weights' when 16 bits, else bf16) to a DTYPE_BYTES key.
KV_CACHE_FORMATS = {"auto": "", "fp8": "float8"}
# The engines a projection may stand for (their limits: `profiling.projection.engines`,
# whose ENGINES a test keeps equal to these), vLLM's the default.
SERVING_ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
# The serving engine a job may also measure on ("": none); the names of
# profiling.engine.ENGINES (a test keeps them equal; importing it here would circle).
ENGINE_CHOICES = ("", "vllm")
# Parallel: the process counts a measured tensor-parallel run may use (0: off).
TP_MEASURE_SIZES = (0, 2, 4, 8)
# Speculative decoding: the draft lengths swept when none are given.
QUICK_KS = (1, 2, 4)
FULL_KS = (1, 2, 3, 4, 6, 8)
# Quantization: what the form ticks at first (a float reference, then the two
# usual weight-only quantizations; int4 needs CUDA and a CPU worker reports it
# "not available here"). The library with no precisions runs the run's dtype,
# int8 and int4: the same set on a CPU.
FORM_PRECISIONS = ("fp32", "int8", "int4")

TARGET_MS = {"low": 0.001, "high": 3_600_000.0, "unit": "ms", "optional": True}

# The load as benchmarks drive it; the deployment as users describe it.
# fmt: off
LOAD = (
    Option("request_rate", "workload", FLOAT, None, "Request rate",
           "Optional: requests arriving per second (open loop, Poisson), as serving "
           "benchmarks drive a server; the concurrency is then not used. None: the "
           "concurrency's users, each sending the next request when the last one ends.",
           "--request-rate", low=0.001, high=1_000_000, unit="requests/s", optional=True,
           metavar="R"),
    Option("requests", "workload", INT, None, "Requests",
           "Optional: how many requests the projection serves (with a request rate). "
           "None: as many as its percentiles need.",
           "--requests", low=1, high=1_000_000, unit="requests", optional=True),
)
DEPLOYMENT = (
    Option("serving_engine", "hardware", CHOICE, "vllm", "Serving engine",
           "The engine you deploy on: every projection (serving figures, capacity, "
           "deployments, what-if) stands for its default limits (requests and tokens a "
           "step, its memory share) and names it, and the deployments' launch commands "
           "are its own. Not the engine a job measures on (--engine).",
           "--serving-engine", choices=tuple(SERVING_ENGINES), metavar="ENGINE"),
    Option("weights", "hardware", CHOICE, "auto", "Weights served in",
           "The precision the deployment serves its weights in (fp8 is how most H100/H200 "
           "fleets serve; int8 and int4 are weight-only; fp4 is NVFP4 on Blackwell's FP4 "
           "cores). auto: as the checkpoint ships (its block fp8, MXFP4 or NVFP4 "
           "included), else its 16-bit dtype.",
           "--weights", choices=tuple(WEIGHT_FORMATS), metavar="FORMAT"),
    Option("kv_cache", "hardware", CHOICE, "auto", "KV cache in",
           "fp8 halves the KV cache's bytes (twice the requests fit, each decode step "
           "reads half). auto: the weights' format when 16 bits, else bf16.",
           "--kv-cache", choices=tuple(KV_CACHE_FORMATS), metavar="FORMAT"),
    Option("tp", "hardware", INT, None, "Tensor-parallel size",
           "Optional: fixes the deployment's layout, TP × PP × replicas = the GPU count "
           "(the others filled in). None: the layout search picks.",
           "--tp", low=1, high=1024, unit="GPUs", optional=True),
    Option("pp", "hardware", INT, None, "Pipeline stages",
           "Optional, with the tensor-parallel size: pipeline stages per copy.",
           "--pp", low=1, high=1024, unit="stages", optional=True),
    Option("replicas", "hardware", INT, None, "Replicas",
           "Optional: copies of the engine behind a load balancer, the load split evenly.",
           "--replicas", low=1, high=1024, unit="copies", optional=True),
    Option("gpu_hourly_usd", "hardware", FLOAT, None, "GPU price per hour",
           "Optional: what one GPU costs you per hour, in US dollars, for the cost per "
           "million tokens. None: the catalog's on-demand price, where it has one.",
           "--gpu-hourly-usd", low=0.001, high=10_000, unit="USD/hour", optional=True,
           metavar="USD"),
)
# The fleet's (`profiling.fleet_options`, `profiling.projection.fleet`): the load it is sized
# for, beside the other options of the fleet table, which only `estimate` takes.
TARGET_LOAD = (
    Option("load_rps", "fleet", FLOAT, None, "Target load (requests/s)",
           "Optional: the requests per second the deployment must carry within the "
           "targets; the fleet table then sizes every GPU kind for it (the fewest GPUs, "
           "as replicas × GPUs per replica, and their cost). Needs a TTFT or TPOT target.",
           "--load-rps", low=0.001, high=1_000_000, unit="requests/s", optional=True,
           metavar="R"),
    Option("load_users", "fleet", INT, None, "Target load (users)",
           "Optional, instead of a request rate: the concurrent users the deployment must "
           "carry within the targets, each sending the next request when the last ends.",
           "--load-users", low=1, high=1_000_000, unit="users", optional=True, metavar="U"),
)
# fmt: on

# Every option but the techniques' (those are their folders').
BASE_OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        # The workload --------------------------------------------------------------
        Option(
            "prompt_tokens",
            "workload",
            INT,
            512,
            "Prompt tokens",
            "Tokens in one request's prompt.",
            "--prompt-tokens",
            low=1,
            high=1_048_576,
            unit="tokens",
        ),
        Option(
            "output_tokens",
            "workload",
            INT,
            128,
            "Output tokens",
            "Tokens generated for one request.",
            "--output-tokens",
            low=1,
            high=131_072,
            unit="tokens",
        ),
        Option(
            "concurrency",
            "workload",
            INT,
            8,
            "Concurrent requests",
            "Requests served at the same time.",
            "--concurrency",
            low=1,
            high=4096,
            unit="requests",
        ),
        Option(
            "shared_prefix_tokens",
            "workload",
            INT,
            0,
            "Shared-prefix tokens",
            "Tokens every prompt starts with (≤ prompt).",
            "--shared-prefix-tokens",
            low=0,
            high=1_048_576,
            unit="tokens",
        ),
        Option(
            "ttft_ms",
            "workload",
            FLOAT,
            None,
            "Time-to-first-token target",
            "Optional, in milliseconds.",
            "--ttft-ms",
            **TARGET_MS,
        ),
        Option(
            "tpot_ms",
            "workload",
            FLOAT,
            None,
            "Time-per-output-token target",
            "Optional, in milliseconds.",
            "--tpot-ms",
            **TARGET_MS,
        ),
        *LOAD,
        *CONVERSATION,
        *TARGET_LOAD,
        # The deployment target ------------------------------------------------------
        Option(
            "gpu_count",
            "hardware",
            INT,
            1,
            "GPU count",
            "How many GPUs of that kind.",
            "--gpus",
            low=1,
            high=1024,
            unit="GPUs",
        ),
        *DEPLOYMENT,
        *HOST_TIER,
        # The serving engine ------------------------------------------------------------
        Option(
            "engine",
            "engine",
            CHOICE,
            "",
            "Also measure on a serving engine",
            "vllm: serve the model in vLLM (from the worker's engine environment) at your "
            "workload with vLLM's own benchmark client: a concurrency sweep with p50/p90/p99, "
            "prefix caching off and on, speculative decoding (n-gram and the draft), fp8 "
            "weights and KV cache, and the GPTQ checkpoint when gptq-int4 is a precision to "
            "compare; each configuration is a server start (about a minute on a CPU). Blank: "
            "eager transformers only.",
            "--engine",
            choices=ENGINE_CHOICES,
            metavar="vllm",
        ),
    )  # fmt: skip
}


class _AllOptions(Mapping[str, Option]):
    """The base options, then each registered technique's, in the registry's order. Read on
    first use, so `profiling.config` can take its defaults from here while the techniques'
    declarations are imported."""

    def _all(self) -> dict[str, Option]:
        declared = techniques()
        if self._for is not declared:
            extra = {o.name: o for t in declared for o in t.options}
            clash = sorted(set(extra) & set(BASE_OPTIONS))
            if clash:
                raise ValueError(f"technique options {clash} reuse a base option's name")
            self._options, self._for = {**BASE_OPTIONS, **extra}, declared
        return self._options

    _for: object = None
    _options: dict[str, Option] = {}

    def __getitem__(self, name: str) -> Option:
        if name in BASE_OPTIONS:  # read while the config is imported: no registry yet
            return BASE_OPTIONS[name]
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


OPTIONS: Mapping[str, Option] = _AllOptions()


def family(name: str) -> list[Option]:
    return [o for o in OPTIONS.values() if o.family == name]


def parse_ints(text: str) -> list[int] | None:
    """ "1, 2,4" → [1, 2, 4] (sorted, each once); None when a part is not an ASCII number."""
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    # isdigit() alone takes "²" and "①", which int() refuses: ASCII digits only.
    if not all(part.isascii() and part.isdigit() for part in parts):
        return None
    return sorted({int(part) for part in parts})


def parse_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]
