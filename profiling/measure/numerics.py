"""How far two computations of the same logits may differ and still count as equal.

float32/64 on a CPU reproduce logits nearly bit for bit, so outputs must also
match token for token. bf16/fp16 do not: a batched prefill or a verify pass
over K+1 tokens reduces in another order than single steps, so logits differ
by rounding and a near tie can flip a greedy token. One tolerance, relative to
the largest |logit| at the position, serves every check that compares them
(the prefix cache's warm against cold, speculation's split rows).
"""

from __future__ import annotations

LOGIT_TOLERANCE = {"float32": 1e-4, "float64": 1e-8}
HALF_LOGIT_TOLERANCE = 3e-2


def is_strict(dtype: str) -> bool:
    """Whether outputs in `dtype` must be token-identical too."""
    return dtype in LOGIT_TOLERANCE


def logit_tolerance(dtype: str, scale: float) -> float:
    """The absolute difference allowed where the largest |logit| is `scale`."""
    return LOGIT_TOLERANCE.get(dtype, HALF_LOGIT_TOLERANCE) * max(1.0, scale)
