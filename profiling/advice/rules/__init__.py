"""The rules: one small function per technique, each from what its experiment measured.

A rule returns recommendations and refusals (`NotRecommended`, each with
the measured reason). Refused always: a variant or run whose measurement
failed; speculative decoding whose measured speedup at the batch nearest the
user's concurrency is below 1; a quantized variant outside the quality
tolerance (`profiling.advice.quality`). Where an experiment did not run,
`profiling.advice.fallback` stands in with an estimate marked "estimated".

Ranking (`rank`): recommendations acting on the bottleneck come first, then
the larger expected gain: the factor by which the figure the technique acts
on improves (TPOT for generation, TTFT for prompt work, requests that fit for
memory); making a workload fit at all counts as MAKES_IT_FIT. A gain under
MIN_GAIN is refused as "about the same".

Each technique's rule has a module here; RULES lists them by the name of the
experiment (or estimate) they read.
"""

from __future__ import annotations

from typing import Any

from profiling.advice.rules import caching, disaggregation, parallel, quantization, speculative
from profiling.advice_results import Recommendation

RULES: dict[str, Any] = {
    "quantization": quantization.quantization,
    "speculative": speculative.speculative,
    "caching": caching.caching,
    "parallel": parallel.parallel,
    "disaggregation": disaggregation.disaggregation,
}


def rank(recommendations: list[Recommendation], bottleneck: str) -> list[Recommendation]:
    return sorted(recommendations, key=lambda r: (r.serves != bottleneck, -r.gain))
