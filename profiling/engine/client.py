"""Plain requests to the engine's OpenAI-compatible API, for checks (not for load).

Load and latency always come from the engine's own benchmark client; these
calls only read answers: greedy text (is speculation's output the plain
server's?) and prompt log-probabilities (perplexity on our evaluation text).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from typing import Any

from profiling.engine.server import EngineFailed

TIMEOUT_S = 300


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace")[:300]
        raise EngineFailed(f"the server answered {exc.code}: {said}") from None
    except (OSError, ValueError) as exc:
        raise EngineFailed(f"no answer from the server: {exc}") from None


def greedy_texts(url: str, model: str, prompts: list[str], max_tokens: int) -> list[str]:
    """Each prompt's greedy continuation (temperature 0, fixed length)."""
    out = []
    for prompt in prompts:
        body = {
            "model": model, "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True,
        }  # fmt: skip
        out.append(_post(url, body)["choices"][0]["text"])
    return out


def nll(url: str, model: str, windows: list[list[int]]) -> tuple[float, int]:
    """(summed negative log-likelihood, tokens scored) of token windows, each token
    predicted from the ones before it in its window (the first is not scored)."""
    total, count = 0.0, 0
    for ids in windows:
        body = {"model": model, "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0}
        scored = _post(url, body)["choices"][0]["prompt_logprobs"]
        for token, entry in zip(ids[1:], scored[1:], strict=True):
            total -= float(entry[str(token)]["logprob"])
            count += 1
    return total, count


def nll_of(url: str, model: str, ids: list[int], window: int) -> tuple[float, int] | None:
    """`nll` of `ids` cut into windows of `window` tokens; None for no tokens."""
    if not ids:
        return None
    windows = [ids[i : i + window] for i in range(0, len(ids), window)]
    return nll(url, model, [w for w in windows if len(w) > 1])


def perplexity(total: float, count: int) -> float | None:
    return math.exp(total / count) if count else None


def agreement(reference: list[str], other: list[str]) -> float:
    """Share of characters, position by position, equal to the reference's text."""
    same = total = 0
    for a, b in zip(reference, other, strict=True):
        total += max(len(a), len(b))
        same += sum(x == y for x, y in zip(a, b, strict=False))
    return same / total if total else 1.0
