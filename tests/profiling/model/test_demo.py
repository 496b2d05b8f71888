"""The demo family: built once per module into a temporary cache (about 45 s on 2 cores)."""

from __future__ import annotations

import fcntl
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from profiling.model import demo, demo_corpus
from profiling.model.demo import DEMO_MODELS, DEMO_VERSION, ensure_demo
from profiling.model.demo_training import greedy_agreement, held_out_ids, perplexity
from tests.polling import until

pytestmark = pytest.mark.model  # builds the demo model family


@dataclass
class Family:
    cache: Path
    paths: dict[str, Path]
    models: dict[str, Any]
    tokenizers: dict[str, Any]
    events: list[tuple[str, float, str]]
    build_s: float


def load(path: Path) -> Any:
    return AutoModelForCausalLM.from_pretrained(path, use_safetensors=True).eval()


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Family:
    cache = tmp_path_factory.mktemp("demo-cache")
    events: list[tuple[str, float, str]] = []
    started = time.perf_counter()
    paths = {"demo": ensure_demo("demo", cache, progress=lambda *e: events.append(e))}
    build_s = time.perf_counter() - started
    paths["demo-draft"] = ensure_demo("demo-draft", cache)
    return Family(
        cache=cache,
        paths=paths,
        models={name: load(path) for name, path in paths.items()},
        tokenizers={name: AutoTokenizer.from_pretrained(path) for name, path in paths.items()},
        events=events,
        build_s=build_s,
    )


def n_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def test_models_live_under_the_versioned_cache_dir(family: Family) -> None:
    for name in DEMO_MODELS:
        assert family.paths[name] == family.cache / DEMO_VERSION / name


def test_both_load_as_plain_llama_directories_with_safetensors_only(family: Family) -> None:
    for name, path in family.paths.items():
        model = family.models[name]
        assert type(model) is LlamaForCausalLM
        assert model.config.architectures == ["LlamaForCausalLM"]
        assert (path / "model.safetensors").is_file()
        assert (path / "generation_config.json").is_file()
        assert not list(path.glob("*.bin")) and not list(path.glob("*.py"))


def test_weights_round_trip_without_missing_or_unexpected_keys(family: Family) -> None:
    for path in family.paths.values():
        _, info = AutoModelForCausalLM.from_pretrained(
            path, use_safetensors=True, output_loading_info=True
        )
        assert not info["missing_keys"] and not info["unexpected_keys"]
        assert not info["mismatched_keys"]


def test_target_is_a_grouped_query_llama_with_a_long_context(family: Family) -> None:
    config = family.models["demo"].config
    assert config.num_key_value_heads < config.num_attention_heads
    assert config.max_position_embeddings >= 1024
    assert 1000 <= config.vocab_size <= 2048


def test_target_and_draft_share_one_tokenizer(family: Family) -> None:
    target_tok, draft_tok = family.tokenizers["demo"], family.tokenizers["demo-draft"]
    assert target_tok.get_vocab() == draft_tok.get_vocab()
    for name, tok in family.tokenizers.items():
        config = family.models[name].config
        assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (
            tok.bos_token_id,
            tok.eos_token_id,
            tok.pad_token_id,
        )
        assert len({tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}) == 3
        assert config.vocab_size == len(tok)


def test_tokenizer_adds_bos_and_round_trips_any_text(family: Family) -> None:
    tok = family.tokenizers["demo"]
    text = "The H100 has 80 GB of HBM3 memory. Ünïcode and emoji 🚀 still encode."
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == text


def test_draft_is_much_smaller_shallower_and_narrower(family: Family) -> None:
    target, draft = family.models["demo"], family.models["demo-draft"]
    assert n_params(target) >= 4 * n_params(draft)
    assert draft.config.num_hidden_layers < target.config.num_hidden_layers
    assert draft.config.hidden_size < target.config.hidden_size


def test_draft_agrees_with_target_on_held_out_text(family: Family) -> None:
    ids = held_out_ids(family.tokenizers["demo"])
    agreement = greedy_agreement(family.models["demo"], family.models["demo-draft"], ids)
    assert agreement >= 0.5


def test_target_perplexity_on_held_out_text_is_far_below_the_vocab_size(family: Family) -> None:
    ids = held_out_ids(family.tokenizers["demo"])
    assert perplexity(family.models["demo"], ids) < family.models["demo"].config.vocab_size / 50


def test_target_continues_a_prompt_in_the_corpus_language(family: Family) -> None:
    tok, target = family.tokenizers["demo"], family.models["demo"]
    ids = tok("To make the soup,", return_tensors="pt")["input_ids"]
    out = target.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False
    )
    assert tok.decode(out[0, ids.shape[1] :]).startswith(" ")


def test_held_out_text_is_new_text_in_the_same_language() -> None:
    train, held_out = demo_corpus.training_text(), demo_corpus.held_out_text()
    assert held_out not in train
    train_docs = set(demo_corpus.documents(train))
    held_docs = demo_corpus.documents(held_out)
    assert len(held_docs) >= 20 and not train_docs.intersection(held_docs)
    assert demo_corpus.training_text() == train  # the same text on every build


def test_second_call_reuses_the_cache_without_rebuilding(
    family: Family, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no(step: str) -> Any:
        def refuse(*_: object, **__: object) -> None:
            pytest.fail(f"a cached demo {step}")

        return refuse

    monkeypatch.setattr(demo, "_build_missing", no("was rebuilt"))
    monkeypatch.setattr(demo, "_build_lock", no("waited for the build lock"))
    weights = family.paths["demo"] / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert ensure_demo("demo", family.cache) == family.paths["demo"]
    assert weights.stat().st_mtime_ns == before


def test_progress_runs_from_zero_to_one_in_the_demo_phase(family: Family) -> None:
    fractions = [fraction for _, fraction, _ in family.events]
    assert {phase for phase, _, _ in family.events} == {"demo"}
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert len(fractions) >= 10


def test_a_second_caller_waits_for_the_builder_and_reuses_its_result(
    family: Family, tmp_path: Path
) -> None:
    root = tmp_path / DEMO_VERSION
    root.mkdir()
    results: list[Path] = []
    events: list[str] = []
    with open(root / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # we play the process that is building
        waiter = threading.Thread(
            target=lambda: results.append(
                ensure_demo("demo-draft", tmp_path, lambda _p, _f, msg: events.append(msg))
            )
        )
        waiter.start()
        assert until(lambda: any("waiting" in msg for msg in events), timeout_s=10), events
        assert waiter.is_alive()
        for name in DEMO_MODELS:  # "finish the build", then let go of the lock
            shutil.copytree(family.paths[name], root / name)
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiter.join(timeout=30)
    assert results == [root / "demo-draft"]
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_default_cache_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ADVISOR_DEMO_DIR", str(tmp_path))
    assert demo.demo_root() == tmp_path / DEMO_VERSION
    monkeypatch.delenv("ADVISOR_DEMO_DIR")
    assert demo.demo_root() == Path.home() / ".cache/bottleneck-advisor/demo" / DEMO_VERSION


def test_it_rejects_names_outside_the_family(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown demo model"):
        ensure_demo("llama-70b", tmp_path)
