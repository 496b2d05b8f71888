"""scripts/test's exit status: 0 when every tier it ran passed, 1 naming the tiers that failed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("ADVISOR_TEST_POSTGRES_URL", None)
    # Its own var dir: the script empties var/junit, which the running suite writes to.
    env["ADVISOR_VAR_DIR"] = str(tmp_path)
    env.pop("ADVISOR_DEMO_DIR", None)
    return subprocess.run(
        [str(ROOT / "scripts" / "test"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def test_a_run_whose_tiers_all_passed_exits_zero(tmp_path):
    # The PostgreSQL tier without its URL is skipped: nothing failed, so no *.failed mark.
    done = run_script(tmp_path, "--tier", "postgres")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "failed tiers" not in done.stdout


def test_a_failed_tier_is_named_and_the_run_exits_one(tmp_path):
    done = run_script(tmp_path, "--tier", "model", "--no-such-pytest-flag")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "failed tiers: model"
