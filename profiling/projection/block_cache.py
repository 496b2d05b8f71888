"""A prefix cache of fixed-size KV blocks under a capacity: which turns hit, and how much.

No torch import. The cache is vLLM's automatic prefix caching as its scheduler keeps
it (0.32: `vllm/v1/core/kv_cache_utils.py`, `block_pool.py`, `kv_cache_manager.py`):
- only full blocks of `block_size` tokens are cached, each named by a hash of its
  parent block's and its own tokens, so a block is reused only after the same prefix;
- a request looks up its prompt's blocks in order and reuses the longest run found,
  within its first `prompt − 1` tokens (the last is always computed, for its logits);
- blocks go back to a free queue evicted least recently used first, a request's
  blocks in reverse order (its last block is evicted before its first).

Each request touches its blocks (its prompt's and its reply's full blocks, the reply
being the next turn's history) when it is admitted, last block first; running
requests' blocks are thereby the most recent. That reverse order makes the cache's
content prefix-closed: a block's parent is always more recent than the block, so LRU
never holds a block without its parent, and a lookup's hit length is found by
bisection instead of a walk (`replay`). `reference_replay` walks every block through an
ordered dict, the textbook LRU, and must agree with it.

Requests arrive as `schedule` orders them: `users` users each working through
conversations one at a time, a turn sent when the previous reply has ended and the
user has thought for the conversation's `think_seconds`; a turn's service time comes
from a `TurnTiming`.
"""

from __future__ import annotations

import bisect
import heapq
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from profiling.projection.conversation_workloads import Conversation

BLOCK_SIZE = 16  # vLLM's default (`--block-size`, CacheConfig.block_size on CUDA)


@dataclass(frozen=True)
class TurnTiming:
    """A turn's service time: its prompt at a prefill rate, its reply at a decode rate."""

    prefill_seconds_per_token: float = 1e-4
    decode_seconds_per_token: float = 0.02
    basis: str = "assumed"

    def seconds(self, prompt_tokens: int, output_tokens: int) -> float:
        return (prompt_tokens * self.prefill_seconds_per_token
                + output_tokens * self.decode_seconds_per_token)  # fmt: skip


@dataclass(frozen=True)
class Request:
    arrival_seconds: float
    conversation: int  # index into the conversations
    prompt_tokens: int
    output_tokens: int


@dataclass
class Replay:
    """One replay at one capacity."""

    capacity_tokens: int
    block_size: int
    requests: int
    prompt_tokens: int  # summed over requests
    cached_tokens: int  # prompt tokens found in the cache
    hit_requests: int  # requests reusing at least one block
    per_request: list[int] = field(default_factory=list)  # cached tokens, in arrival order

    @property
    def hit_rate(self) -> float:
        """Cached prompt tokens over prompt tokens (vLLM's prefix-cache hit rate)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def request_hit_rate(self) -> float:
        return self.hit_requests / self.requests if self.requests else 0.0

    @property
    def mean_cached_tokens(self) -> float:
        return self.cached_tokens / self.requests if self.requests else 0.0


class BlockIndex:
    """Block ids of token sequences: equal prefixes of full blocks get equal ids."""

    def __init__(self, block_size: int = BLOCK_SIZE) -> None:
        self.block_size = block_size
        self._ids: dict[tuple[int, tuple[int, ...]], int] = {}

    def blocks(self, tokens: Sequence[int]) -> list[int]:
        out, parent, b = [], -1, self.block_size
        ids = self._ids
        for start in range(0, len(tokens) - b + 1, b):
            key = (parent, tuple(tokens[start : start + b]))
            parent = ids.setdefault(key, len(ids))
            out.append(parent)
        return out


def schedule(
    conversations: Sequence[Conversation], users: int, timing: TurnTiming | None = None
) -> list[Request]:
    """Every turn as a request, in arrival order: `users` users each take the next
    conversation when their last one ends."""
    if users < 1:
        raise ValueError("at least one user")
    timing = timing or TurnTiming()
    free = [(0.0, u) for u in range(users)]
    out: list[tuple[float, int, int, Request]] = []
    order = 0
    for index, conversation in enumerate(conversations):
        now, user = heapq.heappop(free)
        for turn in conversation.turns:
            out.append((now, order, index,
                        Request(now, index, turn.prompt_tokens, turn.output_tokens)))  # fmt: skip
            order += 1
            now += timing.seconds(turn.prompt_tokens, turn.output_tokens)
            now += conversation.think_seconds
        heapq.heappush(free, (now, user))
    out.sort(key=lambda item: (item[0], item[1]))
    return [item[3] for item in out]


class Workload:
    """Requests over conversations' block ids, ready to replay at any capacity."""

    def __init__(
        self,
        conversations: Sequence[Conversation],
        requests: Sequence[Request],
        block_size: int = BLOCK_SIZE,
    ) -> None:
        index = BlockIndex(block_size)
        self.block_size = block_size
        self.blocks = [index.blocks(c.tokens) for c in conversations]
        self.requests = list(requests)
        self.unique_blocks = len(index._ids)
        # Replays already run, by capacity: the section, its curve and the host tier ask
        # for the same capacities (the GPU's, every block's) more than once.
        self.replays: dict[int, Replay] = {}

    def lookups(self, request: Request) -> int:
        """Blocks a request may reuse: the full blocks in its first prompt − 1 tokens."""
        return max(0, request.prompt_tokens - 1) // self.block_size

    def touched(self, request: Request) -> int:
        return (request.prompt_tokens + request.output_tokens) // self.block_size


def replay(workload: Workload, capacity_tokens: int) -> Replay:
    """The workload through an LRU block cache of `capacity_tokens` (see the module's
    docstring), run once per capacity and workload (`Workload.replays`)."""
    done = workload.replays.get(capacity_tokens)
    if done is None:
        done = workload.replays[capacity_tokens] = _replay(workload, capacity_tokens)
    return done


def _replay(workload: Workload, capacity_tokens: int) -> Replay:
    """Each block's latest touch in a dict, updated a request at a time, and the hits
    found by bisection, relying on the cache being prefix-closed."""
    capacity = capacity_tokens // workload.block_size
    b = workload.block_size
    last: dict[int, int] = {}  # block → the clock of its latest touch
    queue: deque[tuple[int, int]] = deque()  # (clock, block) in touch order, stale ones too
    clock = 0
    per_request = []
    popleft, stamp_of = queue.popleft, last.get
    for request in workload.requests:
        chain = workload.blocks[request.conversation]
        n = workload.lookups(request)
        # The cache is prefix-closed: the hit is the first block missing, by bisection.
        hit = bisect.bisect_left(range(n), True, key=lambda k: chain[k] not in last)
        per_request.append(hit * b)
        if capacity <= 0:
            continue
        touched = chain[: workload.touched(request)][::-1]
        touched = touched[-capacity:]  # a request longer than the cache keeps its head
        stamps = range(clock, clock + len(touched))
        last.update(zip(touched, stamps, strict=True))
        queue.extend(zip(stamps, touched, strict=True))
        clock += len(touched)
        excess = len(last) - capacity
        while excess > 0:
            stamp, block = popleft()
            if stamp_of(block) == stamp:
                del last[block]
                excess -= 1
    return _result(workload, capacity_tokens, per_request)


def reference_replay(workload: Workload, capacity_tokens: int) -> Replay:
    """The same cache walked block by block through an ordered dict (exact, slow)."""
    capacity = capacity_tokens // workload.block_size
    cache: OrderedDict[int, None] = OrderedDict()
    per_request = []
    for request in workload.requests:
        chain = workload.blocks[request.conversation]
        hit = 0
        for k in range(workload.lookups(request)):
            if chain[k] not in cache:
                break
            hit += 1
        per_request.append(hit * workload.block_size)
        for block in reversed(chain[: workload.touched(request)]):
            cache[block] = None
            cache.move_to_end(block)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return _result(workload, capacity_tokens, per_request)


def _result(workload: Workload, capacity_tokens: int, per_request: list[int]) -> Replay:
    return Replay(
        capacity_tokens=capacity_tokens,
        block_size=workload.block_size,
        requests=len(workload.requests),
        prompt_tokens=sum(r.prompt_tokens for r in workload.requests),
        cached_tokens=sum(per_request),
        hit_requests=sum(1 for h in per_request if h),
        per_request=per_request,
    )


@dataclass
class CurvePoint:
    capacity_tokens: int
    hit_rate: float
    cached_tokens: int


def unlimited_tokens(workload: Workload) -> int:
    """A capacity holding every block the workload ever touches."""
    return (workload.unique_blocks + 1) * workload.block_size


def curve(workload: Workload, capacities: Sequence[int]) -> list[CurvePoint]:
    """Hit rate against capacity, one replay per capacity (ascending)."""
    out = []
    for capacity in sorted(set(capacities)):
        result = replay(workload, capacity)
        out.append(CurvePoint(capacity, result.hit_rate, result.cached_tokens))
    return out


def capacity_grid(workload: Workload, marks: Sequence[int] = (), points: int = 12) -> list[int]:
    """Capacities from one block to every block the workload touches, evenly on a log
    scale, with `marks` (the GPU's capacity, the host tier's) added."""
    top = unlimited_tokens(workload)
    low = workload.block_size
    grid = {round(low * (top / low) ** (i / (points - 1))) for i in range(points)} if top > low \
        else {top}  # fmt: skip
    return sorted(grid | {m for m in marks if m > 0})
