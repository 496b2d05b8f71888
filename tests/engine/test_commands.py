"""Launch commands: each configuration's flags, and every kind of command through the
engine's own `vllm serve` argument parser.

The parse check runs the real parser of the engine's environment (`scripts/engine-env`):
skipped where there is none, and a failure instead when ADVISOR_REQUIRE_ENGINE is set (CI).
One process parses every command (building the parser takes about 10 s).
"""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from profiling.advice.build import estimate_report
from profiling.config import Hardware, Workload
from profiling.engine import commands, vllm
from profiling.engine.commands import LaunchCommand, launch_command
from profiling.engine.plan import NGRAM
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.projection import search
from profiling.projection.configurations import Configuration
from profiling.projection.estimate import shipped_configs
from tests.engine.engine_env import require_engine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"

# Between them, every flag a configuration can ask for.
CONFIGURATIONS = [
    Configuration("H100-SXM"),
    Configuration(
        "H100-SXM",
        tp=2,
        pp=2,
        weights="fp8",
        kv_cache="fp8",
        draft="ngram",
        draft_tokens=3,
        prefix_caching=True,
    ),  # fmt: skip
    Configuration("H100-SXM", ep=4, draft=DRAFT, draft_tokens=4),
    Configuration("A100-80GB", tp=2, replicas=2, weights="bf16"),
    Configuration("L4", weights="fp16", kv_cache="fp8"),
]


# The deployment search's own answers, as the report, the CLI and the API print them:
# (shipped model, GPUs, workload, the draft's acceptance per token where the user gives it).
SEARCHES = [
    ("llama-3.1-8b", 1, Workload(concurrency=16, ttft_ms=500, tpot_ms=4), 0.7),
    ("llama-3.1-8b", 1, Workload(prompt_tokens=8192, shared_prefix_tokens=7936,
                                 output_tokens=64, concurrency=4, ttft_ms=60), None),
    ("llama-3.1-8b", 8, Workload(prompt_tokens=1024, output_tokens=128, concurrency=256,
                                 tpot_ms=40), None),
    ("mixtral-8x7b", 8, Workload(prompt_tokens=1024, output_tokens=128, concurrency=128,
                                 tpot_ms=50), None),
]  # fmt: skip


def searched() -> list[tuple[Configuration, dict]]:
    """Every configuration the searches rank, with the command their advice carries."""
    out = []
    for name, gpus, workload, acceptance in SEARCHES:
        advice, _ = estimate_report(
            Shapes.from_config(shipped_configs()[name]), hardware.lookup("H100"), gpus,
            "bfloat16", workload, spec_acceptance=acceptance,
            deployment=Hardware(gpu_kind="H100", gpu_count=gpus), model=MODEL,
        )  # fmt: skip
        assert advice.deployments is not None
        for row in advice.deployments["configurations"]:
            out.append((Configuration(**row["configuration"]), row["command"]))
    return out


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_default_configuration_is_one_gpu_and_nothing_else():
    command = launch_command(MODEL, CONFIGURATIONS[0])
    assert command.argv == ["vllm", "serve", MODEL, "--tensor-parallel-size", "1"]
    assert command.text == shlex.join(command.argv) and not command.unavailable
    assert command.note == ""


def test_each_part_of_a_configuration_is_its_flag():
    argv = launch_command(MODEL, CONFIGURATIONS[1]).argv
    assert flag(argv, "--tensor-parallel-size") == "2"
    assert flag(argv, "--pipeline-parallel-size") == "2"
    assert flag(argv, "--quantization") == "fp8" and flag(argv, "--kv-cache-dtype") == "fp8"
    spec = json.loads(flag(argv, "--speculative-config") or "{}")
    assert spec == {"method": "ngram", "num_speculative_tokens": 3, **NGRAM}
    assert "--enable-prefix-caching" in argv and "--data-parallel-size" not in argv
    # Nothing the configuration did not ask for.
    plain = launch_command(MODEL, Configuration("H100-SXM", tp=4)).argv
    asked_for = {"--quantization", "--kv-cache-dtype", "--speculative-config",
                 "--enable-prefix-caching", "--pipeline-parallel-size", "--dtype"}  # fmt: skip
    assert not asked_for & set(plain)


def test_expert_parallelism_is_data_parallel_attention_with_expert_parallel_experts():
    argv = launch_command(MODEL, CONFIGURATIONS[2]).argv
    assert flag(argv, "--data-parallel-size") == "4" and "--enable-expert-parallel" in argv
    assert "--tensor-parallel-size" not in argv
    spec = json.loads(flag(argv, "--speculative-config") or "{}")
    assert spec == {"method": "draft_model", "model": DRAFT, "num_speculative_tokens": 4}


def test_replicas_are_separate_servers_on_their_own_gpus():
    command = launch_command(MODEL, CONFIGURATIONS[3])
    assert flag(command.argv, "--tensor-parallel-size") == "2"
    assert "--data-parallel-size" not in command.argv  # one copy's command, run twice
    assert flag(command.argv, "--dtype") == "bfloat16"
    assert "2 servers of 2 GPUs" in command.note
    assert "CUDA_VISIBLE_DEVICES=0,1 then 2,3" in command.note
    eight = launch_command(MODEL, Configuration("H100-SXM", replicas=8))
    assert "CUDA_VISIBLE_DEVICES=0 then 1 then … then 7" in eight.note


@pytest.mark.parametrize("weights", ["int4", "int8"])
def test_weights_vllm_cannot_quantize_as_it_loads_say_what_checkpoint_it_needs(weights):
    command = launch_command(MODEL, Configuration("H100-SXM", tp=2, weights=weights))
    assert command.argv == [] and command.text == ""
    assert f"does not quantize weights to {weights}" in command.unavailable
    assert "GPTQ" in command.unavailable and MODEL in command.unavailable
    assert command.unavailable.endswith("vllm serve <that checkpoint> --tensor-parallel-size 2")


def test_a_draft_head_nobody_named_says_which_checkpoint_it_needs():
    """The search projects speculation with an EAGLE-style head at a given acceptance; vLLM
    cannot load a head without its checkpoint, so there is no command, only an example."""
    c = Configuration("H100-SXM", weights="fp8", draft=search.DRAFT, draft_tokens=3)
    command = launch_command(MODEL, c)
    assert command.argv == [] and command.text == ""
    assert "EAGLE head trained for this model" in command.unavailable
    example = shlex.split(command.unavailable.split("with one: ", 1)[1])
    assert json.loads(flag(example, "--speculative-config")) == {
        "method": "eagle", "model": f"<an EAGLE head trained for {MODEL}>",
        "num_speculative_tokens": 3,
    }  # fmt: skip
    both = launch_command(MODEL, Configuration("H100-SXM", weights="int4", draft=search.DRAFT,
                                               draft_tokens=2))  # fmt: skip
    assert "does not quantize weights to int4" in both.unavailable
    assert "it also needs the checkpoint of an EAGLE head" in both.unavailable


def test_the_search_carries_a_command_or_the_reason_for_every_configuration():
    found = searched()
    kinds = {(c.weights, c.kv_cache, bool(c.draft), c.prefix_caching, c.tp) for c, _ in found}
    assert len(kinds) >= 10  # precisions, a draft, prefix caching, 1 and 8 GPUs
    for c, command in found:
        assert command == launch_command(MODEL, c).to_dict(), c.name
        assert bool(command["text"]) != bool(command["unavailable"]), c.name


def test_another_engine_version_is_told_which_flags_these_are():
    other = launch_command(MODEL, CONFIGURATIONS[0], engine_version="0.11.2")
    assert f"vLLM {commands.CHECKED_VERSION}'s flags" in other.note and "0.11.2" in other.note
    same = launch_command(MODEL, CONFIGURATIONS[0], engine_version="0.32.1+cpu")
    assert same.note == ""


def test_a_command_round_trips_its_dict():
    for c in [*CONFIGURATIONS, Configuration("H100-SXM", weights="int4")]:
        command = launch_command(MODEL, c, engine_version="0.9.0")
        assert LaunchCommand.from_dict(json.loads(json.dumps(command.to_dict()))) == command
        assert set(command.to_dict()) >= {"argv", "text", "unavailable"}


# -- through the engine's own parser -------------------------------------------------------

# Run by the engine's Python: builds `vllm serve`'s parser as its CLI does, parses each
# argv (read as JSON from stdin; each flag named in full), runs the CLI's own checks of
# the parsed arguments and makes the engine's arguments from them; prints, per argv, the
# error or the values read.
PARSE = """
import contextlib, io, json, sys
import vllm
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
# argparse also takes a flag's prefix: a command must name each flag in full.
named = set(serve.subparser_init(top.add_subparsers(dest="subcommand"))._option_string_actions)
KEYS = ("model_tag", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
        "enable_expert_parallel", "quantization", "kv_cache_dtype", "speculative_config",
        "enable_prefix_caching", "dtype")
out = []
for argv in json.load(sys.stdin):
    said = io.StringIO()
    partial = [a for a in argv if a.startswith("--") and a not in named]
    if partial:
        out.append({"error": f"not a flag of vllm serve: {partial}"})
        continue
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            args = top.parse_args(argv[1:])
            serve.validate(args)
            vllm.AsyncEngineArgs.from_cli_args(args)
        out.append({"error": "", "args": {k: getattr(args, k, None) for k in KEYS}})
    except SystemExit:
        lines = said.getvalue().strip().splitlines()
        out.append({"error": lines[-1] if lines else "exited"})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out, default=str))
"""
PARSE_TIMEOUT_S = 180
# The engine run's own command (its flags from the same builders): it must parse too.
MEASURED = vllm.serve_argv(MODEL, vllm.server_flags(MODEL, "bfloat16", 1024, [
    *vllm.prefix_caching_flags(False), *vllm.tensor_parallel_flags(2),
    *(vllm.quantization_flags("fp8-kv") or []),
]))  # fmt: skip
# An older vLLM's flag: the check must refuse it, or it proves nothing.
REFUSED = ["vllm", "serve", MODEL, "--speculative-model", DRAFT]
PARTIAL = ["vllm", "serve", MODEL, "--pipeline-parallel", "2"]  # argparse alone would take it
# The example given where a draft head has no checkpoint named: its flags must parse too.
_HEADLESS = launch_command(MODEL, Configuration("H100-SXM", draft=search.DRAFT, draft_tokens=3))
HEAD = shlex.split(_HEADLESS.unavailable.split("with one: ", 1)[1])


def launchable() -> list[tuple[Configuration, dict]]:
    """The searched configurations vLLM can launch as they stand."""
    return [(c, command) for c, command in searched() if command["text"]]


@pytest.fixture(scope="module")
def parsed() -> list[dict]:
    require_engine()
    argvs = [launch_command(MODEL, c).argv for c in CONFIGURATIONS] + [MEASURED, REFUSED, PARTIAL]
    argvs += [HEAD] + [shlex.split(command["text"]) for _, command in launchable()]
    done = subprocess.run(
        [str(vllm.python_path()), "-I", "-c", PARSE], input=json.dumps(argvs),
        capture_output=True, text=True, timeout=PARSE_TIMEOUT_S, env=vllm.environment("cpu"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.engine
def test_the_flags_are_those_of_the_engine_version_here():
    found = vllm.version()
    if found is None:
        pytest.skip("no engine environment")
    assert commands._minor(found) == commands._minor(commands.CHECKED_VERSION)


@pytest.mark.engine
def test_every_command_parses_with_the_engines_own_parser(parsed):
    for c, result in zip(CONFIGURATIONS, parsed, strict=False):
        agrees(c, result)


@pytest.mark.engine
def test_every_command_the_search_prints_parses_with_the_engines_own_parser(parsed):
    head, *found = parsed[len(CONFIGURATIONS) + 3 :]
    assert head["error"] == "" and head["args"]["speculative_config"]["method"] == "eagle"
    printed = launchable()
    assert len(found) == len(printed) >= 10
    for (c, _), result in zip(printed, found, strict=True):
        agrees(c, result)


def agrees(c: Configuration, result: dict) -> None:
    """The parse went through and read back what `c` asks for."""
    assert result["error"] == "", f"{c.name}: {result['error']}"
    args = result["args"]
    assert args["model_tag"] == MODEL
    assert (args["tensor_parallel_size"], args["pipeline_parallel_size"]) == (c.tp, c.pp)
    assert (args["data_parallel_size"], args["enable_expert_parallel"]) == (c.ep, c.ep > 1)
    assert args["quantization"] == ("fp8" if c.weights == "fp8" else None)
    assert args["kv_cache_dtype"] == ("fp8" if c.kv_cache == "fp8" else "auto")
    assert args["enable_prefix_caching"] == (True if c.prefix_caching else None)
    assert args["dtype"] == {"bf16": "bfloat16", "fp16": "float16"}.get(c.weights, "auto")
    spec = args["speculative_config"] or {}
    assert spec.get("num_speculative_tokens", 0) == c.draft_tokens
    assert spec.get("model", spec.get("method", "")) == c.draft


@pytest.mark.engine
def test_the_measured_runs_command_parses_and_an_unknown_or_partial_flag_does_not(parsed):
    measured, refused, partial = parsed[len(CONFIGURATIONS) : len(CONFIGURATIONS) + 3]
    assert measured["error"] == ""
    assert measured["args"]["tensor_parallel_size"] == 2
    assert measured["args"]["enable_prefix_caching"] is False
    assert "not a flag of vllm serve: ['--speculative-model']" in refused["error"]
    assert "not a flag of vllm serve: ['--pipeline-parallel']" in partial["error"]
