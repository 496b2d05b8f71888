"""The conversation replay's bookkeeping, against a stand-in engine on a fake clock: what
each turn sends, how its TTFT is timed, what is projected, and how the result is kept.

The real engine's replay is `test_engine_conversations.py`.
"""

from __future__ import annotations

import threading

import pytest

from profiling import serde
from profiling.caching.conversation_estimate import render_conversations
from profiling.engine import chat_replay, vllm
from profiling.engine.chat_results import (
    NOT_APPLICABLE,
    ChatReplay,
    EngineConversations,
    OffloadCounters,
    TurnSample,
)
from profiling.engine.conversation_replay import offload_counters, offload_plan, projected_hit_rate
from profiling.engine.for_profile import offload_bytes
from profiling.engine.metrics import by_label, parse_metrics
from profiling.engine.results import EngineResult
from profiling.engine.server import EngineFailed
from profiling.projection.conversation_workloads import Conversation, Turn, in_vocab
from profiling.projection.host_tier import OFFLOAD_CPU_REASON
from profiling.units import GIB

FIRST_S, PER_TOKEN_S = 0.25, 0.01


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class StandIn:
    """Streams a reply of `max_tokens` ids no conversation holds, one chunk a token; its
    first token `FIRST_S` after the request, the others `PER_TOKEN_S` apart."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.prompts, self.lock = clock, [], threading.Lock()

    def __call__(self, body: dict):
        with self.lock:
            self.prompts.append(list(body["prompt"]))
            start = 10_000 * len(self.prompts)
        assert body["temperature"] == 0 and body["ignore_eos"] and body["stream"]
        for k in range(body["max_tokens"]):
            self.clock.t += FIRST_S if k == 0 else PER_TOKEN_S
            yield {"choices": [{"token_ids": [start + k], "text": "x"}]}


def chat(name: str, base: int, turns: list[tuple[int, int]]) -> Conversation:
    """A conversation of `turns` (new message tokens, reply tokens), ids from `base`."""
    tokens, out = [], []
    for message, reply in turns:
        tokens += range(base + len(tokens), base + len(tokens) + message)
        out.append(Turn(len(tokens), reply))
        tokens += range(base + len(tokens), base + len(tokens) + reply)
    return Conversation(name, tokens, out)


def run(conversations, concurrency=1, max_model_len=4096, vocab=50_000):
    clock = FakeClock()
    engine = StandIn(clock)
    clocked = chat_replay.Clock(clock.now, clock.sleep)
    done = chat_replay.replay(engine, "m", conversations, concurrency, max_model_len, vocab,
                              clocked)  # fmt: skip
    return engine, done


def test_each_turn_sends_the_history_with_the_engines_own_replies_then_the_new_message():
    conversation = chat("a", 0, [(5, 3), (4, 2), (6, 1)])
    engine, done = run([conversation])
    first, second, third = engine.prompts
    assert first == conversation.tokens[:5]
    assert second == first + [10_000, 10_001, 10_002] + conversation.tokens[8:12]
    assert third == second + [20_000, 20_001] + conversation.tokens[14:20]
    sent = done.sent[0]
    assert [(t.prompt_tokens, t.output_tokens) for t in sent.turns] == [(5, 3), (12, 2), (20, 1)]
    assert sent.tokens == third + [30_000]


def test_a_turns_ttft_is_its_first_token_and_its_latency_its_last():
    _, done = run([chat("a", 0, [(5, 4), (3, 1)])])
    first, second = done.turns
    assert first.ttft_s == pytest.approx(FIRST_S)
    assert first.latency_s == pytest.approx(FIRST_S + 3 * PER_TOKEN_S)
    assert second.sent_s == pytest.approx(first.latency_s)  # sent when the reply ended
    assert second.ttft_s == second.latency_s == pytest.approx(FIRST_S)


def test_users_take_conversations_in_turn_and_every_turn_is_sent_once():
    conversations = [chat(f"c{i}", 1000 * i, [(20, 3)] * (i + 1)) for i in range(5)]
    engine, done = run(conversations, concurrency=2)
    assert len(engine.prompts) == len(done.turns) == 15
    assert sorted((t.conversation, t.turn) for t in done.turns) == sorted(
        (c.id, n) for c in conversations for n in range(1, len(c.turns) + 1)
    )
    # each conversation's turns were sent in order
    for c in conversations:
        order = [t.turn for t in done.turns if t.conversation == c.id]
        assert order == sorted(order)
    assert [done.sent[i].id for i in done.order] == [t.conversation for t in done.turns]


def test_ids_outside_the_vocabulary_are_mapped_into_it_and_stay_equal():
    ids = [-5, -1, 0, 7, 99, 100, 12_345, -5]
    mapped = in_vocab(ids, 100)
    assert all(0 <= i < 100 for i in mapped)
    assert mapped[2:5] == [0, 7, 99]  # ids already in it are kept
    assert mapped[0] == mapped[-1] and mapped[0] != mapped[1]


def test_turns_past_the_context_are_not_sent_and_said():
    engine, done = run([chat("a", 0, [(10, 5), (10, 5), (10, 5)])], max_model_len=32)
    assert len(engine.prompts) == 2 and done.skipped_turns == 1
    assert "1 turns not sent" in done.notes[0] and "32 tokens" in done.notes[0]


def test_a_turn_the_server_refuses_ends_the_replay_with_its_reason():
    def refusing(body):
        raise EngineFailed("the server answered 400: too long")
        yield  # a generator, as the transport is

    with pytest.raises(EngineFailed, match="400: too long"):
        chat_replay.replay(refusing, "m", [chat("a", 0, [(5, 1)])] * 3, 2, 100, 1000)


def test_a_server_that_streams_no_token_ids_is_refused():
    def text_only(body):
        yield {"choices": [{"text": "hello"}]}

    with pytest.raises(EngineFailed, match="return_token_ids"):
        chat_replay.replay(text_only, "m", [chat("a", 0, [(5, 1)])], 1, 100, 1000)


def test_the_projection_replays_the_turns_as_sent():
    # Two turns of one conversation, blocks of 4: turn 2's prompt (16 tokens) holds turn
    # 1's prompt and reply (8 + 4 = 12 tokens, 3 full blocks) cached, of its 15 looked up.
    _, done = run([chat("a", 0, [(8, 4), (4, 2)])])
    assert projected_hit_rate(done, 4, 1000) == pytest.approx(12 / (8 + 16))
    assert projected_hit_rate(done, 4, 0) == 0.0
    assert projected_hit_rate(done, 4, 4) == pytest.approx(4 / (8 + 16))  # one block kept


PROM = """\
vllm:cache_config_info{block_size="128",engine="0",extra="{'a': 1}",num_gpu_blocks="305"} 1.0
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="device"} 40.0
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="host"} 64.0
vllm:kv_offload_load_bytes_total{engine="0",transfer_type="CPU_to_GPU"} 4096.0
"""


def test_the_engines_capacity_is_read_from_its_cache_config_else_its_log():
    assert vllm.kv_cache_blocks(PROM, "") == (128, 305, vllm.kv_cache_blocks(PROM, "")[2])
    log = "INFO block_size=16 ...\nINFO CPU KV cache size: 4,096 tokens\n"
    assert vllm.kv_cache_blocks("", log)[:2] == (16, 256)
    assert vllm.kv_cache_blocks("", "nothing here") is None


def test_offload_counters_are_read_per_tier_and_absent_ones_stay_none():
    before = PROM.replace("64.0", "14.0").replace("4096.0", "96.0")
    assert by_label(PROM, vllm.METRICS.cached_by_source, "source") == {"device": 40, "host": 64}
    delta = parse_metrics(PROM).delta(parse_metrics(before))
    counters = offload_counters(vllm.METRICS, before, PROM, delta)
    assert counters.host_hit_tokens == 50 and counters.load_bytes == 4000
    assert counters.store_bytes is None and counters.external_hits is None


def test_the_offload_is_not_applicable_on_cpu_and_sized_on_a_gpu(tmp_path):
    assert offload_plan("cpu", 10 * GIB) == (NOT_APPLICABLE, OFFLOAD_CPU_REASON)
    assert offload_plan("cuda:0", None)[0] == NOT_APPLICABLE
    assert offload_plan("cuda:0", GIB)[0] == "ran"
    from profiling.config import Hardware, ProfileConfig

    conversations = [chat("a", 0, [(100, 50)])]  # 150 tokens
    config = ProfileConfig(model="demo", hardware=Hardware(host_memory_gib=1.0))
    assert offload_bytes(config, conversations, 1000, "cpu") is None
    assert offload_bytes(config, conversations, 1000, "cuda:0") == 150_000
    assert offload_bytes(config, conversations, 10 * GIB, "cuda:0") == GIB  # the host's


def sample_result() -> EngineConversations:
    turns = [TurnSample("a", 1, 94, 42, 0.0, 0.031, 0.4), TurnSample("a", 2, 161, 32, 0.4,
                                                                    0.02, 0.3)]  # fmt: skip
    reference = ChatReplay("reference", [], 2, 128, 39_040, "vllm:cache_config_info", 256,
                           256, 128, 0.5, 39_040, turns)  # fmt: skip
    return EngineConversations(2, 2, reference, None, NOT_APPLICABLE, OFFLOAD_CPU_REASON)


def test_the_result_round_trips_and_keeps_its_raw_samples():
    result = sample_result()
    result.offload = ChatReplay("offload", ["--kv-offloading-size", "1"], 2, 16, 100, "x", 1, 1,
                                1, 1.0, 200, [], OffloadCounters(load_bytes=5))  # fmt: skip
    data = result.to_dict()
    assert data["reference"]["hit_rate"] == pytest.approx(0.5)
    assert data["reference"]["ttft"]["samples"] == [0.031, 0.02]
    assert EngineConversations.from_dict(data) == result
    engine = EngineResult("vllm", "0.32.0", "", "", "float32", 1024, conversations=result)
    assert serde.from_dict(EngineResult, serde.to_dict(engine)) == engine


def test_the_section_prints_the_engines_hit_rate_beside_the_projection_and_the_offload():
    result = sample_result()
    section = {"source": "your file demo.jsonl", "engine_check": result.reference_line(),
               "engine_offload": result.offload_line()}  # fmt: skip
    lines = render_conversations(section)
    assert "hit rate 50.0% measured, 50.0% projected at the engine's 39,040 tokens" in lines[-2]
    assert lines[-1] == f"  offload on the engine: {OFFLOAD_CPU_REASON}"  # said once


def test_the_engine_replays_the_first_conversations_whole_and_has_room_for_the_longest():
    from profiling.config import ProfileConfig
    from profiling.engine.for_profile import QUICK_TURNS, max_model_len, replayed_conversations

    many = [chat(f"c{i}", 1000 * i, [(30, 10)] * 5) for i in range(20)]  # 100 turns
    kept = replayed_conversations(many, quick=True)
    assert kept == many[: QUICK_TURNS // 5]
    assert replayed_conversations([chat("long", 0, [(5, 1)] * 300)], quick=True)[0].id == "long"
    long = chat("a", 0, [(1500, 100), (200, 300)])  # its last turn: 1,800 + 300 tokens
    config = ProfileConfig(model="demo")
    assert max_model_len(config, None, [long]) == 2100
    assert max_model_len(config, 2048, [long]) == 2048  # never past the model's positions
