"""How much an engine profile measures: concurrencies, requests, draft lengths, variants.

Every engine configuration costs a server start (40–80 s on two CPU cores), so
the plan counts starts: quick mode runs one draft length per speculative method,
full mode sweeps them. Requests per point grow with the concurrency so each
point holds several full batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QUICK_K, FULL_KS = (3,), (2, 4)
NGRAM = {"prompt_lookup_max": 3, "prompt_lookup_min": 1}
# fp8 weights, fp8 KV cache, and the GPTQ checkpoint our quantization experiment saved.
QUANT_METHODS = ("fp8", "fp8-kv", "gptq")
CHECK_TOKENS = 32  # greedy tokens per prompt compared between two servers
CHECK_PROMPTS = 4
EVAL_WINDOW = 256  # tokens per perplexity request through the engine


@dataclass
class EnginePlan:
    concurrencies: list[int]
    requests: dict[int, int]
    warmups: int
    ks: list[int]
    ngram: bool
    draft: str | None  # a directory or a Hub id; None: no draft model
    quantization: list[str] = field(default_factory=lambda: list(QUANT_METHODS))
    tensor_parallel: int = 0  # 0: not measured
    eval_tokens: int = 512
    start_timeout_s: float = 600.0
    run_timeout_s: float = 900.0


def sweep(concurrency: int) -> list[int]:
    """1 … the user's … twice the user's, each once, ascending."""
    return sorted({1, concurrency, 2 * concurrency})


def make_plan(
    concurrency: int,
    quick: bool,
    ks: list[int] | None,
    ngram: bool,
    draft: str | None,
    tensor_parallel: int,
) -> EnginePlan:
    levels = sweep(concurrency)
    per = 2 if quick else 4
    floor = 24 if quick else 48
    return EnginePlan(
        concurrencies=levels,
        requests={c: max(per * c, floor) for c in levels},
        warmups=2,
        ks=list(ks) if ks else list(QUICK_K if quick else FULL_KS),
        ngram=ngram,
        draft=draft,
        tensor_parallel=tensor_parallel,
        eval_tokens=512 if quick else 2048,
    )
