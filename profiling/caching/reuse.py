"""Shared prefixes in a prompt sample: what a prefix cache would reuse (no torch).

Prompts are processed in order; each reuses the longest prefix it shares
with any earlier prompt (a trie of every earlier prompt, as a radix-tree
prefix cache such as SGLang's holds). The trie is kept implicitly as a
sorted list of the earlier prompts: in lexicographic order the earlier
prompt sharing the longest prefix with a new one is always a neighbour of
the position the new one sorts into, so two comparisons give the answer.
That keeps memory at one reference per prompt, and the common-prefix
lengths are found by bisecting on slice equality (compared in C), so ten
thousand prompts take well under a second.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence

from profiling.caching.results import PrefixBucket, PromptSampleReuse

DEFAULT_BLOCK_SIZE = 16  # vLLM's default KV block
# Histogram edges of reused-prefix lengths, in tokens: 0, 1-15, 16-63, ...
BUCKET_EDGES = (0, 1, 16, 64, 256, 1024, 4096)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of `a` and `b`."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:  # invariant: a[:low] == b[:low] and a[:high+1] != b[:high+1]
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def shared_prefix_lengths(prompts: Sequence[Sequence[int]]) -> list[int]:
    """For each prompt, the longest prefix it shares with any earlier prompt."""
    earlier: list[tuple[int, ...]] = []
    out = []
    for tokens in prompts:
        key = tuple(tokens)
        at = bisect.bisect_left(earlier, key)
        best = 0
        for neighbour in earlier[max(0, at - 1) : at + 1]:
            best = max(best, common_prefix_length(key, neighbour))
        out.append(best)
        earlier.insert(at, key)
    return out


def histogram(lengths: list[int], edges: tuple[int, ...] = BUCKET_EDGES) -> list[PrefixBucket]:
    """Prompts per bucket of reused-prefix length; the last bucket is open-ended."""
    buckets = [
        PrefixBucket(low, high - 1, 0) for low, high in zip(edges, edges[1:], strict=False)
    ] + [PrefixBucket(edges[-1], None, 0)]
    for length in lengths:
        index = bisect.bisect_right(edges, length) - 1
        buckets[index].prompts += 1
    return buckets


def analyse(
    prompts: Sequence[Sequence[int]],
    block_size: int = DEFAULT_BLOCK_SIZE,
    tokenization: str = "tokenizer",
) -> PromptSampleReuse:
    """The reuse figures of a tokenized sample; conventions in `REUSE_CONVENTION`."""
    if not prompts:
        raise ValueError("analyse needs at least one prompt")
    shared = shared_prefix_lengths(prompts)
    lengths = [len(p) for p in prompts]
    # A server computes at least the last token of every prompt, to get its logits.
    reused = [min(s, max(0, n - 1)) for s, n in zip(shared, lengths, strict=True)]
    blocks = [r // block_size * block_size for r in reused]
    total = sum(lengths)
    count = len(prompts)
    return PromptSampleReuse(
        prompts=count,
        total_tokens=total,
        reusable_tokens=sum(reused),
        reuse_fraction=sum(reused) / total if total else 0.0,
        hit_rate=sum(r > 0 for r in reused) / count,
        block_size=block_size,
        block_reusable_tokens=sum(blocks),
        block_reuse_fraction=sum(blocks) / total if total else 0.0,
        block_hit_rate=sum(b > 0 for b in blocks) / count,
        unique_tokens=total - sum(shared),
        mean_prompt_tokens=total / count,
        max_prompt_tokens=max(lengths),
        median_reused_tokens=float(statistics.median(reused)),
        shared_prefix_histogram=histogram(reused),
        tokenization=tokenization,
    )
