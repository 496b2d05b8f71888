"""A job's fleet: the fewest GPUs of each catalog kind carrying the job's target load
(`load_rps` or `load_users`) within its targets (`profiling.projection.fleet`), each row
with one replica's launch command, as the result's `fleet` JSON.

The search's scenario of the job stands for the model (its speculation and prefix hits
as the job measured them, where it did); every kind, the job's own included, is sized on
its datasheet, and each row says so in its basis. The job's own GPU kind takes the job's
price per GPU-hour where it gives one; the others, the catalog's.
"""

from __future__ import annotations

from typing import Any

from profiling.advice import deployments
from profiling.advice.build import facts_of
from profiling.config import Hardware
from profiling.measure.hardware import catalog
from profiling.model.shapes import Shapes
from profiling.profile import Profile
from profiling.projection.configurations import Configuration
from profiling.projection.fleet import FleetRequest, Load, fleet
from profiling.projection.precision import model_format
from profiling.projection.search import DRAFT, Scenario
from profiling.technique_kit.facts import gpu_of


def fleet_of(profile: Profile, shapes: Shapes) -> dict[str, Any] | None:
    """The fleet JSON for the job's target load (None without one); ValueError where the
    workload has no TTFT or TPOT target."""
    config = profile.config
    load = Load.of(config.load_rps, config.load_users)
    if load is None:
        return None
    hw = config.hardware
    ran = profile.experiments
    sc = None
    if profile.verdict is not None:
        facts = facts_of(profile, shapes)
        sc = deployments.scenario(facts, hw, ran.speculative, profile.engine, ran.quantization)
    if sc is None:  # no deployment GPU named: any kind stands for the model's scenario
        gpu = gpu_of(hw.gpu_kind) or next(iter(catalog().values()))
        dtype = model_format(profile.environment.dtype or "float32")
        sc = Scenario(shapes, gpu, 1, dtype, config.workload, Configuration(gpu.key),
                      None, "", DRAFT, engine=hw.serving_engine)  # fmt: skip
    own = gpu_of(hw.gpu_kind)
    prices = {own.key: hw.gpu_hourly_usd} if own and hw.gpu_hourly_usd is not None else {}
    engine = profile.engine
    version = engine.version if engine and engine.name == sc.engine else None
    return sized(FleetRequest(sc, load, prices=prices, **formats(hw)), config.model, version)


def formats(deployment: Hardware) -> dict[str, str]:
    """The weights and KV cache formats a deployment holds its replicas to ("": any the
    search tries, where it says "auto")."""
    return {name: "" if value == "auto" else value
            for name, value in (("weights", deployment.weights),
                                ("kv_cache", deployment.kv_cache))}  # fmt: skip


def sized(req: FleetRequest, model: str, engine_version: str | None = None) -> dict[str, Any]:
    """The fleet JSON for `req`, each row with one replica's launch command on the
    scenario's serving engine (with the flags of `engine_version`, where one ran)."""
    found = fleet(req)
    for row in found.rows:
        if row.replica is not None:
            row.command = deployments.command(model, row.replica, engine_version,
                                              req.scenario.engine)  # fmt: skip
    return found.to_dict()
