"""The fleet table on the command line: `python -m profiling estimate MODEL --load-rps R`
(or `--load-users U`) sizes every GPU kind of the catalog, or those `--fleet-gpus` names,
for that load within the TTFT and TPOT targets (`profiling.projection.fleet`) and prints
the kinds ranked by cost, each with its launch command per replica. Without `--gpu` the
estimate prints only the table; with it, the table after the rest."""

from __future__ import annotations

import argparse
from typing import Any

from profiling.advice.fleet import formats
from profiling.advice.fleet import sized as fleet_json
from profiling.cli_common import flag_arguments
from profiling.config import ConfigError, Hardware, Workload
from profiling.fleet_options import FLEET
from profiling.measure import hardware
from profiling.model.shapes import Shapes
from profiling.option_type import NAMES
from profiling.projection.configurations import Configuration
from profiling.projection.fleet import Fleet, FleetRequest, Load
from profiling.projection.precision import model_format
from profiling.projection.search import DRAFT, Scenario
from profiling.units import significant


def add_fleet_flags(p: argparse.ArgumentParser) -> None:
    """`--load-rps`, `--load-users`, `--fleet-gpus`, `--fleet-prices`, `--fleet-max-gpus`."""
    for option in FLEET:
        flag, kwargs = flag_arguments(option)
        p.add_argument(flag, **kwargs)


def load_of(args: argparse.Namespace) -> Any:
    """The `Load` the flags give, or None; a ConfigError for both or a bad value."""
    rate, users = getattr(args, "load_rps", None), getattr(args, "load_users", None)
    if rate is None and users is None:
        return None
    if rate is not None and users is not None:
        raise ConfigError("give --load-rps or --load-users, not both")
    for option in FLEET[:2]:
        problem = option.problem(getattr(args, option.name))
        if problem:
            raise ConfigError(problem)
    return Load.of(rate, users)


def kinds_of(text: str) -> tuple[str, ...]:
    """ "h100,L4" → ("H100-SXM", "L4"): catalog keys, by name or alias."""
    try:
        return tuple(dict.fromkeys(hardware.lookup(n.strip()).key
                                   for n in text.split(",") if n.strip()))  # fmt: skip
    except hardware.UnknownGPU as exc:
        raise ConfigError(str(exc)) from None


def prices_of(text: str) -> dict[str, float]:
    """ "H100=2.10,L4=0.7" → {"H100-SXM": 2.1, "L4": 0.7}."""
    out = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        name, _, usd = pair.partition("=")
        try:
            value = float(usd)
        except ValueError:
            raise ConfigError(f"--fleet-prices: {pair!r} is not KIND=USD") from None
        if not 0 < value <= 10_000:
            raise ConfigError(f"--fleet-prices: {pair!r}: a price from 0.001 to 10,000 USD")
        out[kinds_of(name)[0] if name.strip() else ""] = value
    out.pop("", None)
    return out


def sized(
    args: argparse.Namespace,
    load: Any,
    shapes: Shapes,
    model_dtype: str,
    workload: Workload,
    deployment: Hardware,
    model: str,
) -> dict[str, Any]:
    """The fleet JSON for the flags: the kinds ranked, each with its launch command."""
    if not (workload.ttft_ms or workload.tpot_ms):
        raise ConfigError("a fleet is sized within targets: give --ttft-ms or --tpot-ms")
    for option in FLEET[2:]:
        value = getattr(args, option.name)
        problem = option.problem(value) if option.kind != NAMES else None  # names: below
        if problem:
            raise ConfigError(problem)
    kinds = kinds_of(args.fleet_gpus)
    prices = prices_of(args.fleet_prices)
    if deployment.gpu_kind and deployment.gpu_hourly_usd is not None:
        prices.setdefault(deployment.gpu_kind, deployment.gpu_hourly_usd)
    first = hardware.lookup(deployment.gpu_kind or (kinds or tuple(hardware.catalog()))[0])
    acceptance = args.spec_acceptance
    sc = Scenario(shapes, first, 1, model_format(model_dtype), workload,
                  Configuration(first.key), acceptance, "given" if acceptance else "", DRAFT,
                  engine=deployment.serving_engine)  # fmt: skip
    req = FleetRequest(sc, load, kinds, prices, args.fleet_max_gpus, **formats(deployment))
    try:
        return fleet_json(req, model)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def render_fleet(found: dict[str, Any] | None) -> list[str]:
    """The fleet table: one line per GPU kind, ranked, then each carried kind's details."""
    if not found:
        return []

    fleet = Fleet.from_dict(found)
    load = fleet.load
    width = max([len("replicas × one replica")] + [len(r.layout) for r in fleet.rows])
    targets = ", ".join(f"{name} {value:g} ms" for name, value in
                        (("TTFT", fleet.ttft_ms), ("TPOT", fleet.tpot_ms)) if value)  # fmt: skip
    lines = [
        "",
        f"Fleet for {load.text} of {fleet.prompt_tokens:,} + {fleet.output_tokens:,} tokens "
        f"(p90 targets: {targets}; up to {fleet.max_gpus} GPUs of a kind)",
        f"  {'':3} {'GPU kind':15} {'GPUs':>4}  {'replicas × one replica':{width}} {'$/hour':>8} "
        f"{'$/Mtok':>7} {'headroom':>9} {'kW':>6} {'tok/J':>6}  basis",
    ]
    for i, (row, data) in enumerate(zip(fleet.rows, found["rows"], strict=True), start=1):
        if not row.carries:
            lines.append(f"  {'-':3} {row.gpu:15} {'—':>4}  {row.reason}")
            continue
        hourly = f"${row.usd_per_hour:,.2f}" if row.usd_per_hour is not None else "no price"
        per_million = (f"${significant(row.usd_per_million_output_tokens)}"
                       if row.usd_per_million_output_tokens is not None else "—")  # fmt: skip
        kilowatts = f"{row.watts / 1e3:,.3g}" if row.watts is not None else "—"
        per_joule = (f"{significant(row.output_tokens_per_joule)}"
                     if row.output_tokens_per_joule is not None else "—")  # fmt: skip
        lines.append(
            f"  {f'{i}.':3} {row.gpu:15} {row.gpus:>4}  {row.layout:{width}} {hourly:>8} "
            f"{per_million:>7} {data['headroom_text']:>9} {kilowatts:>6} {per_joule:>6}  "
            f"{row.basis}"
        )
    for row in fleet.rows:
        if row.carries:
            lines += _details(fleet, row)
    return lines + [f"   {note}" for note in fleet.notes]


def _details(fleet: Any, row: Any) -> list[str]:
    at, load = row.at_load, fleet.load
    unit = "users" if load.users is not None else "requests/s"
    cap = row.capacity_users if load.users is not None else row.capacity_request_rate
    out = [f"   {row.gpu}: {row.layout} ({row.gpus_per_replica} GPU"
           f"{'s' * (row.gpus_per_replica > 1)} each), {row.price_source}"]  # fmt: skip
    if row.watts is not None:
        each = row.watts / row.gpus
        out.append(f"      power: {row.watts:,.0f} W at the datasheet's {each:,.0f} W per GPU "
                   f"({row.power_source.split(' ', 1)[0]})")  # fmt: skip
    figures = f"one replica carries up to {cap:,.3g} {unit}" + (
        " or more" if row.capacity_at_least else "")  # fmt: skip
    if at is not None and at.tpot_p90_seconds is not None:
        figures += (f"; at the load, {at.users_per_replica:,} users each: TTFT p90 "
                    f"{at.ttft_p90_seconds * 1e3:.3g} ms, TPOT p90 "
                    f"{at.tpot_p90_seconds * 1e3:.3g} ms, "
                    f"{at.throughput_tokens_per_second / row.gpus:,.0f} tok/s per GPU")  # fmt: skip
    out.append(f"      {figures}")
    if row.quality_risk:
        out.append(f"      quality: {row.quality_risk}")
    out += [f"      {note}" for note in row.notes]
    command = row.command or {}
    if command.get("text"):
        out.append(f"      $ {command['text']}")
        if row.replicas > 1:
            gpus = f"{row.gpus_per_replica} GPU{'s' * (row.gpus_per_replica > 1)}"
            out.append(f"      (once per replica: {row.replicas} servers, each on its own "
                       f"{gpus} with its own --port, behind a load balancer that spreads the "
                       "requests evenly)")  # fmt: skip
    elif command.get("unavailable"):
        out.append(f"      no command: {command['unavailable']}")
    return out


def render_alone(report: dict[str, Any]) -> str:
    """The model line and the fleet table: an estimate with a load and no `--gpu`."""
    model = report["model"]
    lines = [f"Model   {model['name']} ({model['source']}, "
             f"{model['num_parameters'] / 1e9:,.2f} B parameters, {report['dtype']})"]  # fmt: skip
    return "\n".join(lines + render_fleet(report["fleet"]))
