"""`fleet` dicts as a job stores them (`Fleet.to_dict()`, each row with its launch command),
from the real library on the datasheets (a second or two): an 8B model at 20 requests/s of
2,000 + 300 tokens within TTFT 1 s and TPOT 40 ms, on four kinds: two priced that carry
it, one without a price (GB300) and one it does not fit (T4)."""

from __future__ import annotations

import copy
import functools
from typing import Any

from profiling.cli import build_parser
from profiling.estimate_cli import estimate

KINDS = "H100,L4,T4,GB300"


@functools.cache
def _sized(*flags: str) -> dict[str, Any]:
    args = build_parser().parse_args(
        ["estimate", "llama-3.1-8b", "--prompt-tokens", "2000", "--output-tokens", "300",
         "--ttft-ms", "1000", "--tpot-ms", "40", "--fleet-gpus", KINDS, *flags]
    )  # fmt: skip
    return estimate(args)["fleet"]


def sized(*flags: str) -> dict[str, Any]:
    """A fresh copy of the fleet for `flags` (default: --load-rps 20)."""
    return copy.deepcopy(_sized(*(flags or ("--load-rps", "20"))))
