"""Where proposals come from: a smaller draft model, or n-gram lookup in the text so far.

A drafter proposes up to `limits[b]` tokens for each row b, then is told how
many of them the target accepted so it can roll its own state back. Both
kinds share that two-call protocol, so the loop does not care which it has.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from profiling.errors import ProfilingError
from profiling.model import memory
from profiling.speculative.results import PROMPT_LOOKUP, DraftMemory
from profiling.speculative.stream import KVStream

_SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
MAX_NGRAM = 3


class TokenizerMismatch(ProfilingError, ValueError):
    """The draft's tokenizer maps text to different ids than the target's.

    Speculation compares token ids, so a draft with another vocabulary would
    propose ids that mean something else to the target.
    """

    kind = "bad_draft"


def check_tokenizers(target_tokenizer: Any, draft_tokenizer: Any, draft_name: str) -> None:
    """Raise `TokenizerMismatch` unless both tokenizers share vocab and special ids."""
    target_vocab, draft_vocab = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if target_vocab != draft_vocab:
        differing = sorted(set(target_vocab.items()) ^ set(draft_vocab.items()))[:3]
        raise TokenizerMismatch(
            f"draft {draft_name!r} has a different vocabulary from the target "
            f"({len(draft_vocab):,} vs {len(target_vocab):,} entries; e.g. {differing}); "
            "a draft must use the target's tokenizer"
        )
    for attr in _SPECIAL_IDS:
        mine, theirs = getattr(target_tokenizer, attr, None), getattr(draft_tokenizer, attr, None)
        if mine != theirs:
            raise TokenizerMismatch(
                f"draft {draft_name!r} has {attr}={theirs} but the target has {mine}; "
                "a draft must use the target's tokenizer"
            )


class Drafter(Protocol):
    name: str

    def propose(self, sequences: list[list[int]], limits: list[int]) -> list[list[int]]:
        """Up to `limits[b]` proposed next tokens for each row's sequence so far."""
        ...

    def accept(self, accepted: list[int]) -> None:
        """The target kept the first `accepted[b]` proposals of row b; roll back the rest."""
        ...

    def select(self, rows: list[int]) -> None:
        """Keep only these batch positions (finished rows leave)."""
        ...


def lookup_continuation(sequence: list[int], k: int, max_ngram: int = MAX_NGRAM) -> list[int]:
    """The k tokens after the most recent earlier occurrence of the last n-gram.

    n runs from `max_ngram` down to 1; the first n with an earlier occurrence
    wins (a longer match predicts better). Empty when nothing matches.
    """
    if k <= 0:
        return []
    for n in range(min(max_ngram, len(sequence) - 1), 0, -1):
        pattern = sequence[-n:]
        for start in range(len(sequence) - n - 1, -1, -1):
            if sequence[start : start + n] == pattern:
                return sequence[start + n : start + n + k]
    return []


class PromptLookupDrafter:
    """Drafting without a model: copy what followed the last n-gram before."""

    name = PROMPT_LOOKUP

    def __init__(self, max_ngram: int = MAX_NGRAM) -> None:
        self.max_ngram = max_ngram

    def propose(self, sequences: list[list[int]], limits: list[int]) -> list[list[int]]:
        return [
            lookup_continuation(s, n, self.max_ngram)
            for s, n in zip(sequences, limits, strict=True)
        ]

    def accept(self, accepted: list[int]) -> None:
        """Nothing to roll back: the lookup reads the sequence afresh each time."""

    def select(self, rows: list[int]) -> None:
        """No per-row state."""


class ModelDrafter:
    """A smaller causal LM proposing greedily over its own KV cache.

    After `propose` its cache holds each row's pending tokens plus all but the
    last proposal (the last one is never fed: nothing needs its logits yet).
    `accept` drops the fed proposals the target refused; tokens the cache
    lacks (the target's own token, and the last proposal when all were
    accepted) are fed as the pending part of the next `propose`.
    """

    def __init__(self, model: torch.nn.Module, name: str, batch_size: int) -> None:
        self.name = name
        self.stream = KVStream(model, batch_size, model.device)
        self._fed_proposals = 0

    def propose(self, sequences: list[list[int]], limits: list[int]) -> list[list[int]]:
        steps = max(limits)
        if steps == 0:
            self._fed_proposals = 0
            return [[] for _ in sequences]
        pending = [s[n:] for s, n in zip(sequences, self.stream.lengths, strict=True)]
        drafted = [self._greedy(self.stream.feed(pending))]
        for _ in range(steps - 1):
            drafted.append(self._greedy(self.stream.feed([[t] for t in drafted[-1]])))
        self._fed_proposals = steps - 1
        columns = list(zip(*drafted, strict=True))  # row b: its `steps` greedy tokens
        return [list(col[:limit]) for col, limit in zip(columns, limits, strict=True)]

    def accept(self, accepted: list[int]) -> None:
        fed = self._fed_proposals
        self.stream.drop([fed - min(a, fed) for a in accepted])

    def select(self, rows: list[int]) -> None:
        self.stream.select(rows)

    @staticmethod
    def _greedy(logits: torch.Tensor) -> list[int]:
        return logits[:, -1].argmax(dim=-1).tolist()


def draft_memory(model: torch.nn.Module | None, name: str) -> DraftMemory:
    """The draft's weights and KV cost, measured with `profiling.model.memory`."""
    if model is None:
        return DraftMemory(name, "prompt_lookup", 0, 0, 0)
    return DraftMemory(
        name=name,
        kind="model",
        num_parameters=sum(p.numel() for p in model.parameters()),
        weights_bytes=memory.weights_bytes(model)[0],
        kv_cache_bytes_per_token=memory.kv_bytes_per_token_measured(model, str(model.device)),
    )
