"""The new-job form as a browser would post it, for the view, form and e2e tests."""

from __future__ import annotations

import re

CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def demo_form(**changes: str | list[str]) -> dict[str, str | list[str]]:
    """A valid submission for the demo model with the default workload, plus `changes`
    (a list is a multiple choice: the values of the ticked checkboxes)."""
    data: dict[str, str | list[str]] = {
        "model_source": "demo", "model_name": "demo", "dtype": "auto", "quick": "on",
        "gpu_kind": "", "gpu_count": "1", "run_on": "",
        "prompt_tokens": "512", "output_tokens": "128", "concurrency": "8",
        "shared_prefix_tokens": "0", "ttft_ms": "", "tpot_ms": "",
        "stated_bottleneck": "unsure", "notes": "",
    }  # fmt: skip
    data.update(changes)
    return data
