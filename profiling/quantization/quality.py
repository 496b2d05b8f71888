"""Quality of a variant against the reference: pure functions of logits and token ids.

The model-facing helpers (`teacher_forced_logits`, `eval_nll`, `greedy`)
run a model; the metrics (`top1_agreement`, `mean_kl`, `perplexity`,
`first_divergence`) only compare tensors and lists, so they are tested on
hand-built logits with answers worked out by hand. Comparing the reference
with itself goes through the same code and gives agreement 1.0, KL 0.0 and
the same perplexity exactly.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache

EVAL_WINDOW = 512  # tokens per forward when scoring the evaluation text


def top1_agreement(reference: list[Any], variant: list[Any]) -> float:
    """Share of positions whose argmax equals the reference's (lists of [T, V] logits)."""
    agree = total = 0
    for ref, var in zip(reference, variant, strict=True):
        agree += int((ref.argmax(-1) == var.argmax(-1)).sum())
        total += ref.shape[0]
    return agree / total if total else float("nan")


def mean_kl(reference: list[Any], variant: list[Any]) -> float:
    """Mean over positions of KL(reference || variant) of the softmax distributions, in nats."""
    kl_sum, total = 0.0, 0
    for ref, var in zip(reference, variant, strict=True):
        log_p = torch.log_softmax(ref.double(), dim=-1)
        log_q = torch.log_softmax(var.double(), dim=-1)
        per_position = (log_p.exp() * (log_p - log_q)).sum(-1).clamp(min=0.0)
        kl_sum += float(per_position.sum())
        total += ref.shape[0]
    return kl_sum / total if total else float("nan")


def nll_sum(logits: Any, targets: Any) -> tuple[float, int]:
    """(summed next-token cross-entropy, count) of [T, V] logits predicting [T] targets."""
    loss = F.cross_entropy(logits.double(), targets.long(), reduction="sum")
    return float(loss), int(targets.numel())


def perplexity(nll: float, count: int) -> float:
    return math.exp(nll / count) if count else float("nan")


def first_divergence(reference: list[int], tokens: list[int]) -> int | None:
    """Index of the first differing token; None when the sequences are identical."""
    for i, (a, b) in enumerate(zip(reference, tokens, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(tokens) else min(len(reference), len(tokens))


# -- running a model ---------------------------------------------------------------


def teacher_forced_logits(model: Any, prompts: list[list[int]]) -> list[Any]:
    """Next-token logits at every position of each prompt, as float32 [T, V] on the CPU."""
    found = []
    with torch.inference_mode():
        for ids in prompts:
            batch = torch.tensor([ids], device=model.device)
            found.append(model(input_ids=batch).logits[0].float().cpu())
    return found


def eval_nll(model: Any, ids: list[int], window: int = EVAL_WINDOW) -> tuple[float, int]:
    """Summed NLL and token count of the evaluation text, in windows of `window` tokens
    (the first token of each window is context only)."""
    nll, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(ids) - 1, window):
            chunk = torch.tensor([ids[start : start + window]], device=model.device)
            if chunk.shape[1] < 2:
                break
            logits = model(input_ids=chunk).logits[0, :-1].float().cpu()
            part, n = nll_sum(logits, chunk[0, 1:].cpu())
            nll, count = nll + part, count + n
    return nll, count


def prefill(model: Any, batch: Any) -> tuple[Any, Any]:
    """(cache, first generated token [B, 1]) after one forward over `batch` [B, T]."""
    cache = DynamicCache(config=model.config)
    out = model(input_ids=batch, cache=cache, use_cache=True, logits_to_keep=1)
    return cache, out.logits[:, -1].argmax(-1, keepdim=True)


def decode(model: Any, cache: Any, token: Any, steps: int) -> Any:
    """`steps` greedy decode steps from `token`; returns [B, steps + 1] tokens."""
    tokens = [token]
    for _ in range(steps):
        logits = model(input_ids=token, cache=cache, use_cache=True).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
    return torch.cat(tokens, dim=1)


def greedy(model: Any, ids: list[int], new_tokens: int, eos: list[int]) -> list[int]:
    """The greedy continuation of one prompt, cut after the first end-of-sequence token."""
    with torch.inference_mode():
        cache, first = prefill(model, torch.tensor([ids], device=model.device))
        tokens = decode(model, cache, first, new_tokens - 1)[0].tolist()
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[: i + 1]
    return tokens
