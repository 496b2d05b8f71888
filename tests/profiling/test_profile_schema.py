"""The stored result's versioned reader: older results open typed, newer ones are refused.

`fixtures/profile_v1.json` is a result the CLI wrote at schema version 1
(`python -m profiling profile demo --device cpu --quick --experiments
caching,parallel`), kept as it was: `scripts/make-fixtures` does not touch it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from profiling.caching.results import CachingResult
from profiling.parallel.results import DisaggregationResult, ParallelResult
from profiling.profile import SCHEMA_VERSION, Profile

V1 = json.loads((Path(__file__).parent / "fixtures" / "profile_v1.json").read_text())


def test_a_version_1_result_opens_with_typed_experiments():
    assert V1["schema_version"] == 1
    profile = Profile.from_dict(V1)
    ran = profile.experiments
    assert isinstance(ran.caching, CachingResult)
    assert isinstance(ran.parallel, ParallelResult)
    assert isinstance(ran.disaggregation, DisaggregationResult)
    assert ran.speculative is None and ran.quantization is None
    assert ran.names() == sorted(V1["experiments_run"])
    assert (
        ran.caching.prefix_sweep[0].cold_ttft_seconds.median
        == (V1["caching"]["prefix_sweep"][0]["cold_ttft_seconds"]["median"])
    )


# (section, field of its nested rows, the value a result written before reads as)
NESTED_ADDED = [
    ("caching", "first_divergence", None),
    ("caching", "planned_seconds", None),
    ("caching", "budget_seconds", None),
    ("caching", "trimmed", []),
    ("parallel", "planned_seconds", None),
    ("parallel", "budget_seconds", None),
    ("parallel", "trimmed", []),
    ("prefill", "bytes_moved", None),
    ("prefill", "achieved_bytes_per_second", None),
    ("prefill", "fraction_of_copy", None),
    ("decode", "flops_per_step", None),
    ("decode", "achieved_flops_per_second", None),
    ("decode", "fraction_of_peak_flops", None),
]


def _strip(node: Any, field: str, value: Any) -> int:
    """Remove `field` (checked equal to `value`) wherever it sits in `node`; how often."""
    found = 0
    if isinstance(node, dict):
        if field in node:
            assert node.pop(field) == value
            found += 1
        found += sum(_strip(v, field, value) for v in node.values())
    elif isinstance(node, list):
        found += sum(_strip(v, field, value) for v in node)
    return found


def test_written_again_it_keeps_the_layout_at_the_current_version():
    again = Profile.from_dict(V1).to_dict()
    assert again["schema_version"] == SCHEMA_VERSION > 1
    # Sections added since are additive and empty here (older readers ignore them). The
    # conversations are a technique's result now: absent where there are none, as a
    # technique that did not run is.
    added = {
        "engine": None,
        "eager_verdict": None,
        "phase_seconds": {},
        "planned_seconds": {},
        "fleet": None,
    }
    assert set(again) == set(V1) | set(added)
    assert {k: again[k] for k in added} == added
    # Fields added since inside a section, with the value an old result reads as.
    for section, field, value in NESTED_ADDED:
        assert _strip(again.get(section), field, value) > 0
    for name in V1["experiments_run"]:
        assert again[name] == V1[name]
    assert Profile.from_dict(again) == Profile.from_dict(V1)


def test_a_result_from_a_newer_version_is_refused_not_misread():
    newer = copy.deepcopy(V1)
    newer["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="newer than this code reads"):
        Profile.from_dict(newer)


def test_an_experiment_listed_but_absent_is_none():
    data = copy.deepcopy(V1)
    del data["caching"]
    assert Profile.from_dict(data).experiments.caching is None
