"""How the timed decode step runs: a static KV cache, compiled where that pays.

A server decodes from preallocated KV blocks with a captured graph; eager
transformers with a `DynamicCache` grows the cache by concatenation and pays
Python and launch overhead on every layer, so on a GPU it reaches a fraction of
the memory bandwidth a serving engine does. The timed decode therefore runs, in
order of preference:

- `static-compiled`: transformers' `StaticCache` (written in place, fixed
  shapes) and the model under `torch.compile` (CUDA graphs on a GPU, mode
  "reduce-overhead"); the default on CUDA;
- `static`: the same cache, eager; the default on CPU, where compiling each
  decode shape takes tens of seconds, more than the timed steps it would save;
- `eager`: the `DynamicCache`, when a static cache cannot hold the model's
  layers or a faster path failed.

Each decode point records the path that ran and, when it is not the one asked
for, why (`DecodePoint.path`, `.path_reason`). The speculative experiment's
per-pass costs (one token, and K+1 tokens to verify) run here too, so one shape
is measured one way on every page.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo.config as dynamo
from transformers import DynamicCache, StaticCache

from profiling.errors import is_out_of_memory

PATHS = ("auto", "static-compiled", "static", "eager")
# The context is filled into the cache in chunks of at most this many tokens over
# the batch (rows × chunk), as a server's chunked prefill does: one forward over
# 64 rows × 8k tokens would run out of memory on activations alone.
FILL_TOKENS = 8192
CPU_REASON = (
    "on a CPU, compiling each decode shape takes tens of seconds, more than the timed steps "
    "save; the static cache runs eager"
)


def resolve(asked: str, device: str) -> tuple[str, str]:
    """(path to try, why it differs from the fastest) for `asked` on `device`."""
    if asked not in PATHS:
        raise ValueError(f"decode path {asked!r}: choose one of {', '.join(PATHS)}")
    if asked != "auto":
        return asked, "" if asked == "static-compiled" else "asked for"
    if device.startswith("cuda"):
        return "static-compiled", ""
    return "static", CPU_REASON


@dataclass
class Prepared:
    """A cache filled to the context, and the step that decodes one token over it."""

    cache: Any
    step: Callable[[Any], Any]  # step(cache) -> logits
    path: str
    reason: str


# Each decode point is a new shape (batch, context): a recompile. Past torch's limit
# (8 by default) it would silently run eager while this records "static-compiled";
# so the limit covers a full sweep, and going past it raises, which moves the point
# down a path with the reason said.
RECOMPILE_LIMIT = 64


class Compiled:
    """The model compiled once per subject; later shapes recompile inside torch."""

    def __init__(self, model: Any, device: str) -> None:
        dynamo.recompile_limit = max(dynamo.recompile_limit, RECOMPILE_LIMIT)
        dynamo.fail_on_recompile_limit_hit = True
        mode = "reduce-overhead" if device.startswith("cuda") else None
        self.forward = torch.compile(model, mode=mode, dynamic=False)


def prepare(
    model: Any,
    prefill_ids: Any,
    step_ids: Any,
    asked: str,
    device: str,
    compiled: dict[str, Compiled],
    fill_tokens: int = FILL_TOKENS,
) -> Prepared:
    """Fill a cache with `prefill_ids` and return the step on the best path that runs.

    The step feeds `step_ids` ([batch, width]: one token per row for a decode step,
    K+1 for a speculative verify pass). The step runs once here, untimed (the compile
    happens then); a failure other than running out of memory moves down one path and
    says why.
    """
    path, reason = resolve(asked, device)
    while True:
        try:
            return _prepare(
                model, prefill_ids, step_ids, path, reason, device, compiled, fill_tokens
            )
        except Exception as exc:
            if is_out_of_memory(exc) or path == "eager":
                raise
            lower = "static" if path == "static-compiled" else "eager"
            reason = f"{path} failed ({type(exc).__name__}: {_first_line(exc)}); ran {lower}"
            path = lower


def _prepare(
    model: Any,
    prefill_ids: Any,
    step_ids: Any,
    path: str,
    reason: str,
    device: str,
    compiled: dict[str, Compiled],
    fill_tokens: int,
) -> Prepared:
    context = prefill_ids.shape[1]
    if path == "eager":
        cache = DynamicCache(config=model.config)
        cache.activate_past_recording()  # lets sliding-window layers be cropped back
    else:
        # Room for the context and the timed tokens: the step attends over exactly
        # the context a server's paged cache would hold.
        cache = StaticCache(config=model.config, max_cache_len=context + step_ids.shape[1])
    chunk = max(1, fill_tokens // prefill_ids.shape[0])  # tokens per row per forward
    for start in range(0, context, chunk):
        part = prefill_ids[:, start : start + chunk]
        model(input_ids=part, cache=cache, use_cache=True, logits_to_keep=1)
    if path == "eager":
        cache.crop(0)
    elif not cache.is_croppable:
        raise ValueError("a layer of this model cannot be rolled back in a static cache")
    forward = model
    if path == "static-compiled":
        if "model" not in compiled:
            compiled["model"] = Compiled(model, device)
        forward = compiled["model"].forward

    width = step_ids.shape[1]  # a verify pass needs the logits after every token it feeds

    def step(target: Any) -> Any:
        return forward(
            input_ids=step_ids, cache=target, use_cache=True, logits_to_keep=width
        ).logits

    if path != "eager":
        step(cache)  # compiles on the compiled path, checks the static cache runs
        cache.crop(-width)
    return Prepared(cache, step, path, reason)


def rolled_back(
    step_on: Callable[[Any], Any], cache: Any
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(timed step, untimed setup) that keep every sample at the same context.

    A croppable cache is rolled back to its context length before each step,
    outside the timing: the crop itself costs about a sixth of a tiny model's
    step on a CPU, which a server never pays. Caches that cannot be rolled back
    (e.g. linear attention layers) are copied before each step instead, also
    outside the timing.
    """
    if cache.is_croppable:
        # int(): a static cache's length is a tensor it updates in place.
        context = int(cache.get_seq_length())

        def roll_back() -> None:
            grown = int(cache.get_seq_length()) - context
            if grown > 0:
                cache.crop(-grown)

        return lambda: step_on(cache), roll_back

    work = {"cache": cache}

    def fresh_copy() -> None:
        work["cache"] = copy.deepcopy(cache)

    return lambda: step_on(work["cache"]), fresh_copy


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0][:200] if text else "") or "no message"
