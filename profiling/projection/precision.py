"""Serving precisions: the bytes each reads and the rate its matmuls run at on a GPU.

No torch import. A precision is what an engine serves with: the weights' format
(bytes per parameter), the format its matrix multiplies run in (the datasheet
peak for that format; none where the device lacks it), and, for weight-only
formats, the cost of unpacking weights inside the kernel. Weight-only int8 and
int4 (GPTQ/AWQ-style) read fewer bytes but multiply in 16 bits, so they gain at
small batches (memory-bound) and lose a little at large ones; fp8 and w8a8 also
multiply at the 8-bit peak. The KV cache's format is chosen apart (`kv_format`):
an fp8 cache halves the bytes each decode row reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.measure.hardware import GPU
from profiling.model.shapes import CHECKPOINT, Shapes

# Quantized kernels do more than read bytes: an assumed share added to the time the
# bytes take. Weight-only kernels unpack each weight (int4 kernels are published at
# ~3.5-3.9x of bf16's speed at batch 1 against the 4x the bytes allow); 8-bit matmuls
# also quantize the activations and run small-batch GEMMs below the bandwidth a
# 16-bit GEMV reaches (fp8 decode has been measured at ~1.3x of bf16 at batch 1,
# against the ~1.9x its bytes allow).
WEIGHT_ONLY_DEQUANT = 0.10
EIGHT_BIT_OVERHEAD = 0.35


@dataclass(frozen=True)
class Precision:
    key: str
    label: str
    weights: str  # a `profiling.model.shapes.DTYPE_BYTES` key, or CHECKPOINT (as it ships)
    compute: str  # the matmuls' format: "bfloat16", "float16", "float8", "int8" or "fp4"
    dequant: float = 0.0  # share added to the bytes-bound time (unpacking, activation scales)
    quality: str = ""  # what to expect of the output, to check on the real model

    def peak(self, gpu: GPU) -> float | None:
        """The datasheet's dense peak for this precision's matmuls on `gpu`."""
        if self.compute == "float8":
            return gpu.fp8_flops_per_second
        if self.compute == "int8":
            return gpu.int8_ops_per_second
        if self.compute == "fp4":
            # FP4 tensor cores where the GPU has them (Blackwell's NVFP4, MI355X's MXFP4);
            # elsewhere engines run FP4 weights weight-only, multiplying in 16 bits.
            return gpu.fp4_flops_per_second or gpu.peak_flops("bfloat16")
        return gpu.peak_flops(self.compute)

    @property
    def from_checkpoint(self) -> bool:
        return self.weights == CHECKPOINT


PRECISIONS = {
    p.key: p
    for p in (
        Precision("bfloat16", "bf16", "bfloat16", "bfloat16", quality="the reference"),
        Precision("float16", "fp16", "float16", "float16", quality="as bf16"),
        Precision("fp8", "fp8 weights and activations", "float8", "float8", EIGHT_BIT_OVERHEAD,
                  quality="usually within 1 % of bf16 on benchmarks; check it"),
        Precision("w8a8-int8", "int8 weights and activations (w8a8)", "int8", "int8",
                  EIGHT_BIT_OVERHEAD,
                  quality="usually close to bf16 with calibrated scales; check it"),
        Precision("int8-weight-only", "int8 weight-only", "int8", "bfloat16",
                  WEIGHT_ONLY_DEQUANT, quality="usually close to bf16"),
        Precision("int4-weight-only", "int4 weight-only (GPTQ/AWQ-style)", "int4", "bfloat16",
                  WEIGHT_ONLY_DEQUANT, quality="measurable loss on some tasks: check it"),
        Precision("fp4", "fp4 (NVFP4 on FP4 tensor cores; weight-only elsewhere)", "fp4", "fp4",
                  WEIGHT_ONLY_DEQUANT, quality="measurable loss on some tasks: check it"),
        # The checkpoint as it ships (`quantization_config`): its bytes are the model's own,
        # scales included; the matmuls run in the format its method serves in.
        Precision("checkpoint-fp8", "the checkpoint's fp8", CHECKPOINT, "float8",
                  EIGHT_BIT_OVERHEAD, quality="as published"),
        Precision("checkpoint-fp4", "the checkpoint's fp4", CHECKPOINT, "fp4",
                  WEIGHT_ONLY_DEQUANT, quality="as published"),
        Precision("checkpoint-int8", "the checkpoint's int8", CHECKPOINT, "int8",
                  EIGHT_BIT_OVERHEAD, quality="as published"),
        Precision("checkpoint-weight-only", "the checkpoint's weight-only quantization", CHECKPOINT,
                  "bfloat16", WEIGHT_ONLY_DEQUANT, quality="as published"),
    )
}  # fmt: skip


_NONE = Precision("", "", "bfloat16", "bfloat16")


def checkpoint_precision(compute: str) -> str:
    """The precision key that serves a quantized checkpoint whose method multiplies in
    `compute` (`profiling.model.sizing.Checkpoint.compute`)."""
    return {"float8": "checkpoint-fp8", "fp4": "checkpoint-fp4",
            "int8": "checkpoint-int8"}.get(compute, "checkpoint-weight-only")  # fmt: skip


def dequant(name: str) -> float:
    """The share a precision's kernels add to the time its weight bytes take (0 for a
    torch dtype or a 16-bit format)."""
    return PRECISIONS[name].dequant if name in PRECISIONS else 0.0


def weights_format(name: str) -> str:
    """The bytes-per-parameter key of a precision or torch dtype name."""
    return PRECISIONS[name].weights if name in PRECISIONS else name


def kv_format(weights: str, kv: str = "") -> str:
    """The KV cache's format: the one asked for, else the weights' when 16 bits or wider
    (a quantized model keeps its cache in 16 bits unless told otherwise)."""
    if kv:
        return kv
    fmt = weights_format(weights)
    return fmt if fmt in ("float32", "bfloat16", "float16") else "bfloat16"


def model_format(dtype: str) -> str:
    """The model's own serving format behind `dtype`: a 16-bit dtype or a checkpoint's
    own precision as it is; anything else (a quantization asked for) its bf16 base."""
    own = dtype in ("bfloat16", "float16") or PRECISIONS.get(dtype, _NONE).from_checkpoint
    return dtype if own else "bfloat16"


def already_quantized(shapes: Shapes, dtype: str) -> bool:
    """Whether `dtype`'s weights are below 16 bits on this model (a checkpoint that ships
    quantized included): never advised to quantize again."""
    return shapes.bytes_per_param(weights_format(dtype)) < 1.99


def serving_precision(shapes: object, asked: str) -> str:
    """The precision a deployment serves in: the one asked for, else (`asked` empty or
    "auto") the checkpoint's own where it ships quantized, else bf16."""
    if asked and asked != "auto":
        return asked
    checkpoint = getattr(shapes, "checkpoint", None)
    return checkpoint_precision(checkpoint.compute) if checkpoint else "bfloat16"
