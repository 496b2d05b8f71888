"""Conversation workloads and the prefix block cache they are replayed through: files read
into turns whose prompts are real token prefixes, and hit rates checked against a
hand-computed trace."""

from __future__ import annotations

import json

import pytest

from profiling.projection import block_cache as bc
from profiling.projection.conversation_workloads import (
    MAX_TURNS,
    Conversation,
    ConversationError,
    SyntheticSpec,
    Turn,
    parse_conversations,
    synthetic,
    tokenize_conversations,
)


def words(text: str) -> list[int]:
    """A stand-in tokenizer: one id per whitespace-separated word (stable across calls)."""
    return [hash(w) % 50_000 for w in text.split()]


def test_an_openai_chat_line_becomes_turns_whose_prompts_extend_each_other():
    line = json.dumps({"conversation_id": "c1", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi how can I help"},
        {"role": "user", "content": [{"type": "text", "text": "tell me more"}]},
    ]})  # fmt: skip
    [record] = parse_conversations(line)
    [conversation] = tokenize_conversations([record], words, default_output_tokens=7)
    first, second = conversation.turns
    # "system: be brief" + "user: hello there": 3 + 3 ids; the reply 6 ids.
    assert first == Turn(6, 6)
    assert second == Turn(6 + 6 + 4, 7)  # the missing last reply: the default length
    assert len(conversation.tokens) == 6 + 6 + 4 + 7
    assert conversation.id == "c1"


def test_a_sharegpt_line_reads_the_same_as_its_openai_twin():
    sharegpt = json.dumps({"id": "s", "conversations": [
        {"from": "human", "value": "a b c"}, {"from": "gpt", "value": "d e"}]})  # fmt: skip
    messages = [{"role": "user", "content": "a b c"}, {"role": "assistant", "content": "d e"}]
    openai = json.dumps({"id": "s", "messages": messages})
    one = tokenize_conversations(parse_conversations(sharegpt), words, 1)
    two = tokenize_conversations(parse_conversations(openai), words, 1)
    assert one[0].tokens == two[0].tokens and one[0].turns == two[0].turns == [Turn(4, 3)]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"id": 1, "messages": []}\n', "line 1"),
        ('{"id": 1, "messages": [{"role": "user", "content": "x"}]}\n[1, 2]\n', "line 2: expected"),
        ('\n\n{"id": 1, "messages": [{"role": "user", "content": "x"}]\nnot json\n', "line 3"),
        ('{"id": 1, "conversations": [{"from": "gpt", "value": "x"}]}', "no user message"),
        ('{"id": 1, "messages": [{"role": "wizard", "content": "x"}]}', 'unknown role "wizard"'),
        ('{"id": 1, "text": "x"}', '"messages" list'),
        ("", "empty"),
    ],
)
def test_a_bad_file_names_the_line_and_the_problem(text, says):
    with pytest.raises(ConversationError, match=says):
        parse_conversations(text)


def turns_file(turns: int) -> str:
    """A JSON Lines file of `turns` turns: conversations of two answered turns each (and one
    of one turn, unanswered, when `turns` is odd)."""
    pair = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}] * 2
    lines = [json.dumps({"messages": pair})] * (turns // 2)
    if turns % 2:
        lines.append(json.dumps({"messages": [{"role": "user", "content": "q"}]}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "roles",
    [["user"], ["system", "user", "assistant"], ["user", "user", "assistant"],
     ["user", "assistant", "user"], ["assistant", "user", "tool", "user", "assistant", "user"],
     ["system", "user", "assistant", "assistant", "user", "assistant"]],
    ids=lambda roles: "-".join(roles),
)  # fmt: skip
def test_a_records_turns_are_those_its_tokenization_cuts(roles):
    line = json.dumps({"messages": [{"role": r, "content": f"{r} says"} for r in roles]})
    [record] = parse_conversations(line)
    [conversation] = tokenize_conversations([record], words, default_output_tokens=3)
    assert record.turns == len(conversation.turns) > 0


def test_a_file_of_more_turns_than_the_cap_is_refused_saying_how_many():
    records = parse_conversations(turns_file(MAX_TURNS))  # at the cap: taken
    assert sum(r.turns for r in records) == MAX_TURNS
    with pytest.raises(ConversationError) as refused:
        parse_conversations(turns_file(MAX_TURNS + 1))
    said = str(refused.value)
    assert f"holds {MAX_TURNS + 1:,} turns, over the limit of {MAX_TURNS:,}" in said


def test_synthetic_conversations_share_only_the_system_prompt():
    a, b = synthetic(SyntheticSpec(2, turns=3, user_tokens=10, output_tokens=5, system_tokens=8))
    assert a.tokens[:8] == b.tokens[:8]
    assert not set(a.tokens[8:]) & set(b.tokens[8:])
    assert [t.prompt_tokens for t in a.turns] == [18, 33, 48]
    assert len(a.tokens) == 8 + 3 * 15


def hand_trace() -> bc.Workload:
    """Blocks of 2 tokens. A = a0 a1 a2 a3; B = a0 b1 b2 (B shares A's first block).
    Requests in this order: A's first turn, B's only turn, A's second turn."""
    a = Conversation("A", [1, 2, 3, 4, 5, 6, 7, 8], [Turn(3, 1), Turn(7, 1)])
    b = Conversation("B", [1, 2, 9, 9, 9, 9], [Turn(5, 1)])
    requests = [bc.Request(0, 0, 3, 1), bc.Request(1, 1, 5, 1), bc.Request(2, 0, 7, 1)]
    return bc.Workload([a, b], requests, block_size=2)


# Worked by hand. A1 looks up 1 block (a0): miss; it then holds a0 a1. B1 looks up a0 b1:
# a0 hits (2 tokens). A2 looks up a0 a1 a2: a0 a1 hit (4 tokens) if a1 survived B1's three
# blocks, which needs room for 4 blocks; with 1-3 blocks only a0 survives (2 tokens), since
# each request touches its blocks last first and so evicts a1 before a0; with none, nothing.
HAND = {0: [0, 0, 0], 2: [0, 2, 2], 4: [0, 2, 2], 6: [0, 2, 2], 8: [0, 2, 4], 100: [0, 2, 4]}


@pytest.mark.parametrize("capacity", sorted(HAND))
def test_the_replay_equals_the_hand_computed_trace(capacity):
    workload = hand_trace()
    for replay in (bc.replay, bc.reference_replay):
        result = replay(workload, capacity)
        assert result.per_request == HAND[capacity]
        assert result.hit_rate == pytest.approx(sum(HAND[capacity]) / (3 + 5 + 7))
        assert result.hit_requests == sum(1 for h in HAND[capacity] if h)


def test_the_fast_replay_agrees_with_the_reference_and_grows_with_capacity():
    conversations = synthetic(SyntheticSpec(60, turns=4, user_tokens=40, output_tokens=24,
                                            system_tokens=100, think_seconds=3.0))  # fmt: skip
    workload = bc.Workload(conversations, bc.schedule(conversations, users=7), block_size=16)
    rates = []
    for capacity in bc.capacity_grid(workload, points=10):
        fast, exact = bc.replay(workload, capacity), bc.reference_replay(workload, capacity)
        assert fast.per_request == exact.per_request
        rates.append(fast.hit_rate)
    assert rates == sorted(rates)
    assert rates[0] < rates[-1]


def test_the_schedule_keeps_a_conversations_turns_apart_by_its_service_and_think_time():
    conversations = synthetic(SyntheticSpec(3, turns=2, user_tokens=10, output_tokens=5,
                                            think_seconds=2.0))  # fmt: skip
    timing = bc.TurnTiming(prefill_seconds_per_token=0.0, decode_seconds_per_token=0.1)
    requests = bc.schedule(conversations, users=2, timing=timing)
    arrivals = [(r.conversation, r.arrival_seconds) for r in requests]
    # Two users: conversations 0 and 1 start at once; 2 waits for the first to end.
    assert arrivals == [(0, 0.0), (1, 0.0), (0, 2.5), (1, 2.5), (2, 5.0), (2, 7.5)]
