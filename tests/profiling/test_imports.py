"""The library stands alone: no Django, Celery or advisor, and light result types."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import profiling
names = ["profiling"] + [m.name for m in pkgutil.walk_packages(profiling.__path__, "profiling.")]
for name in names:
    importlib.import_module(name)
banned = sorted(m for m in sys.modules if m.split(".")[0] in ("django", "celery", "advisor"))
print(json.dumps({"modules": names, "banned": banned}))
"""

IMPORT_LIGHT = """
import json, sys
import profiling, profiling.config, profiling.results, profiling.measure.hardware, profiling.serde
import profiling.errors, profiling.projection.verdict, profiling.baseline
import profiling.measure.timing
import profiling.quantization.results, profiling.quantization.report
import profiling.quantization.experiment
import profiling.parallel.results, profiling.parallel.plans, profiling.parallel.experiment
import profiling.advice.build, profiling.advice.text, profiling.estimate_cli
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))))
"""


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_importing_every_profiling_module_imports_no_django_celery_or_advisor() -> None:
    result = json.loads(run_python(IMPORT_ALL))
    assert "profiling.runner" in result["modules"] and "profiling.cli" in result["modules"]
    assert result["banned"] == []


def test_config_results_and_verdict_import_without_torch() -> None:
    assert json.loads(run_python(IMPORT_LIGHT)) == []
