"""Conversation workloads: multi-turn chats read from a file or generated, as token ids.

No torch import. Each turn of a conversation is one request whose prompt is the
whole history so far (every earlier message, the model's replies included) plus the
new user message; its output is the reply that follows. So a turn's prompt is a
prefix of the next turn's, which is what a prefix cache reuses, and of the whole
conversation's token list (`Conversation.tokens`), which the block cache replays
(`profiling.projection.block_cache`).

Files are JSON Lines, one conversation a line, in one of two formats:
- OpenAI chat: `{"conversation_id" or "id": ..., "messages": [{"role", "content"}]}`;
- ShareGPT: `{"id": ..., "conversations": [{"from", "value"}]}` (`human`/`gpt`/`system`).
A user message ends a request; the assistant message after it is that request's
output (a conversation ending on a user message has that last request's output
given by `default_output_tokens`).

Reuse comes from real token prefixes: `tokenize_conversations` turns each message into
the ids the model's own tokenizer gives (`tokenizer`: any text → ids callable), one
message at a time, rendered as `role: content` and a newline, so each turn's prompt
is exactly the earlier turns' ids followed by its own. Synthetic conversations
(`synthetic`) are made of ids directly: the shared system prompt the same ids in
every conversation, everything else ids no other conversation holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profiling import units
from profiling.config import CONVERSATIONS_MAX_BYTES, ConfigError

MAX_CONVERSATIONS = 100_000
# Turns a replay takes: its work grows with every turn (a few seconds at most on a small
# CPU at this many). A file with more is refused; synthetic workloads are cut to it.
MAX_TURNS = 20_000
USER_ROLES = {"user", "human"}
ASSISTANT_ROLES = {"assistant", "gpt", "model", "chatgpt", "bing", "bard"}
SYSTEM_ROLES = {"system", "developer"}
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system"}
MESSAGE_FORMAT = "{role}: {content}\n"  # one message, as the tokenizer sees it


class ConversationError(ConfigError):
    """A conversation file cannot be used; the message names the line and the problem."""


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass
class ChatRecord:
    """One conversation as read from a file (text, before tokenization)."""

    id: str
    messages: list[Message]
    line: int

    @property
    def turns(self) -> int:
        """Its requests, as `tokenize_conversations` cuts them: a user message (or several
        in a row) and the reply after it, if any."""
        count, waiting = 0, False
        for message in self.messages:
            if message.role == "user" and not waiting:
                count, waiting = count + 1, True
            elif message.role == "assistant":
                waiting = False
        return count


@dataclass(frozen=True)
class Turn:
    prompt_tokens: int  # the history and this turn's user message
    output_tokens: int  # the reply


@dataclass
class Conversation:
    """A conversation as token ids: each turn's prompt and reply are a prefix of `tokens`."""

    id: str
    tokens: list[int]
    turns: list[Turn]
    think_seconds: float = 0.0  # the user's pause between a reply and the next turn

    def __post_init__(self) -> None:
        last = self.turns[-1] if self.turns else None
        if last is not None and last.prompt_tokens + last.output_tokens > len(self.tokens):
            raise ValueError("a turn runs past the conversation's tokens")


@dataclass(frozen=True)
class SyntheticSpec:
    """A synthetic conversation workload (the options' `conversation_*` fields)."""

    conversations: int
    turns: int  # per conversation
    user_tokens: int  # a user message
    output_tokens: int  # a reply
    system_tokens: int = 0  # a system prompt every conversation starts with
    think_seconds: float = 0.0


@dataclass
class ConversationSummary:
    conversations: int
    turns: int
    prompt_tokens: int  # summed over every turn's prompt
    mean_prompt_tokens: float
    mean_output_tokens: float
    max_context_tokens: int
    notes: list[str] = field(default_factory=list)


def parse_conversations(data: bytes | str) -> list[ChatRecord]:
    """The conversations of a JSON Lines file's `data`; a ConversationError naming the
    line for anything it cannot use, or saying how many turns it holds over MAX_TURNS."""
    text = decode(data) if isinstance(data, bytes) else data
    out: list[ChatRecord] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(out) == MAX_CONVERSATIONS:
            raise ConversationError(
                f"line {number}: more than {MAX_CONVERSATIONS:,} conversations; send fewer"
            )
        out.append(_record(line, number))
    if not out:
        raise ConversationError("the conversation file is empty: it holds no conversations")
    turns = sum(record.turns for record in out)
    if turns > MAX_TURNS:
        raise ConversationError(
            f"the conversation file holds {turns:,} turns, over the limit of {MAX_TURNS:,} "
            "(the replay's work grows with every turn); send fewer"
        )
    return out


def decode(data: bytes) -> str:
    """A file's bytes as text (a UTF-8 byte-order mark dropped); a ConversationError
    naming the first line that is not UTF-8."""
    try:
        return data.decode("utf-8-sig", errors="strict")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConversationError(f"line {line}: not UTF-8 text") from None


def read_conversation_file(path: str | os.PathLike[str]) -> tuple[str, list[ChatRecord]]:
    """The text of the JSON Lines file at `path` and its conversations, for every command
    that takes `--conversations FILE`: its size checked before it is read (the limit a
    job's upload has, CONVERSATIONS_MAX_BYTES), then parsed; a ConversationError saying
    why not, in the words the site's upload uses."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > CONVERSATIONS_MAX_BYTES:
                raise ConversationError(too_big(size))
            data = f.read(CONVERSATIONS_MAX_BYTES + 1)  # a file that grew is caught here
    except OSError as exc:
        raise ConversationError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > CONVERSATIONS_MAX_BYTES:
        raise ConversationError(too_big(len(data)))
    text = decode(data)
    return text, parse_conversations(text)


def too_big(size: int) -> str:
    # In bytes: a file just over the limit rounds to the limit's own size.
    limit = CONVERSATIONS_MAX_BYTES
    return (
        f"the conversation file is {size:,} bytes, over the limit of {units.size(limit)} "
        f"({limit:,} bytes)"
    )


def _record(line: str, number: int) -> ChatRecord:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ConversationError(f"line {number}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ConversationError(f"line {number}: JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise ConversationError(f"line {number}: expected a JSON object per conversation")
    ident = record.get("conversation_id", record.get("id", number))
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        raise ConversationError(f'line {number}: "conversation_id"/"id" must be text or a number')
    if "messages" in record:
        messages = _messages(record["messages"], number, "role", "content", {})
    elif "conversations" in record:
        messages = _messages(record["conversations"], number, "from", "value", SHAREGPT_ROLES)
    else:
        raise ConversationError(
            f'line {number}: expected a "messages" list (OpenAI chat) or a "conversations" '
            "list (ShareGPT)"
        )
    if not any(m.role == "user" for m in messages):
        raise ConversationError(f"line {number}: the conversation has no user message")
    return ChatRecord(str(ident), messages, number)


def _messages(
    value: Any, number: int, role_key: str, content_key: str, names: dict[str, str]
) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise ConversationError(f"line {number}: the message list must be a non-empty list")
    out = []
    for i, item in enumerate(value, start=1):
        where = f"line {number}, message {i}"
        if not isinstance(item, dict):
            raise ConversationError(f"{where}: expected an object")
        role = item.get(role_key)
        if not isinstance(role, str):
            raise ConversationError(f'{where}: "{role_key}" must be text')
        role = names.get(role, role).lower()
        if role in USER_ROLES:
            role = "user"
        elif role in ASSISTANT_ROLES:
            role = "assistant"
        elif role not in SYSTEM_ROLES and role != "tool":
            raise ConversationError(f'{where}: unknown {role_key} "{role}"')
        out.append(Message(role, _content(item.get(content_key), where, content_key)))
    return out


def _content(value: Any, where: str, key: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in value
    ):
        return "".join(p["text"] for p in value)
    raise ConversationError(f'{where}: "{key}" must be text or a list of {{"text": ...}} parts')


def tokenize_conversations(
    records: Sequence[ChatRecord],
    tokenizer: Callable[[str], list[int]],
    default_output_tokens: int,
    think_seconds: float = 0.0,
) -> list[Conversation]:
    """Each record's messages as ids (`tokenizer` per message), cut into turns."""
    out = []
    for record in records:
        tokens: list[int] = []
        turns: list[Turn] = []
        pending: int | None = None  # the prompt length of a turn waiting for its reply
        for message in record.messages:
            ids = list(tokenizer(MESSAGE_FORMAT.format(role=message.role, content=message.content)))
            if message.role == "assistant" and pending is not None:
                turns.append(Turn(pending, max(1, len(ids))))
                pending = None
            tokens += ids
            if message.role == "user":  # two in a row are sent together, as one turn
                pending = len(tokens)
        if pending is not None:  # the last user message's reply is not in the file
            tokens += _unique_ids(len(tokens), default_output_tokens, record.line)
            turns.append(Turn(pending, default_output_tokens))
        out.append(Conversation(record.id, tokens, turns, think_seconds))
    return out


def _unique_ids(start: int, count: int, salt: int) -> list[int]:
    # A reply nobody else sees: ids outside any vocabulary, distinct per conversation.
    base = -(salt << 32) - start
    return list(range(base, base - count, -1))


_MIX = 2654435761  # Knuth's multiplicative hash: spreads mapped ids over the vocabulary


def in_vocab(ids: list[int], vocab_size: int) -> list[int]:
    """`ids` a model of `vocab_size` tokens can take: its own unchanged, others (the
    negative and large ids `synthetic` makes) mapped into it by a fixed hash, so equal
    ids stay equal and distinct ones almost always distinct."""
    return [i if 0 <= i < vocab_size else (i * _MIX) % vocab_size for i in ids]


def synthetic(spec: SyntheticSpec) -> list[Conversation]:
    """Conversations of `spec.turns` turns, each user message and reply new ids, after a
    system prompt whose ids every conversation shares."""
    if min(spec.conversations, spec.turns, spec.user_tokens, spec.output_tokens) < 1:
        raise ConfigError("a synthetic conversation needs at least one of everything")
    system = list(range(-spec.system_tokens, 0))  # the same ids in every conversation
    per_conversation = spec.turns * (spec.user_tokens + spec.output_tokens)
    out = []
    for c in range(spec.conversations):
        base = c * per_conversation
        tokens = system + list(range(base, base + per_conversation))
        turns = []
        for t in range(spec.turns):
            before = spec.system_tokens + t * (spec.user_tokens + spec.output_tokens)
            turns.append(Turn(before + spec.user_tokens, spec.output_tokens))
        out.append(Conversation(f"synthetic-{c}", tokens, turns, spec.think_seconds))
    return out


def summarize(conversations: Sequence[Conversation]) -> ConversationSummary:
    turns = [t for c in conversations for t in c.turns]
    if not turns:
        raise ConfigError("the conversations hold no turns")
    prompt = sum(t.prompt_tokens for t in turns)
    return ConversationSummary(
        conversations=len(conversations),
        turns=len(turns),
        prompt_tokens=prompt,
        mean_prompt_tokens=prompt / len(turns),
        mean_output_tokens=sum(t.output_tokens for t in turns) / len(turns),
        max_context_tokens=max(t.prompt_tokens + t.output_tokens for t in turns),
    )
