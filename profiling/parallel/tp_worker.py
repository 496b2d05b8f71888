"""The torchrun entry of the measured tensor-parallel run (one process per rank).

    python -m torch.distributed.run --standalone --nproc_per_node 2 \
        -m profiling.parallel.tp_worker SPEC.json

Every rank loads the model split with transformers' tensor parallelism
(`DistributedConfig(tp_size=world size)`; gloo on CPU, nccl on CUDA). Rank 0
also loads it whole, as one device, and times both the same way, sample by
sample interleaved (a barrier before each), so drifting load from other
processes hits both alike: a prefill (`logits_to_keep=1`, as the baseline)
and a decode step over a filled cache (rolled back one token after each
step). It checks that the split model's full logits and greedy tokens equal
the whole model's, measures per-rank weight shards and KV bytes per token,
and writes one JSON object (`run` or `error`) to the spec's `out` path.

On CPU each rank gets `threads_per_rank` torch threads, and so does the
single-device reference: one "device" is that many cores.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiling.measure.timing import clock_for

KV_PROBE_TOKENS = (8, 24)


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    rank = int(os.environ.get("RANK", "0"))
    try:
        run = measure(spec, rank)
    except Exception as exc:
        if rank == 0:
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            _write(spec["out"], {"error": message, "traceback": traceback.format_exc()[-4000:]})
        raise
    if rank == 0:
        _write(spec["out"], {"run": run})
    _finish()
    return 0


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _finish() -> None:
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _load(spec: dict[str, Any], tp_size: int | None, device: str) -> Any:
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {
        "dtype": getattr(torch, spec["dtype"]),
        "use_safetensors": True,
        "local_files_only": True,
        "trust_remote_code": False,
    }
    if tp_size:
        # child: torchrun rank; an import failing in measure() is written to the out file
        from transformers.distributed import DistributedConfig

        kwargs["distributed_config"] = DistributedConfig(tp_size=tp_size)
    model = AutoModelForCausalLM.from_pretrained(spec["model_path"], **kwargs)
    if not tp_size:
        model.to(device)
    return model.eval()


def local_bytes(model: Any) -> tuple[int, int]:
    """(bytes of this rank's shards, bytes of the storages behind them), each once."""
    shard, storage, seen = 0, 0, set()
    tensors = [*model.parameters(), *model.buffers()]
    for tensor in tensors:
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        shard += local.numel() * local.element_size()
        key = local.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            storage += local.untyped_storage().nbytes()
    return shard, storage


def kv_bytes_per_token(model: Any, ids: Any) -> int:
    """KV bytes per token of this rank's cache: two fills, differenced."""
    # child: torchrun rank; an import failing in measure() is written to the out file
    from transformers import DynamicCache

    # child: torchrun rank; an import failing in measure() is written to the out file
    from profiling.model.memory import cache_bytes

    sizes = []
    for tokens in KV_PROBE_TOKENS:
        cache = DynamicCache(config=model.config)
        model(input_ids=ids[:, :tokens], cache=cache, use_cache=True, logits_to_keep=1)
        sizes.append(cache_bytes(cache))
    return round((sizes[1] - sizes[0]) / (KV_PROBE_TOKENS[1] - KV_PROBE_TOKENS[0]))


def decode_step(model: Any, context_ids: Any, step_ids: Any) -> Callable[[], None]:
    """One decode step over a cache of the context, rolled back after each call."""
    # child: torchrun rank; an import failing in measure() is written to the out file
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    model(input_ids=context_ids, cache=cache, use_cache=True, logits_to_keep=1)

    def step() -> None:
        model(input_ids=step_ids, cache=cache, use_cache=True, logits_to_keep=1)
        cache.crop(-1)

    return step


def _inputs(spec: dict[str, Any], vocab: int, device: str) -> dict[str, Any]:
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch

    generator = torch.Generator().manual_seed(int(spec.get("seed", 0)))
    batch, context = spec["decode_batch"], spec["decode_context"]
    prompt = max(spec["prompt_tokens"], KV_PROBE_TOKENS[1])
    draw = lambda *shape: torch.randint(0, vocab, shape, generator=generator).to(device)  # noqa: E731
    return {
        "prompt": draw(1, prompt)[:, : spec["prompt_tokens"]],
        "probe": draw(1, KV_PROBE_TOKENS[1]),
        "context": draw(batch, context),
        "step": draw(batch, 1),
    }


def _setup(spec: dict[str, Any]) -> tuple[str, int]:
    """(this rank's device, world size); pins the GPU or the CPU threads."""
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if spec["device"] == "cuda":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        torch.set_num_threads(int(spec["threads_per_rank"]))
        device = "cpu"
    torch.manual_seed(int(spec.get("seed", 0)))
    return device, int(os.environ.get("WORLD_SIZE", "1"))


def measure(spec: dict[str, Any], rank: int) -> dict[str, Any]:
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch
    import torch.distributed as dist

    device, world = _setup(spec)
    split = _load(spec, world, device)
    single = _load(spec, None, device) if rank == 0 else None
    ids = _inputs(spec, split.config.get_text_config(decoder=True).vocab_size, device)
    clock = clock_for(device)
    with torch.inference_mode():
        shard, storage = local_bytes(split)
        checks = _check_outputs(split, single, ids["prompt"], spec["greedy_tokens"])
        kv = kv_bytes_per_token(split, ids["probe"])
        kv_single = kv_bytes_per_token(single, ids["probe"]) if single is not None else None
        prefill = _interleaved(*_both(single, split, _prefill(ids["prompt"])), clock, spec)
        steps = _both(single, split, lambda m: decode_step(m, ids["context"], ids["step"]))
        decode = _interleaved(*steps, clock, spec)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, (shard, storage, kv))
    return {
        "tp_size": world,
        "backend": dist.get_backend(),
        "device": spec["device"],
        "threads_per_rank": None if spec["device"] == "cuda" else int(spec["threads_per_rank"]),
        "weights_bytes_per_rank": [g[0] for g in gathered],
        "weights_storage_bytes_per_rank": [g[1] for g in gathered],
        "single_weights_bytes": local_bytes(single)[0] if single is not None else 0,
        "kv_bytes_per_token_per_rank": [g[2] for g in gathered],
        "single_kv_bytes_per_token": kv_single,
        "prefill_samples": prefill[0],
        "single_prefill_samples": prefill[1],
        "decode_samples": decode[0],
        "single_decode_samples": decode[1],
        **checks,
    }


def _prefill(prompt: Any) -> Callable[[Any], Callable[[], Any]]:
    return lambda model: lambda: model(input_ids=prompt, use_cache=True, logits_to_keep=1)


def _both(
    single: Any, split: Any, make: Callable[[Any], Callable[[], Any]]
) -> tuple[Callable[[], Any], Callable[[], Any] | None]:
    """The call `make` builds for the split model, and for the whole one (rank 0 only)."""
    return make(split), make(single) if single is not None else None


def _check_outputs(split: Any, single: Any, prompt: Any, new_tokens: int) -> dict[str, Any]:
    """Full logits and greedy tokens of the split model against the whole one (rank 0)."""
    logits = split(input_ids=prompt).logits
    options = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False}
    options["pad_token_id"] = 0  # random prompts: no padding, but generate asks
    tokens = split.generate(prompt, **options)[0, prompt.shape[1] :]
    if single is None:
        return {}
    reference = single(input_ids=prompt).logits
    reference_tokens = single.generate(prompt, **options)[0, prompt.shape[1] :]
    difference = (logits.float() - reference.float()).abs().max().item()
    return {
        "max_logit_difference": difference,
        "logits_scale": reference.float().abs().max().item(),
        "greedy_tokens_match": bool(tokens.tolist() == reference_tokens.tolist()),
        "greedy_tokens": int(tokens.numel()),
    }


def _interleaved(
    split: Callable[[], Any], single: Callable[[], Any] | None, clock: Any, spec: dict[str, Any]
) -> tuple[list[float], list[float]]:
    """Samples of the split call (all ranks run it, rank 0 times it) and of the
    single-device call (rank 0 alone), alternated, warm-up samples dropped."""
    # child: torchrun rank; an import failing in measure() is written to the out file
    import torch.distributed as dist

    warmup, repeats = int(spec["warmup"]), int(spec["repeats"])
    split_times, single_times = [], []
    for i in range(warmup + repeats):
        dist.barrier()
        took = clock.time(split)
        dist.barrier()
        single_took = clock.time(single) if single is not None else 0.0
        if i >= warmup:
            split_times.append(took)
            single_times.append(single_took)
    return split_times, single_times


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
