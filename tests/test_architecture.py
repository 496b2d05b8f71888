"""The import contracts in pyproject.toml hold (import-linter), and they can fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"]


def lint(*args: str, cwd: Path = ROOT, extra_path: Path | None = None):
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return subprocess.run(
        [*LINT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_projects_import_contracts_are_kept():
    done = lint()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "6 kept, 0 broken" in done.stdout


def test_a_new_circle_breaks_the_contract(tmp_path):
    package = tmp_path / "circle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circle import b\n")
    (package / "b.py").write_text("from circle import a\n")
    config = tmp_path / "contracts.toml"
    config.write_text(
        textwrap.dedent(
            """
            [tool.importlinter]
            root_packages = ["circle"]

            [[tool.importlinter.contracts]]
            name = "No circles"
            type = "acyclic_siblings"
            ancestors = ["circle"]
            """
        )
    )
    done = lint(str(config), cwd=tmp_path, extra_path=tmp_path)
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout


def test_a_measurement_that_imports_the_projection_breaks_the_layers(tmp_path):
    """The project's own layers contract, run on a copy of the library with one wrong import."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(
        c
        for c in contracts["contracts"]
        if c["type"] == "layers" and c.get("containers") == ["profiling"]
    )
    copy = tmp_path / "profiling"
    shutil.copytree(ROOT / "profiling", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "measure" / "wrong.py").write_text("from profiling.projection import estimate\n")
    config = tmp_path / "contracts.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [tool.importlinter]
            root_packages = ["profiling"]

            [[tool.importlinter.contracts]]
            name = {layers["name"]!r}
            type = "layers"
            containers = ["profiling"]
            layers = {layers["layers"]!r}
            """
        )
    )
    done = lint(str(config), cwd=tmp_path, extra_path=tmp_path)
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout
    assert "profiling.measure.wrong -> profiling.projection.estimate" in done.stdout
