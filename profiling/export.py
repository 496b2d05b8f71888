"""Every repeated measurement of a profile as flat rows, for a CSV download.

One row per `Samples` anywhere in the result (prefill and decode points, each
technique's timings): where it sits in the JSON, what point it belongs to
(batch, tokens, K, variant), its median, p10, p90, the number of repeats and
the raw repeats themselves, so a spreadsheet can redo any figure of the report.
No torch; the site's download and any script use it alike.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterator
from typing import Any

from profiling.profile import Experiments, Profile
from profiling.results import Samples

# Fields of the dataclass holding a measurement that say which point it is.
POINT_FIELDS = (
    "draft", "name", "precision", "k", "batch_size", "concurrency", "prompt_tokens",
    "prefix_tokens", "context_tokens", "decode_batch", "turn",
)  # fmt: skip
COLUMNS = ("key", *POINT_FIELDS, "median_s", "p10_s", "p90_s", "repeats", "samples_s")


def _walk(value: Any, key: str, point: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if isinstance(value, Samples):
        yield {
            "key": key, **point, "median_s": value.median, "p10_s": value.p10,
            "p90_s": value.p90, "repeats": len(value.samples),
            "samples_s": " ".join(repr(s) for s in value.samples),
        }  # fmt: skip
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        here = dict(point)
        for name in POINT_FIELDS:
            field_value = getattr(value, name, None)
            if isinstance(field_value, int | str) and not isinstance(field_value, bool):
                here[name] = field_value
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{key}.{f.name}" if key else f.name, here)
    elif isinstance(value, Experiments):  # each technique's result, by its name
        for name, result in value.items():
            yield from _walk(result, f"{key}.{name}", point)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{key}[{i}]", point)


def measurement_rows(profile: Profile) -> list[dict[str, Any]]:
    """One dict per repeated measurement, in the result's order."""
    return list(_walk(profile, "", {}))


def measurements_csv(profile: Profile) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(measurement_rows(profile))
    return out.getvalue()
