"""The engine's environment, for the tests that need it: skipped where there is none, a
failure instead when ADVISOR_REQUIRE_ENGINE is set (CI), so the engine leg cannot pass
by skipping."""

from __future__ import annotations

import os

import pytest

from profiling.engine import vllm


def require_engine() -> str:
    """The engine environment's Python, or the test skipped (failed in CI) without one."""
    python = vllm.python_path()
    if vllm.version(python) is None:
        if os.environ.get("ADVISOR_REQUIRE_ENGINE"):
            pytest.fail(f"no vLLM at {python}: run scripts/engine-env")
        pytest.skip("no engine environment (scripts/engine-env makes one)")
    return python
