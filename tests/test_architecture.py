"""The import contracts in pyproject.toml hold (import-linter), and they can fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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
    assert "5 kept, 0 broken" in done.stdout


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
