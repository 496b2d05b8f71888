"""The host tier and the counters the profile reads, against the installed vLLM: the
flags the advice prints and the replay serves with, through vLLM's own parser and config
update, and every name of `vllm.METRICS` and `CACHE_CONFIG_INFO` in the exposition vLLM's
own stat logger makes after one recorded step, read by our parser. A GPU is needed to
move a block; none of this needs one, nor a model or a server
(`tests/engine/vllm_offload_probe.py`, seconds: vLLM's import)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from profiling.engine import vllm
from profiling.engine.chat_results import OffloadCounters
from profiling.engine.conversation_replay import offload_counters, tier_tokens
from profiling.engine.metrics import parse_metrics, series
from profiling.projection.host_tier import offload_flags, offload_gib
from profiling.units import GIB
from tests.engine.engine_env import require_engine
from tests.engine.test_engine_environment import ended

pytestmark = pytest.mark.engine  # vLLM's own code, from its environment

PROBE = Path(__file__).with_name("vllm_offload_probe.py")
SIZE_BYTES = int(9.2 * GIB)  # not a whole GiB: the flags round it up


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    python = require_engine()
    with pytest.MonkeyPatch.context() as mp:
        # A worker's own setting that would swap in the simple connector: ours overrides it.
        mp.setenv("VLLM_USE_SIMPLE_KV_OFFLOAD", "1")
        env = vllm.environment("cpu")
    done = subprocess.run(
        [str(python), "-I", str(PROBE), str(vllm.DRIVER), *offload_flags(SIZE_BYTES)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, ended(done.returncode, done.stderr, vllm.failure_reason)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_offload_flags_name_vllms_offloading_connector_at_our_size(probe):
    gib = offload_gib(SIZE_BYTES)
    assert gib == 10
    assert probe["parsed"] == {"kv_offloading_backend": "native", "kv_offloading_size": gib}
    assert probe["connector"] == "OffloadingConnector"  # the one METRICS' offload_* are
    assert probe["connector_config"]["cpu_bytes_to_use"] == gib * GIB
    kv_bytes_per_token = 131_072
    assert tier_tokens(SIZE_BYTES, kv_bytes_per_token) == gib * GIB // kv_bytes_per_token


def names_read(names: vllm.MetricNames) -> dict[str, list[str]]:
    """Each field's sample names as our parser reads them: a histogram's sum and count."""
    out = {}
    for field in dataclasses.fields(names):
        name = getattr(names, field.name)
        histogram = field.name.endswith("_histogram")
        out[field.name] = [f"{name}_sum", f"{name}_count"] if histogram else [name]
    return out


def test_every_counter_the_profile_reads_is_on_vllms_metrics(probe):
    shown = parse_metrics(probe["after"]).values
    missing = {field: [n for n in names if n not in shown]
               for field, names in names_read(vllm.METRICS).items()}  # fmt: skip
    per_position = vllm.METRICS.spec_accepted_per_position  # read per `position` label
    rows = series(probe["after"], per_position)
    if not rows or not all("position" in labels for labels, _ in rows):
        missing["spec_accepted_per_position"] = [per_position]
    assert not {field: names for field, names in missing.items() if names}, (
        f"not shown by vLLM {probe['version']}"
    )
    recorded = probe["recorded"]
    found = vllm.kv_cache_blocks(probe["after"], log="")
    assert found == (recorded["block_size"], recorded["num_gpu_blocks"],
                     f"{vllm.CACHE_CONFIG_INFO} (block_size × num_gpu_blocks)")  # fmt: skip


def test_the_replays_counters_read_back_the_step_vllm_recorded(probe):
    before, after = probe["before"], probe["after"]
    delta = parse_metrics(after).delta(parse_metrics(before))
    r = probe["recorded"]
    assert delta.get(vllm.METRICS.prefix_cache_queries) == r["queries"]
    assert delta.get(vllm.METRICS.prefix_cache_hits) == r["hits"]
    assert offload_counters(vllm.METRICS, before, after, delta) == OffloadCounters(
        external_queries=r["external_queries"], external_hits=r["external_hits"],
        host_hit_tokens=r["external_hits"], load_bytes=r["load_bytes"],
        store_bytes=r["store_bytes"], load_seconds=r["load_seconds"],
        store_seconds=r["store_seconds"],
    )  # fmt: skip


def test_every_engine_process_gets_vllms_own_offloading_connector(monkeypatch):
    monkeypatch.setenv("VLLM_USE_SIMPLE_KV_OFFLOAD", "1")
    for device in ("cpu", "cuda"):
        assert vllm.environment(device)["VLLM_USE_SIMPLE_KV_OFFLOAD"] == "0"
