"""The step model's time, read from terms taken once and parts of steps already priced, is
exactly what `Shapes`' own counts give: the same FLOPs, bytes and seconds to the last bit,
for every shipped model, weight and KV format, split and GPU (the estimate's answers rest
on it)."""

from __future__ import annotations

import random

import pytest

from profiling.measure.hardware import lookup
from profiling.model.shapes import Shapes
from profiling.projection.calibration import CALIBRATED, Calibration, PhaseRate, assumed
from profiling.projection.estimate import shipped_configs
from profiling.projection.precision import dequant, kv_format, serving_precision, weights_format
from profiling.projection.step_time import StepModel, allreduce_seconds

# (rows, context held by the rows, prompt chunks): what the simulated engine asks for,
# fractional contexts and offsets (a block's mid-point) included.
STEPS = [
    (0, 0, ((2048, 0),)),
    (0, 0.0, ((1, 0), (8191, 1024))),
    (1, 2049.0, ()),
    (7, 7 * 1300.5, ((300, 1024.0),)),
    (7, 7 * 1400.5, ((300, 1024),)),  # the same chunk, its offset an int: the same figures
    (64, 64 * 2176.0, ((100, 37.5), (4000, 0), (28, 9000))),
    (300, 300 * 150_000.25, ()),
    (1024, 1024 * 2300.0, ((7168, 512),)),
]


def random_steps(seed: int, count: int = 150) -> list[tuple]:
    """Steps of any shape: rounding, not only the round numbers above, must agree."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        rows = rng.choice((0, 1, rng.randint(2, 64), rng.randint(65, 2048)))
        context = rows * rng.uniform(1, 200_000) if rows else 0.0
        chunks = tuple(
            (rng.randint(1, 8192), rng.choice((rng.randint(0, 50_000), rng.uniform(0, 5e4))))
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3)) or (0 if rows else 1))
        )
        out.append((rows, context, chunks))
    return out


def reference_kv_read(step: StepModel, tokens: float, sequences: int) -> float:
    s = step.shapes.sized
    if not (s.window_layers or s.state_layers) or not tokens:
        return step.kv_token * tokens
    mean = max(256, round(tokens / max(1, sequences) / 256) * 256)
    fmt = kv_format(step.dtype, step.kv_dtype)
    return step.shapes.kv_bytes_per_token(fmt, mean, step.devices) * tokens


def reference_work(step: StepModel, rows: int, context: float, chunks) -> tuple:
    """`StepModel.work` as it was written on `Shapes`' methods."""
    s = step.shapes
    prompt_tokens = sum(t for t, _ in chunks)
    flops = s.decode_flops(rows, context / rows) if rows else 0.0
    flops += sum(s.chunk_flops(tokens, offset) for tokens, offset in chunks)
    kv_moved = context + sum(offset + tokens for tokens, offset in chunks)
    weights = s.weights_read(weights_format(step.dtype), rows + prompt_tokens)
    bytes_ = weights * (1 + dequant(step.dtype)) + reference_kv_read(
        step, kv_moved, rows + len(chunks)
    )
    n = step.devices
    return flops / n, bytes_ / n, rows + prompt_tokens


def reference_seconds(step: StepModel, rows: int, context: float, chunks) -> float:
    flops, bytes_, tokens = reference_work(step, rows, context, chunks)
    seconds = step.time_of(flops, bytes_, bool(chunks), rows)
    experts = step.shapes.experts_touched(tokens) / step.devices
    return (
        seconds
        + step.moe_floor(experts)
        + allreduce_seconds(step.shapes, tokens, step.devices, step.gpu)
    )


def steps_of(name: str) -> list[StepModel]:
    shapes = Shapes.from_config(shipped_configs()[name])
    own = serving_precision(shapes, "")
    out = []
    for gpu_key, dtype, kv, devices in [
        ("H100", own, "", 1),
        ("H100", own, "float8", 8),
        ("H100", "fp8", "", 2),
        ("A100-80GB", "int4-weight-only", "", 4),
        ("B200", "fp4", "float8", 8),
    ]:
        gpu = lookup(gpu_key)
        try:
            rates = assumed(gpu, dtype, shapes.num_layers)
        except ValueError:
            continue  # the GPU has no peak for the format
        out.append(StepModel(shapes, rates, dtype, kv, devices, gpu))
    # A measured fit, no GPU: no MoE floor, an assumed link.
    fit = Calibration(CALIBRATED, "cpu", PhaseRate(60e9, None, 1e-3, 4),
                      PhaseRate(10e9, 40e9, 2e-3, 6))  # fmt: skip
    out.append(StepModel(shapes, fit, "bfloat16", "", 2))
    return out


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_the_step_time_is_shapes_own_count_to_the_bit(name):
    for step in steps_of(name):
        for rows, context, chunks in STEPS + random_steps(len(name)):
            assert step.work(rows, context, chunks) == reference_work(step, rows, context, chunks)
            assert step.kv_read(context, rows + 1) == reference_kv_read(step, context, rows + 1)
            assert step.seconds(rows, context, chunks) == reference_seconds(
                step, rows, context, chunks
            )
