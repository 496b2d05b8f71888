"""Deployable configurations: how a model is laid out over GPUs and served.

A configuration is what an engineer deploys: a layout (tensor × pipeline
stages × replicas, or expert parallelism for a mixture of experts), the
weights' and the KV cache's formats, speculative decoding when a draft (or a
measured acceptance) is known, and prefix caching. The serving model projects
each at the user's workload; the advice ranks them; the engine layer turns
each into the command that launches it.

No torch import (the site and the estimate use it from stored reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS


@dataclass(frozen=True)
class Configuration:
    """One deployable configuration of `gpus` GPUs of kind `gpu` (a catalog key)."""

    gpu: str
    tp: int = 1
    pp: int = 1
    replicas: int = 1
    ep: int = 1  # expert-parallel ranks per copy (data-parallel attention); tp = pp = 1 then
    weights: str = "auto"  # a key of options.WEIGHT_FORMATS
    kv_cache: str = "auto"  # a key of options.KV_CACHE_FORMATS
    draft: str = ""  # the draft model (or "ngram"); "" = no speculative decoding
    draft_tokens: int = 0  # tokens the draft proposes per step
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        if self.weights not in WEIGHT_FORMATS:
            raise ValueError(f"unknown weight format {self.weights!r}")
        if self.kv_cache not in KV_CACHE_FORMATS:
            raise ValueError(f"unknown KV-cache format {self.kv_cache!r}")
        if min(self.tp, self.pp, self.replicas, self.ep) < 1:
            raise ValueError("tp, pp, replicas and ep are at least 1")
        if self.ep > 1 and (self.tp, self.pp) != (1, 1):
            raise ValueError("expert parallelism here is data-parallel attention: tp = pp = 1")
        if bool(self.draft) != (self.draft_tokens > 0):
            raise ValueError("a draft and its draft length go together")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.ep * self.replicas

    @property
    def layout(self) -> str:
        copies = f"{self.replicas} replicas of " if self.replicas > 1 else ""
        if self.ep > 1:
            return f"{copies}DP={self.ep} attention + EP={self.ep} experts"
        return copies + " × ".join([f"TP={self.tp}"] + ([f"PP={self.pp}"] if self.pp > 1 else []))

    @property
    def name(self) -> str:
        """`TP=2, fp8 weights, fp8 KV cache, draft demo-draft k=4, prefix caching`."""
        parts = [self.layout]
        if self.weights != "auto":
            parts.append(f"{self.weights} weights")
        if self.kv_cache != "auto":
            parts.append(f"{self.kv_cache} KV cache")
        if self.draft:
            # A local checkpoint by its folder's name; a hub id (org/name) whole.
            draft = (
                self.draft.rstrip("/").rsplit("/", 1)[-1] if self.draft[:1] == "/" else self.draft
            )
            parts.append(f"draft {draft} k={self.draft_tokens}")
        if self.prefix_caching:
            parts.append("prefix caching")
        return ", ".join(parts)
