"""The conversations replayed on the engine: per-turn samples, the engine's own counters,
and the block cache's projection of the same turns beside them.

Plain dataclasses (no torch, no vLLM); `EngineConversations` round-trips through
`profiling.serde` as the engine section's `conversations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling import serde
from profiling.results import Samples

RAN, FAILED, NOT_APPLICABLE = "ran", "failed", "not applicable"


@dataclass
class TurnSample:
    """One turn as the engine served it."""

    conversation: str
    turn: int  # 1-based, within its conversation
    prompt_tokens: int  # as sent: the history (the engine's own replies in it) and the message
    output_tokens: int  # as generated
    sent_s: float  # since the replay began
    ttft_s: float  # to the first streamed token
    latency_s: float  # to the last


@dataclass
class OffloadCounters:
    """The KV-offload connector's counters over one replay (vLLM 0.32's names: the
    connector's `vllm:external_prefix_cache_*`, the hits by tier
    `vllm:prompt_tokens_cached_by_source{source="host"}` and its transfers
    `vllm:kv_offload_{load,store}_{bytes,time}`); None where the server has none."""

    external_queries: int | None = None  # tokens the connector was asked for
    external_hits: int | None = None  # tokens it had
    host_hit_tokens: int | None = None  # prompt tokens served from host memory
    load_bytes: int | None = None  # host → GPU
    store_bytes: int | None = None  # GPU → host
    load_seconds: float | None = None
    store_seconds: float | None = None


@dataclass
class ChatReplay:
    """The conversations replayed once on one server."""

    purpose: str  # "reference" (the engine's defaults) or "offload"
    flags: list[str]
    concurrency: int  # conversations in flight
    block_size: int  # the engine's, as its cache config reports it
    capacity_tokens: int  # the engine's KV: blocks × block size
    capacity_source: str  # where that figure was read
    prompt_tokens: int  # summed over the turns sent
    queries: int  # the engine's `prefix_cache_queries` over the replay (tokens)
    hits: int  # its `prefix_cache_hits` (tokens)
    # The block cache (`profiling.projection.block_cache`) replaying the same turns in
    # the order they were sent, at `projected_capacity_tokens` (the engine's capacity;
    # with an offload tier, the larger of it and the tier's, as the projection's
    # inclusive tier is one cache of that size).
    projected_hit_rate: float
    projected_capacity_tokens: int
    turns: list[TurnSample] = field(default_factory=list)
    offload: OffloadCounters | None = None
    skipped_turns: int = 0  # past the server's context length
    notes: list[str] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        """The engine's own: prefix-cache hit tokens over the tokens it looked up."""
        return self.hits / self.queries if self.queries else 0.0

    @property
    def ttft(self) -> Samples | None:
        return Samples([t.ttft_s for t in self.turns]) if self.turns else None

    def json_extra(self) -> dict[str, Any]:
        ttft = self.ttft
        return {"hit_rate": self.hit_rate, "ttft": serde.to_dict(ttft) if ttft else None}


@dataclass
class EngineConversations:
    """The reference server's replay, and the offload configuration's where it can run."""

    conversations: int
    turns: int
    reference: ChatReplay | None = None
    offload: ChatReplay | None = None
    offload_status: str = NOT_APPLICABLE  # RAN, FAILED or NOT_APPLICABLE
    offload_reason: str = ""  # why it did not run, or its failure
    offload_flags: list[str] = field(default_factory=list)
    error: str = ""  # the reference replay's failure

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineConversations:
        return serde.from_dict(cls, data)

    def reference_line(self) -> str:
        """The engine's hit rate beside the projection's, in one line."""
        ref = self.reference
        if ref is None:
            return f"the replay failed: {self.error}" if self.error else "not replayed"
        ttft = ref.ttft
        at = f", TTFT median {ttft.median * 1e3:,.1f} ms" if ttft else ""
        return (f"{len(ref.turns):,} turns, {ref.concurrency} conversations in flight: prefix-"
                f"cache hit rate {ref.hit_rate:.1%} measured, {ref.projected_hit_rate:.1%} "
                f"projected at the engine's {ref.capacity_tokens:,} tokens of KV{at}")  # fmt: skip

    def offload_line(self) -> str:
        """The host tier's measurement, or why there is none, in one line."""
        tier = self.offload
        if self.offload_status == RAN and tier is not None:
            return (f"{' '.join(self.offload_flags)}: hit rate {tier.hit_rate:.1%} measured, "
                    f"{tier.projected_hit_rate:.1%} projected at "
                    f"{tier.projected_capacity_tokens:,} tokens")  # fmt: skip
        if not self.offload_reason or self.offload_reason.startswith(self.offload_status):
            return self.offload_reason or self.offload_status
        return f"{self.offload_status}: {self.offload_reason}"
