"""Model sources: what is refused, and what loads."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from profiling.config import ProfileConfig, is_repo_id
from profiling.errors import (
    DeviceUnavailable,
    ModelSourceError,
    PathNotAllowed,
    RemoteCodeError,
)
from profiling.model import loading
from tests.profiling.tiny import tiny_llama_config

pytestmark = pytest.mark.model  # model directories written and loaded


def save_tiny_llama(path: Path, tokenizer: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(tiny_llama_config(max_positions=64)).save_pretrained(path)
    if tokenizer:
        save_word_tokenizer(path)
    return path


def save_word_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["serving", "a", "language", "model", "has", "two", "phases", "the", "prompt"]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(words))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llama(tmp_path_factory.mktemp("models") / "tiny", tokenizer=True)


def config_for(model: str, **kw: object) -> ProfileConfig:
    return ProfileConfig(model=model, device="cpu", **kw)


def test_a_local_directory_loads_with_its_tokenizer(model_dir: Path) -> None:
    loaded = loading.load(config_for(str(model_dir)), "cpu", "float32")
    info = loaded.info
    assert loaded.source.kind == "local" and loaded.path == model_dir.resolve()
    assert info.source == "local" and not info.config_only
    assert info.architecture == "LlamaForCausalLM"
    assert (info.num_layers, info.num_attention_heads, info.num_key_value_heads) == (2, 4, 2)
    assert info.head_dim == 8 and info.vocab_size == 128
    assert info.num_parameters == sum(p.numel() for p in loaded.model.parameters())
    assert loaded.tokenizer is not None
    assert not loaded.model.training
    assert next(loaded.model.parameters()).dtype == torch.float32


def test_a_directory_loads_in_the_requested_dtype(model_dir: Path) -> None:
    loaded = loading.load(config_for(str(model_dir)), "cpu", "bfloat16")
    assert next(loaded.model.parameters()).dtype == torch.bfloat16


def test_a_directory_inside_the_allowed_roots_is_accepted(model_dir: Path) -> None:
    source = loading.resolve(config_for(str(model_dir), allowed_roots=[str(model_dir.parent)]))
    assert source.kind == "local" and source.path == model_dir.resolve()


def test_it_refuses_a_directory_outside_the_allowed_roots(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(PathNotAllowed):
        loading.resolve(config_for(str(model_dir), allowed_roots=[str(tmp_path)]))


def test_it_refuses_a_symlink_inside_a_root_that_points_outside(
    model_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "sneaky").symlink_to(model_dir, target_is_directory=True)
    with pytest.raises(PathNotAllowed):
        loading.resolve(config_for(str(root / "sneaky"), allowed_roots=[str(root)]))


def test_it_refuses_dotdot_escapes_from_a_root(model_dir: Path) -> None:
    root = model_dir.parent / "other"
    root.mkdir(exist_ok=True)
    escape = f"{root}/../{model_dir.name}"
    with pytest.raises(PathNotAllowed):
        loading.resolve(config_for(escape, allowed_roots=[str(root)]))


def test_it_refuses_a_directory_with_only_pickle_weights(tmp_path: Path) -> None:
    tiny_llama_config(max_positions=64).save_pretrained(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded, ever")
    with pytest.raises(ModelSourceError, match="pickle .bin files are never loaded"):
        loading.resolve(config_for(str(tmp_path)))


def test_it_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match="does not exist"):
        loading.resolve(config_for(str(tmp_path / "nope")))


def write_model_config(path: Path, **changes: object) -> Path:
    """A tiny model directory whose config.json is edited after saving."""
    save_tiny_llama(path)
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_it_refuses_remote_code_from_an_auto_map(tmp_path: Path) -> None:
    path = write_model_config(tmp_path, auto_map={"AutoModelForCausalLM": "modeling_evil.Evil"})
    with pytest.raises(RemoteCodeError, match="trust_remote_code"):
        loading.load(config_for(str(path)), "cpu", "float32")


def test_it_refuses_an_architecture_transformers_does_not_have(tmp_path: Path) -> None:
    path = write_model_config(tmp_path, architectures=["EvilForCausalLM"])
    with pytest.raises(RemoteCodeError):
        loading.load(config_for(str(path)), "cpu", "float32")


def test_it_refuses_remote_code_in_config_only_mode(tmp_path: Path) -> None:
    path = write_model_config(tmp_path, model_type="evil_custom")
    with pytest.raises(RemoteCodeError):
        loading.load(config_for(str(path), source="config"), "cpu", "float32")


@pytest.mark.parametrize("text", ["../etc/passwd", "a//b", "/etc/passwd", "a/b/c", "--x", "a..b"])
def test_path_like_or_malformed_names_are_not_repo_ids(text: str) -> None:
    assert not is_repo_id(text)


@pytest.mark.parametrize("text", ["../etc/passwd", "a//b"])
def test_a_hub_source_never_treats_a_bad_id_as_a_path(text: str) -> None:
    with pytest.raises(ModelSourceError, match="repo id"):
        loading.resolve(config_for(text, source="hub"))


def test_a_valid_hub_id_resolves_without_touching_the_network() -> None:
    source = loading.resolve(config_for("meta-llama/Llama-3.1-8B"))
    assert (source.kind, source.repo_id, source.path) == ("hub", "meta-llama/Llama-3.1-8B", None)


def test_hub_failures_become_a_clear_model_source_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    def offline(*args: object, **kwargs: object) -> str:
        raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(ModelSourceError, match="cannot be reached") as refused:
        loading.load(config_for("someone/some-model"), "cpu", "float32")
    # and what to do next: a local copy, or an estimate from the config alone
    assert "ADVISOR_MODEL_ROOTS" in str(refused.value)
    assert "python -m profiling estimate /path/to/config.json" in str(refused.value)


def test_hub_downloads_ask_only_for_safe_files(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path
) -> None:
    import huggingface_hub

    asked = {}

    def fake_download(repo_id: str, allow_patterns: list[str]) -> str:
        asked.update(repo_id=repo_id, allow_patterns=allow_patterns)
        return str(model_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    loaded = loading.load(config_for("someone/some-model"), "cpu", "float32")
    assert asked["repo_id"] == "someone/some-model" and loaded.info.source == "hub"
    assert not any(p.endswith((".bin", ".pt", ".py")) or p == "*" for p in asked["allow_patterns"])


def test_config_only_builds_random_weights_and_says_so(model_dir: Path) -> None:
    loaded = loading.load(config_for(str(model_dir), source="config"), "cpu", "float32")
    assert loaded.info.config_only and loaded.info.source == "config"
    assert loaded.tokenizer is None
    assert loaded.info.num_layers == 2


def test_config_only_accepts_a_config_json_path(model_dir: Path) -> None:
    config = config_for(str(model_dir / "config.json"), source="config")
    assert loading.load(config, "cpu", "float32").info.config_only


def test_demo_names_go_through_ensure_demo_and_the_local_path(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path
) -> None:
    built = []
    fake = types.ModuleType("profiling.model.demo")
    fake.DEMO_MODELS = ("demo", "demo-draft")
    fake.ensure_demo = lambda name, cache_dir=None, progress=None: built.append(name) or model_dir
    monkeypatch.setitem(sys.modules, "profiling.model.demo", fake)
    loaded = loading.load(config_for("demo-draft"), "cpu", "float32")
    assert built == ["demo-draft"] and loaded.info.source == "demo"
    assert loaded.path == model_dir.resolve()


def test_auto_device_falls_back_to_cpu_and_auto_dtype_follows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device = loading.pick_device("auto")
    if not torch.cuda.is_available():
        assert device in ("cpu", "mps")
    assert loading.pick_dtype("auto", "cpu") == "float32"
    assert loading.pick_dtype("float16", "cpu") == "float16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert loading.pick_dtype("auto", "cuda:0") == "bfloat16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert loading.pick_dtype("auto", "cuda:0") == "float16"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_cuda_without_a_gpu_is_a_device_error() -> None:
    with pytest.raises(DeviceUnavailable):
        loading.pick_device("cuda")


def test_an_empty_list_of_roots_allows_no_directory_at_all(model_dir: Path) -> None:
    with pytest.raises(loading.PathNotAllowed, match="no local directories"):
        loading.resolve(config_for(str(model_dir), allowed_roots=[]))
    with pytest.raises(loading.PathNotAllowed):
        loading.resolve(config_for(str(model_dir), source="config", allowed_roots=[]))
