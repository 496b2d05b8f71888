"""The demo conversations replayed turn by turn on the real engine (vLLM's CPU build, its
defaults, prefix caching on): the engine's own prefix-cache hit rate against the block
cache's projection of the same turns at the engine's own KV capacity, and the offload
part, which says why it cannot run on a CPU.

One server start (about a minute on two cores), through the profile's own path
(`Session.server`, `reference_replay`). Skipped where there is no engine environment,
a failure instead when ADVISOR_REQUIRE_ENGINE is set (CI).
"""

from __future__ import annotations

import json

import pytest

from profiling.caching.conversation_estimate import tokenized
from profiling.caching.hit_check import DEMO_SAMPLE
from profiling.config import Workload
from profiling.engine import vllm
from profiling.engine.chat_results import NOT_APPLICABLE
from profiling.engine.conversation_replay import projected_hit_rate, reference_replay
from profiling.engine.experiment import Session, Target
from profiling.engine.plan import make_plan
from profiling.model.demo import ensure_demo
from profiling.projection.conversation_workloads import parse_conversations
from profiling.projection.host_tier import OFFLOAD_CPU_REASON
from tests.engine.engine_env import require_engine

pytestmark = pytest.mark.engine  # the real engine, from its own environment

CONCURRENCY = 2
# Hit-rate points (of prompt tokens) the engine may differ from the projection by: the
# projection caches a reply's last full block, which the engine has not computed when
# the reply ends on a block's edge (its last token is sampled, never fed back).
TOLERANCE = 0.03


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> dict:
    require_engine()
    from transformers import AutoTokenizer

    model = ensure_demo("demo")
    tokenizer = AutoTokenizer.from_pretrained(model)
    records = parse_conversations(DEMO_SAMPLE.read_text())
    conversations = tokenized(records, tokenizer, Workload())
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    target = Target(
        model=str(model), device="cpu", dtype="float32", prompt_tokens=512, output_tokens=64,
        shared_prefix_tokens=0, concurrency=CONCURRENCY, max_model_len=1024, goodput=None,
        prompt_sample=[], check_prompts=[], eval_ids=[], conversations=conversations,
        vocab_size=vocab,
    )  # fmt: skip
    plan = make_plan(CONCURRENCY, True, None, False, None, 0)
    session = Session(vllm, vllm.python_path(), target, plan, tmp_path_factory.mktemp("engine"))
    kept: dict = {}
    with session.server("reference", []) as server:
        session.ran(server)
        result = reference_replay(session, server, lambda replayed: kept.update(sent=replayed))
        log = server.log_text()
    return {"result": result, "sent": kept.get("sent"), "session": session, "log": log,
            "conversations": conversations}  # fmt: skip


def test_every_turn_is_served_and_timed(replay):
    result, conversations = replay["result"], replay["conversations"]
    assert result.error == "" and not replay["session"].failures, result.error
    ref = result.reference
    assert len(ref.turns) == sum(len(c.turns) for c in conversations) == result.turns
    assert all(0 < t.ttft_s <= t.latency_s for t in ref.turns)
    # greedy to the turn's own reply length, whatever the model says
    replies = [t.output_tokens for c in conversations for t in c.turns]
    assert sorted(t.output_tokens for t in ref.turns) == sorted(replies)
    # the engine looked up exactly the prompt tokens the replay sent
    assert ref.queries == ref.prompt_tokens, ref.notes


def test_the_engine_hits_what_the_block_cache_projects_at_its_own_capacity(replay):
    ref = replay["result"].reference
    assert ref.block_size > 0 and ref.capacity_tokens >= ref.block_size
    assert ref.capacity_source.startswith("vllm:cache_config_info"), ref.capacity_source
    assert ref.hit_rate > 0
    assert abs(ref.hit_rate - ref.projected_hit_rate) <= TOLERANCE, (
        ref.hit_rate, ref.projected_hit_rate,
    )  # fmt: skip


def test_a_projection_without_the_engines_cache_would_fail_the_check(replay):
    ref, sent = replay["result"].reference, replay["sent"]
    for capacity in (0, ref.block_size):  # no cache; one block
        wrong = projected_hit_rate(sent, ref.block_size, capacity)
        assert abs(ref.hit_rate - wrong) > TOLERANCE, (capacity, wrong, ref.hit_rate)


def test_the_offload_says_it_is_not_applicable_on_cpu(replay):
    result = replay["result"]
    assert result.offload_status == NOT_APPLICABLE and result.offload is None
    assert result.offload_reason == OFFLOAD_CPU_REASON
    assert [launch.purpose for launch in replay["session"].launches] == ["reference"]
