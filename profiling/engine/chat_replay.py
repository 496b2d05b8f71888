"""Conversations sent to a running engine turn by turn, as a chat's users send them.

    replayed = replay(http_stream(url), model, conversations, concurrency=4,
                      max_model_len=2048, vocab_size=32000)

Each conversation is one user's: its turns go in order, a turn sent when the reply
before it has ended and the conversation's think time has passed; `concurrency` users
work at once, each taking the next conversation when theirs ends (as the block cache's
`schedule` orders them). The reply is greedy, of the turn's reply length (`ignore_eos`,
as the engine's benchmark client runs), streamed, so a turn's TTFT is the time to its
first token.

A turn's prompt is token ids through the completions endpoint: the history so far
(every earlier prompt and the engine's own reply to it, as the ids the engine returned,
`return_token_ids`) and then the turn's new message ids from the conversation. Ids, not
chat messages: the chat endpoint renders a template and tokenizes the text again, and a
reply turned into text and back need not give its ids back, so the next prompt would
not begin with the blocks the engine cached, nor with the blocks the projection names.
`Replayed.sent` holds the conversations exactly as sent, for the projection to replay.

Ids outside the model's vocabulary (synthetic conversations are made of negative and
large ids, `profiling.projection.conversation_workloads.synthetic`) are mapped into it by
`in_vocab` there, as the hit check maps them. vLLM has no
multi-turn client in its wheel (its `benchmarks/multi_turn` is in the source tree
only), so this one uses the standard library: it runs in the profile's process.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from profiling.engine.chat_results import TurnSample
from profiling.engine.server import EngineFailed
from profiling.projection.conversation_workloads import Conversation, Turn, in_vocab

TIMEOUT_S = 300

# One request's body → its streamed chunks, parsed.
Transport = Callable[[dict[str, Any]], Iterator[dict[str, Any]]]


@dataclass
class Clock:
    """Where the replay reads the time and waits: the real ones unless a test's."""

    now: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep


@dataclass
class Replayed:
    turns: list[TurnSample]  # in the order they were sent
    sent: list[Conversation]  # as sent: the engine's replies in each history
    order: list[int]  # each sent turn's conversation, index into `sent`
    skipped_turns: int = 0
    notes: list[str] = field(default_factory=list)


def http_stream(url: str) -> Transport:
    """POST to `url`/v1/completions and yield the server-sent chunks."""

    def send(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        request = urllib.request.Request(
            f"{url}/v1/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                for raw in response:
                    line = raw.decode().strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        return
                    yield json.loads(data)
        except urllib.error.HTTPError as exc:
            said = exc.read().decode(errors="replace")[:300]
            raise EngineFailed(f"the server answered {exc.code}: {said}") from None
        except (OSError, ValueError) as exc:
            raise EngineFailed(f"no answer from the server: {exc}") from None

    return send


def send_turn(
    transport: Transport, model: str, prompt: list[int], max_tokens: int, clock: Clock
) -> tuple[float, float, list[int]]:
    """(TTFT, latency, the reply's ids) of one greedy streamed request."""
    body = {
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True, "stream": True, "return_token_ids": True,
    }  # fmt: skip
    started = clock.now()
    first: float | None = None
    reply: list[int] = []
    for chunk in transport(body):
        for choice in chunk.get("choices") or []:
            ids = choice.get("token_ids")
            if ids is None and choice.get("text"):
                raise EngineFailed("the server streams no token ids (return_token_ids)")
            if ids and first is None:
                first = clock.now()
            reply += ids or []
    ended = clock.now()
    if first is None:
        raise EngineFailed("the server streamed no token for a turn")
    return first - started, ended - started, reply


class _Users:
    """The shared state of the users' threads: the next conversation, what was sent."""

    def __init__(self, conversations: list[Conversation]) -> None:
        self.lock = threading.Lock()
        self.next = 0
        self.total = len(conversations)
        self.sent: list[Conversation | None] = [None] * len(conversations)
        self.turns: list[tuple[int, int, TurnSample]] = []  # (place, conversation, turn)
        self.skipped = 0
        self.sends = 0  # turns sent so far: each turn's place in the order of sending
        self.error: BaseException | None = None

    def take(self) -> int | None:
        with self.lock:
            if self.next >= self.total or self.error is not None:
                return None
            self.next += 1
            return self.next - 1


def replay(
    transport: Transport, model: str, conversations: list[Conversation], concurrency: int,
    max_model_len: int, vocab_size: int, clock: Clock | None = None,
) -> Replayed:  # fmt: skip
    """Every conversation's turns on the engine (see the module's docstring); raises
    EngineFailed with the first failed turn's reason."""
    clock = clock or Clock()
    users = _Users(conversations)
    start = clock.now()

    def work() -> None:
        while (index := users.take()) is not None:
            try:
                _conversation(transport, model, conversations, index, users, max_model_len,
                              vocab_size, clock, start)  # fmt: skip
            except BaseException as exc:  # the first failure ends the replay
                with users.lock:
                    users.error = users.error or exc
                return

    threads = [threading.Thread(target=work, daemon=True)
               for _ in range(max(1, min(concurrency, len(conversations))))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if users.error is not None:
        raise users.error
    return _gathered(users, conversations, max_model_len)


def _conversation(
    transport: Transport, model: str, conversations: list[Conversation], index: int,
    users: _Users, max_model_len: int, vocab_size: int, clock: Clock, start: float,
) -> None:  # fmt: skip
    conversation = conversations[index]
    history: list[int] = []
    turns: list[Turn] = []
    position = 0  # where the conversation's next message begins
    for number, turn in enumerate(conversation.turns, start=1):
        message = in_vocab(conversation.tokens[position : turn.prompt_tokens], vocab_size)
        prompt = history + message
        if len(prompt) + turn.output_tokens > max_model_len:  # later turns are longer still
            with users.lock:
                users.skipped += len(conversation.turns) - number + 1
            break
        if number > 1 and conversation.think_seconds:
            clock.sleep(conversation.think_seconds)
        with users.lock:
            place, users.sends = users.sends, users.sends + 1
        sent = clock.now() - start
        ttft, latency, reply = send_turn(transport, model, prompt, turn.output_tokens, clock)
        sample = TurnSample(conversation.id, number, len(prompt), len(reply), sent, ttft, latency)
        with users.lock:
            users.turns.append((place, index, sample))
        turns.append(Turn(len(prompt), len(reply)))
        history = prompt + reply
        position = turn.prompt_tokens + turn.output_tokens
    users.sent[index] = Conversation(conversation.id, history, turns, conversation.think_seconds)


def _gathered(users: _Users, conversations: list[Conversation], max_model_len: int) -> Replayed:
    ordered = sorted(users.turns, key=lambda item: item[0])
    sent = [s if s is not None else Conversation(c.id, [], [])
            for s, c in zip(users.sent, conversations, strict=True)]  # fmt: skip
    notes = []
    if users.skipped:
        notes.append(f"{users.skipped:,} turns not sent: their prompt and reply run past the "
                     f"server's context of {max_model_len:,} tokens")  # fmt: skip
    return Replayed(
        [t for _, _, t in ordered], sent, [i for _, i, _ in ordered], users.skipped, notes
    )
