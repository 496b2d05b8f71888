"""The demo family's recipe and training: a byte-level BPE tokenizer, a GQA Llama
target trained on `demo_corpus`, a one-layer draft distilled from it, and the
held-out measures (perplexity, greedy agreement) the build records.

`profiling.model.demo` builds, caches and serves the family; this module decides its
weights. Changing the recipe means bumping `profiling.model.demo.DEMO_VERSION`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from profiling.model import demo_corpus

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"


@dataclasses.dataclass(frozen=True)
class Shape:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything that decides the weights. Changing a field means bumping DEMO_VERSION."""

    vocab_size: int = 1024
    target: Shape = Shape(192, 4, 4, 2, 512)
    # One layer: on small models decode time is mostly per-layer overhead, so the draft's
    # cost per token is set by its depth; a 1-layer draft is ~3x cheaper than the 4-layer target.
    draft: Shape = Shape(96, 1, 2, 1, 256)
    max_position_embeddings: int = 2048
    # The target's batches as (rows, tokens per row). Short windows are cheaper per token and
    # learn the grammar; the last steps use long ones so the models stay sane at the 512-1024
    # token contexts the benchmarks use (trained on 128-token windows only, perplexity doubles
    # at 1024). The draft distils on long windows throughout.
    short_batch: tuple[int, int] = (4, 128)
    long_batch: tuple[int, int] = (1, 512)
    long_from: float = 0.7  # the share of target steps done before switching to long windows
    target_steps: int = 260
    target_lr: float = 4e-3
    # Many small steps: 300 x 2 windows agrees with the target far better than 75 x 8.
    draft_steps: int = 300
    draft_batch: int = 2
    draft_lr: float = 5e-3
    teacher_top_k: int = 32
    seed: int = 0


RECIPE = Recipe()


# -- tokenizer and models ----------------------------------------------------------------------


def train_tokenizer(documents: Sequence[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE: any text encodes (no unknown tokens), and `bos` is added up front."""
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=RECIPE.vocab_size,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(documents, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        add_bos_token=True,
        add_eos_token=False,
        model_max_length=RECIPE.max_position_embeddings,
    )


def _encode_documents(tokenizer: PreTrainedTokenizerFast, documents: Sequence[str]) -> list[int]:
    """`bos doc eos` for every document, end to end, as in ordinary pretraining."""
    ids: list[int] = []
    for encoded in tokenizer(list(documents), add_special_tokens=False)["input_ids"]:
        ids += [tokenizer.bos_token_id, *encoded, tokenizer.eos_token_id]
    return ids


def token_stream(tokenizer: PreTrainedTokenizerFast, documents: Sequence[str]) -> torch.Tensor:
    return torch.tensor(_encode_documents(tokenizer, documents), dtype=torch.long)


def held_out_ids(tokenizer: PreTrainedTokenizerFast) -> torch.Tensor:
    """The held-out text of `demo_corpus` as one 1-D tensor of token ids."""
    return token_stream(tokenizer, demo_corpus.documents(demo_corpus.held_out_text()))


def build_model(shape: Shape, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=RECIPE.max_position_embeddings,
        tie_word_embeddings=False,
        **dataclasses.asdict(shape),
        **ids,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(**ids)
    return model


# -- training ----------------------------------------------------------------------------------


def _lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first tenth, then cosine down to a tenth of the peak."""
    warmup = max(1, steps // 10)
    if step < warmup:
        return peak * (step + 1) / warmup
    done = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * done)))


def _fit(
    model: PreTrainedModel,
    steps: int,
    peak_lr: float,
    loss_at: Callable[[int], torch.Tensor],
    report: Callable[[float, str], None],
    label: str,
) -> None:
    """A plain AdamW loop; `loss_at(step)` draws a batch and returns its loss."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.01)
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, steps, peak_lr)
        loss = loss_at(step)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == steps - 1:
            report(
                (step + 1) / steps,
                f"training {label}: step {step + 1}/{steps}, loss {loss.item():.2f}",
            )
    model.eval()


def train_target(
    model: PreTrainedModel, stream: torch.Tensor, report: Callable[[float, str], None]
) -> None:
    generator = torch.Generator().manual_seed(RECIPE.seed)
    switch = int(RECIPE.long_from * RECIPE.target_steps)

    def loss_at(step: int) -> torch.Tensor:
        rows, n = RECIPE.short_batch if step < switch else RECIPE.long_batch
        starts = torch.randint(0, len(stream) - n - 1, (rows,), generator=generator).tolist()
        windows = torch.stack([stream[s : s + n + 1] for s in starts])
        logits = model(input_ids=windows[:, :-1]).logits
        return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten())

    _fit(model, RECIPE.target_steps, RECIPE.target_lr, loss_at, report, "the demo target")


@dataclasses.dataclass
class _Teacher:
    """The target's top-k next-token distribution on every block of the training stream."""

    blocks: torch.Tensor  # (n_blocks, seq_len) input ids
    probs: torch.Tensor  # (n_blocks, seq_len, k), renormalised over the top k, float16
    indices: torch.Tensor  # (n_blocks, seq_len, k) token ids, int16


def teacher_top_k(target: PreTrainedModel, stream: torch.Tensor) -> _Teacher:
    """Computed once: a target forward is the costly part of distillation, and the draft sees
    every block several times. The top 32 of a model this sure of itself hold nearly all mass."""
    n = RECIPE.long_batch[1]
    blocks = stream[: (len(stream) // n) * n].view(-1, n)
    probs, indices = [], []
    with torch.inference_mode():
        for batch in blocks.split(8):
            top = target(input_ids=batch).logits.topk(RECIPE.teacher_top_k, dim=-1)
            probs.append(torch.softmax(top.values, dim=-1).half())
            indices.append(top.indices.short())
    return _Teacher(blocks, torch.cat(probs), torch.cat(indices))


def distill_draft(
    draft: PreTrainedModel, teacher: _Teacher, report: Callable[[float, str], None]
) -> None:
    """Cross-entropy against the teacher's (truncated) distribution: the KL to the target up to
    a constant, which pulls the draft's argmax onto the target's."""
    generator = torch.Generator().manual_seed(RECIPE.seed + 1)

    def loss_at(step: int) -> torch.Tensor:
        pick = torch.randint(0, len(teacher.blocks), (RECIPE.draft_batch,), generator=generator)
        log_probs = torch.log_softmax(draft(input_ids=teacher.blocks[pick]).logits, dim=-1)
        picked = log_probs.gather(-1, teacher.indices[pick].long())
        return -(teacher.probs[pick].float() * picked).sum(-1).mean()

    _fit(draft, RECIPE.draft_steps, RECIPE.draft_lr, loss_at, report, "the demo draft")


# -- measuring ---------------------------------------------------------------------------------


def _windows(input_ids: torch.Tensor, window: int) -> Iterator[torch.Tensor]:
    """Rows of at most `window` tokens: a 1-D sequence is cut into consecutive pieces, each
    scored on its own (the models were trained on 512-token windows)."""
    rows = input_ids.reshape(1, -1) if input_ids.dim() == 1 else input_ids
    yield from rows.split(window, dim=1)


def greedy_agreement(
    target: PreTrainedModel,
    draft: PreTrainedModel,
    input_ids: torch.Tensor,
    window: int = 512,
) -> float:
    """Share of positions where the draft's greedy next token equals the target's.

    Teacher-forced: both models read the same text and their argmax is compared at every
    position, which is the acceptance rate a greedy speculative decoder sees on such text.
    `input_ids` is 1-D (cut into `window`-token pieces) or a 2-D batch without padding.
    """
    agree = total = 0
    with torch.inference_mode():
        for chunk in _windows(torch.as_tensor(input_ids), window):
            want = target(input_ids=chunk.to(target.device)).logits.argmax(-1)
            got = draft(input_ids=chunk.to(draft.device)).logits.argmax(-1)
            agree += int((want == got.to(want.device)).sum())
            total += want.numel()
    return agree / total


def perplexity(model: PreTrainedModel, input_ids: torch.Tensor, window: int = 512) -> float:
    """exp(mean next-token negative log-likelihood) over `input_ids`, cut as in
    `greedy_agreement`; the first token of each piece is context only."""
    nll = 0.0
    count = 0
    with torch.inference_mode():
        for chunk in _windows(torch.as_tensor(input_ids), window):
            chunk = chunk.to(model.device)
            logits = model(input_ids=chunk).logits[:, :-1].float()
            nll += float(
                F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum")
            )
            count += chunk[:, 1:].numel()
    return math.exp(nll / count)
