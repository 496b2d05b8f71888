"""The speculative-decoding experiment: an exact loop, honest counts, a serialisable result."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from profiling.experiments import speculative
from profiling.prompts import PromptSet, load_prompts
from profiling.speculative.drafting import (
    ModelDrafter,
    PromptLookupDrafter,
    TokenizerMismatch,
    check_tokenizers,
    lookup_continuation,
)
from profiling.speculative.loop import LoopRun, speculative_generate
from profiling.speculative.results import SpeculativeResult

EOS = 2
NEW_TOKENS = 24
ALL_KS = range(1, 9)
try:
    from profiling.demo import ensure_demo
except ImportError:  # the demo family is built by another module; skip until it is there
    ensure_demo = None
needs_demo = pytest.mark.skipif(ensure_demo is None, reason="profiling.demo is not available")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: faster and steadier on one thread
    yield
    torch.set_num_threads(threads)


class FakeClock:
    """Runs the function and says every call took `seconds`."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds

    def time(self, fn: Callable[[], Any]) -> float:
        fn()
        return self.seconds


def word_tokenizer(words: list[str], eos: str = "</s>") -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<s>": 1, eos: EOS, **{w: i + 3 for i, w in enumerate(words)}}
    model = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=model, unk_token="<unk>", bos_token="<s>", eos_token=eos
    )


def tiny_llama(layers: int, seed: int, vocab: int = 96) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=EOS,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper logits: no near-ties for float rounding to flip
        model.lm_head.weight.mul_(20)
    return model


@pytest.fixture(scope="module")
def tiny() -> dict[str, Any]:
    generator = torch.Generator().manual_seed(3)
    # Repeated phrases give prompt lookup something to find.
    prompts = [torch.randint(3, 96, (n,), generator=generator).tolist() for n in (5, 11, 17)]
    prompts[2] = prompts[2] + prompts[2][:6]
    return {"target": tiny_llama(2, 0), "draft": tiny_llama(1, 1), "prompts": prompts}


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    if ensure_demo is None:
        pytest.skip("profiling.demo is not available")

    loaded = {}
    for name in ("demo", "demo-draft"):
        path = ensure_demo(name)
        loaded[name] = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True).eval()
        loaded[name + ":tok"] = AutoTokenizer.from_pretrained(path)
    tok = loaded["demo:tok"]
    texts = load_prompts().prompts
    loaded["prompts"] = [tok(t)["input_ids"] for t in (texts[0], texts[5], texts[-1])]
    return loaded


def greedy(
    model: LlamaForCausalLM, prompt: list[int], new_tokens: int = NEW_TOKENS, **kwargs: Any
) -> list[int]:
    ids = torch.tensor([prompt])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=new_tokens,
        pad_token_id=0,
        **kwargs,
    )
    return out[0, len(prompt) :].tolist()


def eos_of(model: LlamaForCausalLM) -> list[int]:
    eos = model.generation_config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


def run_loop(
    target: LlamaForCausalLM,
    prompts: list[list[int]],
    drafter: Any,
    k: int,
    new_tokens: int = NEW_TOKENS,
) -> LoopRun:
    return speculative_generate(
        target, prompts, new_tokens, drafter=drafter, k=k, eos_token_ids=eos_of(target)
    )


def drafters(draft: LlamaForCausalLM, batch_size: int = 1) -> list[Any]:
    return [ModelDrafter(draft, "draft", batch_size), PromptLookupDrafter()]


def assisted(
    target: LlamaForCausalLM, draft: LlamaForCausalLM, prompt: list[int], k: int
) -> list[int]:
    """transformers' assisted generation with exactly k draft tokens every round."""
    saved = copy.deepcopy(draft.generation_config)
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    try:
        return greedy(target, prompt, assistant_model=draft)
    finally:
        draft.generation_config = saved


# -- exactness ------------------------------------------------------------------------


def test_loop_equals_greedy_generate_for_every_k_with_draft_and_prompt_lookup(tiny) -> None:
    target = tiny["target"]
    for prompt in tiny["prompts"]:
        expected = greedy(target, prompt)
        for k in ALL_KS:
            for drafter in drafters(tiny["draft"]):
                assert run_loop(target, [prompt], drafter, k).outputs[0] == expected, (k, drafter)


def test_plain_loop_without_a_draft_equals_greedy_generate(tiny) -> None:
    for prompt in tiny["prompts"]:
        assert run_loop(tiny["target"], [prompt], None, 0).outputs[0] == greedy(
            tiny["target"], prompt
        )


def test_loop_equals_transformers_assisted_generation(tiny) -> None:
    target, draft, prompt = tiny["target"], tiny["draft"], tiny["prompts"][1]
    for k in (1, 3, 8):
        ours = run_loop(target, [prompt], ModelDrafter(draft, "draft", 1), k).outputs[0]
        assert ours == assisted(target, draft, prompt, k)
        assert ours == greedy(target, prompt, prompt_lookup_num_tokens=k)


def test_loop_stops_at_end_of_sequence_like_generate_even_when_the_draft_proposed_it(tiny) -> None:
    target, prompt = tiny["target"], tiny["prompts"][0]
    ending = greedy(target, prompt)[4]  # make the 5th greedy token the end token
    model = copy.deepcopy(target)
    model.generation_config.eos_token_id = ending
    expected = greedy(model, prompt)
    assert expected[-1] == ending and len(expected) < NEW_TOKENS
    for k in (1, 4, 8):
        run = run_loop(model, [prompt], ModelDrafter(model, "self", 1), k)  # accepts the end token
        assert run.outputs[0] == expected
    assert run.steps[0][-1].target_token is None  # ended on an accepted proposal


def test_batched_loop_equals_each_rows_own_greedy_output(tiny) -> None:
    target, prompts = tiny["target"], tiny["prompts"] + [tiny["prompts"][0][:3]]
    expected = [greedy(target, p) for p in prompts]
    for k in (1, 3, 8):
        for drafter in [*drafters(tiny["draft"], len(prompts)), None]:
            assert run_loop(target, prompts, drafter, k).outputs == expected, (k, drafter)


@needs_demo
def test_loop_equals_greedy_and_assisted_generation_on_the_demo_models(demo) -> None:
    target, draft = demo["demo"], demo["demo-draft"]
    for prompt in demo["prompts"]:
        expected = greedy(target, prompt)
        for k in ALL_KS:
            for drafter in drafters(draft):
                assert run_loop(target, [prompt], drafter, k).outputs[0] == expected, (k, drafter)
        for k in (1, 4, 8):
            assert assisted(target, draft, prompt, k) == expected, k


@needs_demo
def test_batched_loop_equals_per_row_greedy_on_the_demo_models(demo) -> None:
    target, prompts = demo["demo"], demo["prompts"]
    expected = [greedy(target, p) for p in prompts]
    for k in (2, 5):
        for drafter in drafters(demo["demo-draft"], len(prompts)):
            assert run_loop(target, prompts, drafter, k).outputs == expected, (k, drafter)


@needs_demo
def test_demo_draft_agrees_with_the_demo_on_most_next_tokens(demo) -> None:
    # At K=1 the acceptance rate is the share of next tokens the draft gets right.
    # Prompts from the demo's own held-out text: on it the family is meant to agree
    # (the shipped prompt set is off its grammar, and the target soon ends those).
    from profiling import demo_corpus

    tok = demo["demo:tok"]
    paragraphs = demo_corpus.documents(demo_corpus.held_out_text())[:4]
    prompts = [tok(text[:160])["input_ids"] for text in paragraphs]
    drafter = ModelDrafter(demo["demo-draft"], "d", len(prompts))
    run = run_loop(demo["demo"], prompts, drafter, 1, new_tokens=48)
    records = [r for steps in run.steps for r in steps]
    assert sum(r.accepted for r in records) / sum(len(r.proposed) for r in records) > 0.45


# -- counts and trace ---------------------------------------------------------------------


def test_counts_add_up_to_the_generated_tokens(tiny) -> None:
    for drafter in drafters(tiny["draft"], len(tiny["prompts"])):
        run = run_loop(tiny["target"], tiny["prompts"], drafter, 3)
        for steps, output in zip(run.steps, run.outputs, strict=True):
            accepted = sum(s.accepted for s in steps)
            corrections = sum(s.correction for s in steps)
            bonus = sum(s.bonus for s in steps)
            assert accepted + corrections + bonus == len(output) == NEW_TOKENS
            assert all(s.accepted <= len(s.proposed) <= 3 for s in steps)
        assert run.target_passes == max(len(s) for s in run.steps)


def test_passes_equal_steps_at_batch_one(tiny) -> None:
    run = run_loop(tiny["target"], tiny["prompts"][:1], ModelDrafter(tiny["draft"], "d", 1), 4)
    assert run.target_passes == len(run.steps[0]) == len(run.draft_seconds)


def test_a_draft_identical_to_the_target_is_always_accepted(tiny) -> None:
    target = tiny["target"]
    for k in (1, 4, 8):
        run = run_loop(target, tiny["prompts"], ModelDrafter(target, "self", 3), k)
        records = [r for steps in run.steps for r in steps]
        assert sum(r.accepted for r in records) == sum(len(r.proposed) for r in records) > 0
        assert not any(r.correction for r in records)


def test_trace_steps_rebuild_the_output_exactly(tiny) -> None:
    words = [f"w{i}" for i in range(93)]
    tokenizer = word_tokenizer(words)
    target, prompt = tiny["target"], tiny["prompts"][2]
    run = run_loop(target, [prompt], ModelDrafter(tiny["draft"], "d", 1), 4)
    from profiling.speculative.sweep import trace_steps

    trace = trace_steps(run.steps[0], tokenizer)
    rebuilt = []
    for step in trace:
        rebuilt += step.proposed[: step.accepted_count] + [step.target_token]
        assert step.bonus == (step.accepted_count == len(step.proposed))
        assert step.target_text == tokenizer.decode([step.target_token])
    assert rebuilt == run.outputs[0] == greedy(target, prompt)


# -- drafts ---------------------------------------------------------------------


def test_prompt_lookup_copies_what_followed_the_most_recent_longest_ngram() -> None:
    seq = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert lookup_continuation(seq, 2) == [7, 8]  # latest earlier "1 2 3", not the first
    assert lookup_continuation([4, 5, 6, 5], 3) == [6, 5]  # falls back to the 1-gram "5"
    assert lookup_continuation([1, 2, 3], 4) == []


def test_a_draft_with_another_vocabulary_is_refused() -> None:
    target = word_tokenizer(["a", "b", "c"])
    check_tokenizers(target, word_tokenizer(["a", "b", "c"]), "same")
    with pytest.raises(TokenizerMismatch, match="different vocabulary"):
        check_tokenizers(target, word_tokenizer(["a", "c", "b"]), "shuffled")
    with pytest.raises(TokenizerMismatch, match="eos_token_id"):
        other = word_tokenizer(["a", "b", "c"])
        other.eos_token = "<unk>"
        check_tokenizers(target, other, "other-eos")
    assert issubclass(TokenizerMismatch, ValueError)


def test_run_speculative_refuses_a_mismatched_draft_before_measuring(tiny) -> None:
    with pytest.raises(TokenizerMismatch):
        speculative.run_speculative(
            tiny["target"],
            word_tokenizer(["a"]),
            (tiny["draft"], word_tokenizer(["b"]), "bad"),
            ks=[1],
            batch_sizes=[1],
            max_new_tokens=4,
            prompts=["a"],
            prompt_lookup=False,
            device="cpu",
        )


# -- the experiment -------------------------------------------------------------------


def small_run(tiny: dict[str, Any], **changes: Any) -> SpeculativeResult:
    tokenizer = word_tokenizer([f"w{i}" for i in range(93)])
    kwargs: dict[str, Any] = dict(
        ks=[1, 3],
        batch_sizes=[1, 2],
        max_new_tokens=8,
        prompts=PromptSet(1, ["w1 w2 w3 w4 w1 w2", "w5 w6 w7", "w8 w9 w8 w9 w8"]),
        prompt_lookup=True,
        device="cpu",
        clock=FakeClock(),
        warmup=0,
        repeats=2,
        target_name="tiny",
    )
    kwargs.update(changes)
    return speculative.run_speculative(
        tiny["target"], tokenizer, (tiny["draft"], tokenizer, "tiny-draft"), **kwargs
    )


def test_result_has_the_documented_shape_and_round_trips(tiny) -> None:
    progress: list[float] = []
    result = small_run(tiny, progress=lambda phase, fraction, message: progress.append(fraction))
    data = result.to_dict()
    assert SpeculativeResult.from_dict(data) == result
    assert {(s["draft"], s["k"], s["batch_size"]) for s in data["sweeps"]} == {
        (d, k, b) for d in ("tiny-draft", "prompt-lookup") for k in (1, 3) for b in (1, 2)
    }
    for sweep in data["sweeps"]:
        assert sweep["matches_baseline"] and len(sweep["acceptance_by_position"]) == sweep["k"]
        assert (
            sweep["mean_accepted_length"] == 1 + sweep["accepted_tokens"] / sweep["sequence_passes"]
        )
        for key in (
            "acceptance_rate",
            "tokens_per_second",
            "baseline_tokens_per_second",
            "speedup",
        ):
            assert isinstance(sweep[key], float)
    assert {(b["draft"], b["batch_size"]) for b in data["best_k"]} == {
        (d, b) for d in ("tiny-draft", "prompt-lookup") for b in (1, 2)
    }
    assert data["trace"] and {"proposed", "accepted_count", "target_token"} <= set(data["trace"][0])
    assert data["acceptance_meaningful"] and "1 + accepted" in data["acceptance_convention"]
    assert data["finding"].startswith("draft tiny-draft, K=")
    assert (
        data["draft_memory"][0]["weights_bytes"]
        > data["draft_memory"][0]["kv_cache_bytes_per_token"]
        > 0
    )
    assert len(data["verify_cost"]) == 4 and progress[-1] == 1.0 and progress == sorted(progress)


def test_config_only_measures_the_verify_cost_curve_and_says_acceptance_is_meaningless(
    tiny,
) -> None:
    result = speculative.run_speculative(
        tiny["target"],
        None,
        (tiny["draft"], None, "random-draft"),
        ks=[1, 4],
        batch_sizes=[1, 2],
        max_new_tokens=8,
        prompts=["one two three four five six"],
        prompt_lookup=False,
        device="cpu",
        config_only=True,
        clock=FakeClock(),
        repeats=2,
    )
    assert not result.acceptance_meaningful and not result.sweeps and not result.trace
    assert "meaningless" in result.finding
    # A fake clock makes every pass cost the same: the bound is K + 1.
    assert [(p.k, p.batch_size, p.speedup_bound) for p in result.verify_cost] == [
        (1, 1, 2.0),
        (4, 1, 5.0),
        (1, 2, 2.0),
        (4, 2, 5.0),
    ]


def test_the_shipped_prompt_set_is_versioned_and_varied() -> None:
    prompts = load_prompts()
    lengths = sorted(len(p) for p in prompts.prompts)
    assert prompts.version == 1 and len(prompts.prompts) >= 12 and lengths[-1] > 5 * lengths[0]


def test_plan_sweeps_batch_one_and_the_capped_concurrency() -> None:
    quick = speculative.make_plan(quick=True, concurrency=64, output_tokens=512)
    assert (quick.ks, quick.batch_sizes, quick.max_new_tokens) == ([1, 2, 4], [1, 8], 32)
    full = speculative.make_plan(quick=False, concurrency=1, output_tokens=16)
    assert (full.ks, full.batch_sizes, full.max_new_tokens) == ([1, 2, 3, 4, 6, 8], [1], 16)
    assert len(full.prompts.prompts) > len(quick.prompts.prompts)
    assert speculative.default_draft_name("demo") == "demo-draft"


def test_run_for_context_loads_the_named_draft_and_returns_the_result_dict(tiny, tmp_path) -> None:
    from types import SimpleNamespace

    from profiling.config import ProfileConfig, Workload

    tokenizer = word_tokenizer([f"w{i}" for i in range(93)])
    tiny["draft"].save_pretrained(tmp_path / "draft")
    tokenizer.save_pretrained(tmp_path / "draft")
    config = ProfileConfig(model="tiny", quick=True, workload=Workload(64, 6, concurrency=2))
    info = SimpleNamespace(name="tiny", config_only=False)
    context = SimpleNamespace(
        config=config,
        loaded=SimpleNamespace(model=tiny["target"], tokenizer=tokenizer, info=info),
        device="cpu",
        dtype="float32",
        clock=FakeClock(),
        progress=lambda phase, fraction, message: None,
    )
    data = speculative.run_for_context(context, draft_name=str(tmp_path / "draft"), ks=[2])
    assert SpeculativeResult.from_dict(data).to_dict() == data
    assert {(s["draft"], s["k"], s["batch_size"]) for s in data["sweeps"]} == {
        (str(tmp_path / "draft"), 2, 1),
        (str(tmp_path / "draft"), 2, 2),
        ("prompt-lookup", 2, 1),
        ("prompt-lookup", 2, 2),
    }
    assert data["max_new_tokens"] == 6 and all(s["matches_baseline"] for s in data["sweeps"])


def sweep(k: int, batch_size: int, speedup: float, accepted: int = 10) -> Any:
    from profiling.results import Samples
    from profiling.speculative.results import SweepPoint

    return SweepPoint(
        draft="demo-draft",
        k=k,
        batch_size=batch_size,
        prompts=1,
        generated_tokens=30,
        proposed_tokens=20,
        accepted_tokens=accepted,
        corrections=5,
        bonus_tokens=5,
        target_passes=10,
        sequence_passes=10,
        acceptance_rate=accepted / 20,
        mean_accepted_length=1 + accepted / 10,
        acceptance_by_position=[0.5] * k,
        seconds=Samples([1.0 / speedup]),
        baseline_seconds=Samples([1.0]),
        tokens_per_second=30 * speedup,
        baseline_tokens_per_second=30.0,
        speedup=speedup,
    )


def test_finding_names_the_best_k_at_batch_one_and_its_speedup_at_each_batch() -> None:
    from profiling.speculative.report import best_k, finding

    points = [sweep(2, 1, 1.3), sweep(4, 1, 1.6, accepted=11), sweep(2, 8, 1.2), sweep(4, 8, 0.96)]
    result = SpeculativeResult("demo", False, True, "", 8, 1, [], points, best_k(points), [])
    assert [(b.batch_size, b.k) for b in result.best_k] == [(1, 4), (8, 2)]
    assert finding(result) == (
        "draft demo-draft, K=4: 2.1 tokens per target pass, 1.6× faster at batch 1, "
        "0.96× (slower) at 8"
    )
