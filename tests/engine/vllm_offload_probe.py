"""What the installed vLLM makes of the host tier's flags and which counters its server
would show, without a model, a GPU or a server; run by the engine's Python.

    <engine python> -I vllm_offload_probe.py DRIVER FLAG...

FLAG... go through vLLM's own CLI parser and config update (the flags → the KV
connector and its config). The server's stat logger is then built as the server builds
it, with that connector, on a private Prometheus registry; one step of stats (`RECORDED`:
prefix-cache lookups, the connector's hits, host-tier hits and transfers) is recorded
through vLLM's own `record`, and the registry's exposition text is printed before and
after it, as `/metrics` would serve it, in one JSON object on the last line. Only the
standard library and vLLM are imported; DRIVER (`profiling/engine/_bench_driver.py`)
maps the CPU build's version lookup, as for every engine process.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import runpy
import sys
import types
from typing import Any

# One step of the server's stats: what the test expects our parser to read back.
RECORDED = {
    "queries": 640, "hits": 192, "external_queries": 448, "external_hits": 256,
    "load_bytes": 3 * 2**20, "load_seconds": 0.25, "store_bytes": 5 * 2**20,
    "store_seconds": 0.5, "block_size": 16, "num_gpu_blocks": 1234,
}  # fmt: skip


def registry_bound(registry: Any) -> dict[str, type]:
    """Prometheus' metric classes, each registering on `registry`."""
    import prometheus_client as pc

    def bind(base: type) -> type:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            base.__init__(self, *args, registry=registry, **kwargs)

        return type(base.__name__, (base,), {"__init__": init})

    return {"_gauge_cls": bind(pc.Gauge), "_counter_cls": bind(pc.Counter),
            "_histogram_cls": bind(pc.Histogram)}  # fmt: skip


def main(driver: str, flags: list[str]) -> dict[str, Any]:
    metadata.version = runpy.run_path(driver)["_vllm_version"]
    import prometheus_client as pc
    from vllm.config import CacheConfig, ObservabilityConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorProm
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading import metrics as offload
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.v1.metrics import loggers
    from vllm.v1.metrics.cache_hit_source import CacheHitSource
    from vllm.v1.metrics.stats import PrefixCacheStats, SchedulerStats
    from vllm.v1.spec_decode.metrics import SpecDecodingProm

    args = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(flags)
    engine_args = EngineArgs.from_cli_args(args)
    cache = CacheConfig(
        block_size=RECORDED["block_size"],
        kv_offloading_backend=engine_args.kv_offloading_backend,
        kv_offloading_size=engine_args.kv_offloading_size,
    )
    cache.num_gpu_blocks = RECORDED["num_gpu_blocks"]
    # vLLM's own step from the cache config to the KV connector (VllmConfig.__post_init__).
    config = types.SimpleNamespace(cache_config=cache, kv_transfer_config=None)
    VllmConfig._post_init_kv_transfer_config(config)
    transfer = config.kv_transfer_config

    registry = pc.CollectorRegistry()
    bound = registry_bound(registry)
    logger_cls = type("Logger", (loggers.PrometheusStatLogger,), {
        **bound,
        "_kv_connector_cls": type("KV", (KVConnectorProm,), bound),
        "_spec_decoding_cls": type("Spec", (SpecDecodingProm,), bound),
    })  # fmt: skip
    vllm_config = types.SimpleNamespace(
        observability_config=ObservabilityConfig(), cache_config=cache,
        model_config=types.SimpleNamespace(served_model_name="m", max_model_len=2048,
                                           is_diffusion=False),
        speculative_config=types.SimpleNamespace(num_speculative_tokens=2),
        kv_transfer_config=transfer, ec_transfer_config=None, watermark_config=None,
        lora_config=None,
    )  # fmt: skip
    logger = logger_cls(vllm_config)
    logger.log_engine_initialized()
    before = pc.generate_latest(registry).decode()

    moved = offload.OffloadingConnectorStats()
    for name, key in ((offload._TransferMetricName.LOAD_BYTES, "load_bytes"),
                      (offload._TransferMetricName.LOAD_TIME, "load_seconds"),
                      (offload._TransferMetricName.STORE_BYTES, "store_bytes"),
                      (offload._TransferMetricName.STORE_TIME, "store_seconds")):  # fmt: skip
        moved.increase_counter(name, RECORDED[key])
    external = PrefixCacheStats(
        queries=RECORDED["external_queries"], hits=RECORDED["external_hits"],
        hits_by_source={CacheHitSource.HOST: RECORDED["external_hits"]},
    )  # fmt: skip
    step = SchedulerStats(
        prefix_cache_stats=PrefixCacheStats(queries=RECORDED["queries"], hits=RECORDED["hits"]),
        connector_prefix_cache_stats=external, kv_connector_stats=moved.to_dict(),
    )  # fmt: skip
    logger.record(step, None)
    return {
        "version": metadata.version("vllm"),
        "parsed": {"kv_offloading_backend": engine_args.kv_offloading_backend,
                   "kv_offloading_size": engine_args.kv_offloading_size},
        "connector": transfer.kv_connector if transfer else None,
        "connector_config": dict(transfer.kv_connector_extra_config) if transfer else {},
        "recorded": RECORDED,
        "before": before,
        "after": pc.generate_latest(registry).decode(),
    }  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:])))
