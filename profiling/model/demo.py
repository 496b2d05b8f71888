"""The built-in demo model family: a small Llama target and a draft distilled from it.

The project needs a model on every box, including boxes with no internet, so it
trains its own in well under a minute on two CPU cores: a byte-level BPE
tokenizer and a GQA Llama (`demo`) on the grammar text of `demo_corpus`, then a
one-layer Llama (`demo-draft`) distilled from the target's next-token
distribution, so speculative decoding has a draft that really agrees with it.
Both are written as ordinary Hugging Face directories (safetensors, no remote
code) and load with the same code as any user's local model.

    path = ensure_demo("demo")          # builds once, then returns the cached path
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True)

The models live under `<cache>/<DEMO_VERSION>/<name>/`, where `<cache>` is
`$ADVISOR_DEMO_DIR` or `~/.cache/bottleneck-advisor/demo`. Bump DEMO_VERSION
whenever the recipe or the corpus changes, so old caches are never reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging

from profiling.model import demo_corpus
from profiling.model.demo_training import (
    RECIPE,
    build_model,
    distill_draft,
    greedy_agreement,
    held_out_ids,
    perplexity,
    teacher_top_k,
    token_stream,
    train_target,
    train_tokenizer,
)

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

DEMO_MODELS = ("demo", "demo-draft")
DEMO_VERSION = "v3"
TARGET, DRAFT = DEMO_MODELS
ENV_VAR = "ADVISOR_DEMO_DIR"
DEFAULT_CACHE = pathlib.Path("~/.cache/bottleneck-advisor/demo")
INFO_FILE = "demo_info.json"

Progress = Callable[[str, float, str], None]


# -- the cache ---------------------------------------------------------------------------------


def demo_root(cache_dir: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The versioned folder that holds both demo models."""
    base = cache_dir if cache_dir is not None else os.environ.get(ENV_VAR) or DEFAULT_CACHE
    return pathlib.Path(base).expanduser() / DEMO_VERSION


def ensure_demo(
    name: str,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> pathlib.Path:
    """Return the directory of demo model `name`, building the family on first use.

    The cached check costs two `stat` calls and imports nothing heavy. Concurrent callers
    (several workers starting at once) serialise on a lock file: the first builds, the others
    wait and then reuse its result. A model directory only ever appears complete, because it
    is written under a temporary name next to its final place and then renamed.
    """
    if name not in DEMO_MODELS:
        raise ValueError(f"unknown demo model {name!r}; choose one of {DEMO_MODELS}")
    report = progress or _ignore
    root = demo_root(cache_dir)
    path = root / name
    if not _is_complete(path):
        root.mkdir(parents=True, exist_ok=True)
        with _build_lock(root / ".build.lock", report):
            if not _is_complete(path):
                _build_missing(root, report)
    report("demo", 1.0, f"demo model {name!r} ready")
    return path


def _ignore(phase: str, fraction: float, message: str) -> None:
    pass


def _is_complete(path: pathlib.Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


@contextlib.contextmanager
def _build_lock(lock_path: pathlib.Path, report: Progress) -> Iterator[None]:
    import fcntl  # optional: POSIX only, like the GPU boxes this runs on

    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report("demo", 0.0, "waiting for another process that is building the demo models")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_missing(root: pathlib.Path, report: Progress) -> None:
    """Build what is missing. A new target always gets a new draft (the draft is distilled
    from it); a lone missing draft is distilled again from the target on disk."""
    started = time.perf_counter()
    if _is_complete(root / TARGET):
        tokenizer = AutoTokenizer.from_pretrained(root / TARGET)
        with _quiet_progress_bars():
            target = AutoModelForCausalLM.from_pretrained(root / TARGET, use_safetensors=True)
        _make_draft(root, target, tokenizer, report, started)
        return
    documents = demo_corpus.documents(demo_corpus.training_text())
    with _seeded(RECIPE.seed):
        report("demo", 0.0, "training the demo tokenizer")
        tokenizer = train_tokenizer(documents)
        stream = token_stream(tokenizer, documents)
        target = build_model(RECIPE.target, tokenizer)
        train_target(target, stream, _scaled(report, 0.0, 0.68))
    ppl = round(perplexity(target, held_out_ids(tokenizer)), 3)
    _install(root, TARGET, target, tokenizer, {"role": "target", "held_out_perplexity": ppl})
    _make_draft(root, target, tokenizer, report, started, stream)


def _make_draft(
    root: pathlib.Path,
    target: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    report: Progress,
    started: float,
    stream: torch.Tensor | None = None,
) -> None:
    if stream is None:
        stream = token_stream(tokenizer, demo_corpus.documents(demo_corpus.training_text()))
    with _seeded(RECIPE.seed + 1):
        draft = build_model(RECIPE.draft, tokenizer)
        report("demo", 0.68, "recording the target's predictions for distillation")
        teacher = teacher_top_k(target, stream)
        distill_draft(draft, teacher, _scaled(report, 0.76, 0.97))
    report("demo", 0.97, "measuring the draft on held-out text")
    ids = held_out_ids(tokenizer)
    info = {
        "role": "draft",
        "target": TARGET,
        "held_out_agreement": round(greedy_agreement(target, draft, ids), 4),
        "held_out_perplexity": round(perplexity(draft, ids), 3),
        "build_s": round(time.perf_counter() - started, 1),
    }
    _install(root, DRAFT, draft, tokenizer, info)


def _install(
    root: pathlib.Path,
    name: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    info: dict[str, Any],
) -> None:
    """Write the model under a temporary name, then rename it into place."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=root))
    try:
        with _quiet_progress_bars():
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        meta = {"name": name, "demo_version": DEMO_VERSION, **info}
        (tmp / INFO_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        _make_shareable(tmp)
        final = root / name
        if final.exists():  # an incomplete or stale copy; move it aside first (rename is atomic)
            stale = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".old", dir=root))
            os.rename(final, stale / name)
            shutil.rmtree(stale, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _make_shareable(folder: pathlib.Path) -> None:
    """mkdtemp makes the folder private (0700) and safetensors writes 0600; the cache is
    shared by every worker and user on the box, so open it up as a normal download would be."""
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)


@contextlib.contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """No "Writing model shards" or "Loading weights" bars in worker logs; the caller's
    setting is restored afterwards."""
    was_enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()


def _scaled(report: Progress, start: float, end: float) -> Callable[[float, str], None]:
    """Map a sub-task's own 0..1 progress onto its slice of the whole build."""
    return lambda fraction, message: report("demo", start + (end - start) * fraction, message)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Fixed seeds for the build without disturbing the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
