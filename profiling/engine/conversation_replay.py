"""The user's conversations on the engine: its prefix cache measured against the replay's
projection, and a host-memory tier under it where the device has one.

On the reference server (the engine's defaults, prefix caching on) the conversations are
replayed turn by turn (`chat_replay`), the engine's own counters read before and after
(`prefix_cache_queries`, `prefix_cache_hits`, in tokens), and the same turns, as sent
and in the order sent, replayed through the block cache (`profiling.projection.
block_cache`) at the engine's own KV capacity (its blocks × its block size, as the
server reports them). Beside the measured hit rate that is the projected one.

On a GPU the same replay runs again on a server with a host-memory tier
(`offload_flags` of `offload_bytes`), projected as the host tier's projection does (an
inclusive tier: one cache of the larger size), its connector's counters read too. On a
CPU worker it is not run and says why (`OFFLOAD_CPU_REASON`). The sweep's random
prompts, run before on the same server, sit in its cache, but as its least recently
used blocks: the conversations' blocks are newer, so they are evicted first and take no
room from the replay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiling.engine import chat_replay
from profiling.engine.chat_results import (
    FAILED,
    NOT_APPLICABLE,
    RAN,
    ChatReplay,
    EngineConversations,
    OffloadCounters,
)
from profiling.engine.interface import Engine, MetricNames
from profiling.engine.metrics import Metrics, by_label, parse_metrics
from profiling.engine.server import EngineFailed, Server
from profiling.projection import block_cache as bc
from profiling.projection.conversation_workloads import Conversation
from profiling.projection.host_tier import OFFLOAD_CPU_REASON, offload_gib
from profiling.units import GIB

SETTLE_S = 5.0  # the counters trail the last reply by a step at most


@dataclass
class ChatSubject:
    """What the replay sends, and to which model."""

    model: str
    conversations: list[Conversation]
    concurrency: int
    max_model_len: int
    vocab_size: int
    clock: chat_replay.Clock | None = None


def measure_replay(
    engine: Engine, server: Server, subject: ChatSubject, purpose: str, flags: list[str],
    tier_tokens: int = 0, on_replayed: Callable[[chat_replay.Replayed], None] | None = None,
) -> ChatReplay:  # fmt: skip
    """The conversations on `server`, measured and projected (see the module docstring);
    `tier_tokens`: a host tier's size, projected as one cache with the GPU's;
    `on_replayed` is handed the turns as sent (the result keeps their counts, not ids)."""
    names = engine.METRICS
    before = server.metrics_text()
    replayed = chat_replay.replay(
        chat_replay.http_stream(server.url), subject.model, subject.conversations,
        subject.concurrency, subject.max_model_len, subject.vocab_size, subject.clock,
    )  # fmt: skip
    if on_replayed is not None:
        on_replayed(replayed)
    sent_tokens = sum(t.prompt_tokens for t in replayed.turns)
    counted = parse_metrics(before)
    after = _settled(server, names, counted, sent_tokens)
    delta = parse_metrics(after).delta(counted)
    found = engine.kv_cache_blocks(after, server.log_text())
    if found is None:
        raise EngineFailed("the engine reported neither its KV blocks nor its block size")
    block_size, blocks, source = found
    capacity = block_size * blocks
    projected_capacity = max(capacity, tier_tokens)
    notes = list(replayed.notes)
    queries = int(delta.get(names.prefix_cache_queries))
    if queries != sent_tokens:
        notes.append(f"the engine looked up {queries:,} prompt tokens, the replay sent "
                     f"{sent_tokens:,}")  # fmt: skip
    return ChatReplay(
        purpose=purpose, flags=flags, concurrency=subject.concurrency,
        block_size=block_size, capacity_tokens=capacity, capacity_source=source,
        prompt_tokens=sent_tokens, queries=queries,
        hits=int(delta.get(names.prefix_cache_hits)),
        projected_hit_rate=projected_hit_rate(replayed, block_size, projected_capacity),
        projected_capacity_tokens=projected_capacity, turns=replayed.turns,
        offload=offload_counters(names, before, after, delta) if tier_tokens else None,
        skipped_turns=replayed.skipped_turns, notes=notes,
    )  # fmt: skip


def projected_hit_rate(replayed: chat_replay.Replayed, block_size: int, capacity: int) -> float:
    """The block cache's hit rate for the turns as sent, in the order sent, at `capacity`."""
    requests = [bc.Request(t.sent_s, i, t.prompt_tokens, t.output_tokens)
                for t, i in zip(replayed.turns, replayed.order, strict=True)]  # fmt: skip
    workload = bc.Workload(replayed.sent, requests, block_size)
    return bc.replay(workload, capacity).hit_rate


def _settled(server: Server, names: MetricNames, before: Metrics, sent_tokens: int,
             sleep: Callable[[float], None] = time.sleep) -> str:  # fmt: skip
    """The server's counters once they hold every turn's lookup (or after SETTLE_S)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        text = server.metrics_text()
        looked_up = parse_metrics(text).get(names.prefix_cache_queries)
        if looked_up - before.get(names.prefix_cache_queries) >= sent_tokens:
            return text
        if time.monotonic() > deadline:
            return text
        sleep(0.2)


def offload_counters(names: MetricNames, before: str, after: str, delta: Metrics) -> Any:
    """The offload connector's counters over the replay, each None where the server has
    no such series (the connector registers some only once it has moved a block)."""
    present = parse_metrics(after).values

    def counted(name: str) -> int | None:
        return int(delta.get(name)) if name and name in present else None

    def seconds(name: str) -> float | None:
        return delta.get(name) if name and name in present else None

    host = by_label(after, names.cached_by_source, "source")
    host_before = by_label(before, names.cached_by_source, "source")
    return OffloadCounters(
        external_queries=counted(names.external_queries),
        external_hits=counted(names.external_hits),
        host_hit_tokens=int(host["host"] - host_before.get("host", 0.0)) if "host" in host
        else None,
        load_bytes=counted(names.offload_load_bytes),
        store_bytes=counted(names.offload_store_bytes),
        load_seconds=seconds(names.offload_load_seconds),
        store_seconds=seconds(names.offload_store_seconds),
    )  # fmt: skip


def offload_plan(device: str, offload_bytes: int | None) -> tuple[str, str]:
    """(status, reason) of the offload configuration before any server starts."""
    if not device.startswith("cuda"):
        return NOT_APPLICABLE, OFFLOAD_CPU_REASON
    if not offload_bytes:
        return NOT_APPLICABLE, "no host tier was sized for these conversations"
    return RAN, ""


def tier_tokens(offload_bytes: int, kv_bytes_per_token: int) -> int:
    """Tokens of KV the tier the flags name holds (they name whole GiB)."""
    return offload_gib(offload_bytes) * GIB // max(1, kv_bytes_per_token)


def subject_of(target: Any) -> ChatSubject:
    """The replay of an engine profile's `Target`."""
    t = target
    return ChatSubject(t.model, t.conversations, t.concurrency, t.max_model_len, t.vocab_size)


def reference_replay(
    session: Any, server: Server, on_replayed: Callable[[chat_replay.Replayed], None] | None = None
) -> EngineConversations:
    """The conversations on the reference `server` of `session` (an engine profile's
    `Session`); a failure is recorded, never raised, and the offload's plan said."""
    subject = subject_of(session.target)
    out = EngineConversations(
        conversations=len(subject.conversations),
        turns=sum(len(c.turns) for c in subject.conversations),
    )
    try:
        out.reference = measure_replay(session.engine, server, subject, "reference", [],
                                       on_replayed=on_replayed)  # fmt: skip
    except (EngineFailed, OSError, ValueError, KeyError) as exc:  # a reply it cannot read
        out.error = str(exc) or type(exc).__name__
        session.failures.append(f"conversations: engine failed: {out.error}")
    out.offload_status, out.offload_reason = offload_plan(
        session.target.device, session.target.offload_bytes
    )
    if out.reference is None and out.offload_status == RAN:
        out.offload_status, out.offload_reason = NOT_APPLICABLE, "the reference replay failed"
    return out


def offload_replay(session: Any, out: EngineConversations) -> None:
    """The same conversations on a server with the host tier (`out.offload_status` RAN
    only where `offload_plan` allows it), into `out`."""
    t = session.target
    flags = session.engine.offload_flags(t.offload_bytes)
    out.offload_flags = flags
    try:
        with session.server("kv offload", flags) as server:
            session.ran(server)
            tier = tier_tokens(t.offload_bytes, t.kv_bytes_per_token)
            out.offload = measure_replay(session.engine, server, subject_of(t), "offload",
                                         flags, tier)  # fmt: skip
    except (EngineFailed, OSError, ValueError, KeyError) as exc:  # a reply it cannot read
        out.offload_status, out.offload_reason = FAILED, session.failed("kv offload", exc)
