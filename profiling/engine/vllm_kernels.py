"""What vLLM's build for this CPU cannot run, known before a server starts.

A server start costs most of a minute on two cores, and the CPU build refuses some
formats only once its model is loaded. Two kinds of refusal are known beforehand:
- a rule of its CPU attention: an fp8 KV cache only for head sizes divisible by 32
  (its own start-up error: "FP8 KV cache requires head_size divisible by 32 on CPU");
- a kernel missing from the build vLLM loads for this CPU (`_C_AVX2` where there is
  no AVX-512): fp8 weights call `static_scaled_fp8_quant` (registered there with no
  arguments: "expected at most 0 argument(s)"), a GPTQ checkpoint `cpu_gemm_wna16`
  (absent: "'_C' object has no attribute 'cpu_gemm_wna16'"). `PROBE` loads the
  kernels as vLLM does and says which are built, in the engine's environment.
No vLLM import here: `PROBE` runs in the engine's own interpreter.
"""

from __future__ import annotations

import json

CPU_FP8_KV_HEAD_MULTIPLE = 32
CPU_KERNELS = {"fp8": "static_scaled_fp8_quant", "gptq": "cpu_gemm_wna16"}

PROBE = f"""
import json, torch
from vllm.platforms import current_platform
current_platform.import_kernels()
def built(name):
    try:
        return len(getattr(torch.ops._C, name).default._schema.arguments) > 0
    except (AttributeError, RuntimeError):
        return False
print(json.dumps({{n: built(n) for n in {sorted(set(CPU_KERNELS.values()))!r}}}))
"""


def missing(probed: str | None) -> dict[str, str]:
    """Method -> its kernel, for each kernel `PROBE`'s line says is not built ({} where
    the probe said nothing readable)."""
    try:
        built = json.loads(probed or "")
    except ValueError:
        return {}
    if not isinstance(built, dict):
        return {}
    return {m: k for m, k in CPU_KERNELS.items() if built.get(k) is False}


def quantization_unsupported(
    method: str, device: str, head_dim: int, lacking: dict[str, str] | None = None
) -> str:
    """Why the engine refuses `method` on `device` for heads of `head_dim`, or with the
    kernels `lacking` (`missing`'s answer); "" where it may run."""
    if method == "fp8-kv" and device == "cpu" and head_dim % CPU_FP8_KV_HEAD_MULTIPLE:
        return (
            f"vLLM's CPU backend takes an fp8 KV cache only for head sizes divisible by "
            f"{CPU_FP8_KV_HEAD_MULTIPLE}; this model's heads are {head_dim} wide: not started"
        )
    kernel = (lacking or {}).get(method)
    if kernel:
        return (
            f"vLLM's build for this CPU has no {kernel} kernel, which {method} needs (the "
            "CPU build's kernels for it come with AVX-512): not started"
        )
    return ""
