"""`python -m profiling estimate MODEL --gpu KIND [--gpus N] [workload flags] [--json PATH]`.

Advice and projected TTFT, TPOT, throughput and memory from a model's config
and the GPU's datasheet alone: no weights are built and nothing is
downloaded. MODEL is a shipped config name (`llama-3.1-8b`), a local
directory holding config.json, or a path to a config.json. Every figure is
marked "estimated"; the JSON has the same `advice` and `predictions` keys as
a profiled job. Exit 2 for an unknown model or GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from profiling import fleet_cli, serde
from profiling.advice.build import estimate_report
from profiling.advice.job_conversations import add_to_advice
from profiling.advice.text import render_advice, render_predictions
from profiling.caching import conversation_estimate as chats
from profiling.caching.conversation_estimate import render_conversations
from profiling.cli_common import (
    add_conversations_flag,
    add_workload_flags,
    hardware_from_args,
    workload_from_args,
    write_json_atomic,
)
from profiling.config import ConfigError
from profiling.measure import hardware
from profiling.model.shapes import Shapes, SizingError
from profiling.projection.engines import DEFAULT_ENGINE, NAMES
from profiling.projection.estimate import shipped_configs
from profiling.projection.precision import PRECISIONS, serving_precision
from profiling.projection.search import FP8_WEIGHT_ONLY, rates_on
from profiling.technique_kit.advice_results import Advice, PredictionPoint, Recommendation

EXIT_OK, EXIT_BAD_INPUT = 0, 2
DEFAULT_DTYPE = "bfloat16"


def register(commands: Any) -> None:
    """Add the `estimate` command to `python -m profiling`'s subcommands."""
    p = commands.add_parser("estimate", help="advice and projections from a config (no weights)")
    p.add_argument("model", help="shipped config name, directory with config.json, or its path")
    add_workload_flags(p)
    p.add_argument(
        "--spec-acceptance", type=float, metavar="A", default=None,
        help="your draft's acceptance per drafted token (0–1) for the speculative estimate; "
        "without it a stated range is assumed",
    )  # fmt: skip
    add_conversations_flag(p, needs="; needs MODEL as a local directory with its tokenizer")
    fleet_cli.add_fleet_flags(p)  # the fleet table: --load-rps / --load-users
    p.add_argument("--json", type=Path, metavar="PATH", help="write the estimate JSON here")
    p.set_defaults(func=cmd_estimate)


def read_model_config(model: str) -> tuple[dict[str, Any], str]:
    """(the transformers config dict, where it came from); ConfigError when none is found."""
    shipped = shipped_configs()
    if model in shipped:
        return shipped[model], "shipped config"
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            config = json.loads(path.read_text())
            # A ModelOpt checkpoint states its format beside config.json, as vLLM reads it.
            modelopt = path.with_name("hf_quant_config.json")
            if "quantization_config" not in config and modelopt.is_file():
                quant = json.loads(modelopt.read_text()).get("quantization") or {}
                config["quantization_config"] = {"quant_method": "modelopt", **quant}
            return config, str(path)
        except (OSError, ValueError, AttributeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
    raise ConfigError(
        f"unknown model {model!r}: give a shipped config ({', '.join(shipped)}), a directory "
        "with config.json, or a config.json path (estimate never downloads)"
    )


def estimate(args: argparse.Namespace) -> dict[str, Any]:
    """The estimate JSON for parsed flags; raises ConfigError on bad input."""
    deployment = hardware_from_args(args)
    load = fleet_cli.load_of(args)
    if deployment.gpu_kind is None and load is None:
        raise ConfigError(f"estimate needs --gpu KIND, one of: {', '.join(hardware.catalog())}"
                          " (or a load to size a fleet for: --load-rps R)")  # fmt: skip
    gpu = hardware.lookup(deployment.gpu_kind) if deployment.gpu_kind else None
    workload = workload_from_args(args)
    config, source = read_model_config(args.model)
    try:
        shapes = Shapes.from_config(config)
    except SizingError as exc:
        raise ConfigError(f"{args.model}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{args.model}: not a decoder config this estimate reads ({exc})"
        ) from None
    # auto: as the checkpoint ships (its quantization_config), else bf16; its KV cache
    # too, where the checkpoint names one (ModelOpt's fp8 KV).
    model_dtype = serving_precision(shapes, "") if args.dtype == "auto" else args.dtype
    if deployment.kv_cache == "auto" and shapes.checkpoint and shapes.checkpoint.kv == "float8":
        deployment = dataclasses.replace(deployment, kv_cache="fp8")
    dtype = deployment.serving_dtype(model_dtype)
    if gpu is not None:
        _check_runs_on(gpu, dtype, deployment.weights)
    acceptance = args.spec_acceptance
    if acceptance is not None and not 0.0 <= acceptance < 1.0:
        raise ConfigError(f"--spec-acceptance {acceptance}: give a share from 0 to below 1")
    # Launch commands name what an engine loads: a shipped config's Hub repository.
    launched = config.get("_hf_id") if source == "shipped config" else None
    fleet = load and fleet_cli.sized(args, load, shapes, model_dtype, workload, deployment,
                                     launched or args.model)  # fmt: skip
    described = {"name": args.model, "source": source, "num_parameters": shapes.total_params}
    if gpu is None:  # a load and no GPU: the fleet table alone
        return {"basis": "estimated", "model": described, "dtype": dtype,
                "workload": vars(workload), "fleet": fleet}  # fmt: skip
    advice, points = estimate_report(
        shapes, gpu, args.gpu_count, dtype, workload, args.stated_bottleneck,
        spec_acceptance=acceptance, deployment=deployment, model=launched or args.model,
    )  # fmt: skip
    layout = deployment.layout()
    conversations = None
    if args.conversations or (workload.conversation_turns or 1) > 1:
        given, given_source = None, None
        if args.conversations:
            folder = Path(source).parent if source != "shipped config" else Path(args.model)
            given = chats.file_conversations(args.conversations, folder, workload)
            given_source = chats.file_source(Path(args.conversations).name)
        conversations = chats.estimate_conversations(
            shapes, gpu, args.gpu_count, dtype, workload, deployment, conversations=given,
            source=given_source,
        )  # fmt: skip
        if conversations["advice"]["recommended"]:
            # One ranked answer: the host tier enters the ranking with the rest, not a
            # second verdict in its own section (as a profile's does).
            tier = serde.from_dict(Recommendation, conversations["advice"])
            add_to_advice(advice, tier, workload, args.gpu_count)
    return {
        "basis": "estimated",
        "model": described,
        "hardware": {
            "gpu_kind": gpu.key,
            "gpu_label": gpu.label,
            "gpu_count": args.gpu_count,
            "serving_engine": deployment.serving_engine,
            "weights": deployment.weights,
            "kv_cache": deployment.kv_cache,
            "layout": dict(zip(("tp", "pp", "replicas"), layout, strict=True)) if layout else None,
            "gpu_hourly_usd": deployment.gpu_hourly_usd,
        },  # fmt: skip
        "dtype": dtype,
        "workload": vars(workload),
        "stated_bottleneck": args.stated_bottleneck,
        "advice": advice.to_dict(),
        "predictions": [p.to_dict() for p in points],
        "deployments": advice.deployments,
        "conversations": conversations,
        "fleet": fleet,
    }


def render(report: dict[str, Any]) -> str:
    if "advice" not in report:
        return fleet_cli.render_alone(report)
    model, hw = report["model"], report["hardware"]
    lines = [
        f"Model   {model['name']} ({model['source']}, "
        f"{model['num_parameters'] / 1e9:,.2f} B parameters, {report['dtype']})",
        f"GPUs    {hw['gpu_count']}× {hw['gpu_label']} (datasheet peaks, assumed efficiencies)",
        f"Engine  {NAMES[hw.get('serving_engine', DEFAULT_ENGINE)]}'s default limits "
        "(--serving-engine)",
    ]
    points = [PredictionPoint.from_dict(p) for p in report["predictions"]]
    lines += render_predictions(points) + render_advice(Advice.from_dict(report["advice"]))
    lines += render_deployments(report.get("deployments"))
    if report.get("conversations"):
        lines += render_conversations(report["conversations"])
    lines += fleet_cli.render_fleet(report.get("fleet"))
    return "\n".join(lines)


def render_deployments(found: dict[str, Any] | None) -> list[str]:
    """The searched configurations, ranked, with their capacity, cost and command."""
    if not found:
        return []
    targets = ", ".join(f"{k.removesuffix('_ms').upper()} {v:g} ms"
                        for k, v in found["targets"].items() if v)  # fmt: skip
    price = (f"${found['gpu_hourly_usd']:g}/GPU-hour: {found['price_source']}"
             if found["gpu_hourly_usd"] is not None else found["price_source"])  # fmt: skip
    where = f"{found['gpu_count']}× {found['gpu']}"
    lines = ["", f"Deployments ({where}; targets: {targets or 'none'}; {price})"]
    for i, row in enumerate(found["configurations"]):
        mark = "→" if i == found["pick"] else ("+" if i == found["more_hardware"] else " ")
        more = "" if row["on_your_gpus"] else "with more hardware: "
        met = {True: "meets", False: "misses", None: "no target"}[row["meets"]]
        lines.append(
            f" {mark} {i + 1}. {more}{row['name']} ({row['gpus']}× GPU) [{row['basis']}, {met}, "
            f"{row['changes']} change{'s' if row['changes'] != 1 else ''}]: "
            f"TPOT p90 {row['tpot_p90_seconds'] * 1e3:.3g} ms, TTFT p90 "
            f"{row['ttft_p90_seconds'] * 1e3:.3g} ms, {row['throughput_tokens_per_second']:,.0f} "
            f"tok/s ({row['per_gpu_tokens_per_second']:,.0f} per GPU)"
        )
        lines += _deployment_details(row)
    return lines + [f"   {note}" for note in found["notes"]]


def _needs(cost: dict[str, Any]) -> str:
    hours = cost.get("gpu_hours_per_day_at_capacity")
    return f" ({hours:.3g} at capacity for your traffic)" if hours else ""


def _deployment_details(row: dict[str, Any]) -> list[str]:
    out = []
    if row["capacity"]["users"] is not None:
        cap = row["capacity"]
        out.append(f"      {row['headroom']} "
                   f"({cap['goodput_tokens_per_second']:,.0f} tok/s goodput there)")  # fmt: skip
    cost = row["cost"]
    if cost["usd_per_million_output_tokens"] is not None:
        at_cap = cost["usd_per_million_at_capacity"]
        out.append(f"      ${cost['usd_per_million_output_tokens']:.3g} per million output tokens "
                   f"at your load" + (f", ${at_cap:.3g} at capacity" if at_cap else "")
                   + f"; {cost['gpu_hours_per_day']:g} GPU-hours a day" + _needs(cost))  # fmt: skip
    else:
        out.append(f"      no price; {cost['gpu_hours_per_day']:g} GPU-hours a day{_needs(cost)}")
    if row["quality_risk"]:
        out.append(f"      quality: {row['quality_risk']}")
    out += [f"      {note}" for note in row.get("notes", [])]
    if row["command"] and row["command"].get("text"):
        out.append(f"      $ {row['command']['text']}")
    elif row["command"] and row["command"].get("unavailable"):
        out.append(f"      no command: {row['command']['unavailable']}")
    return out


def _check_runs_on(gpu: hardware.GPU, dtype: str, weights: str) -> None:
    """A ConfigError naming what to give instead where `gpu` has no compute peak for the
    format the estimate serves in (fp8 on an A100: no fp8 cores)."""
    if rates_on(gpu, dtype, 0) is not None:
        return
    form = PRECISIONS.get(dtype)
    compute = {"float8": "fp8"}.get(form.compute, form.compute) if form else dtype
    chosen = f"--weights {weights}" if weights != "auto" else "the checkpoint's own format"
    *first, last = (f for f in ("bf16", "int8", "int4") if f != compute)
    vllm = f"; {FP8_WEIGHT_ONLY}" if compute == "fp8" else ""
    raise ConfigError(
        f"{gpu.label} has no {compute} compute, and {chosen} serves in {compute}: "
        f"give --weights {', '.join(first)} or {last}{vllm}"
    )


def cmd_estimate(args: argparse.Namespace) -> int:
    try:
        report = estimate(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(render(report))
    if args.json:
        write_json_atomic(args.json, report)
        print(f"\nwrote {args.json}", file=sys.stderr)
    return EXIT_OK
