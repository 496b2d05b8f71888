"""Adding a technique is one folder and one registry line: a fake technique
(`tests/fake_technique/`), registered for the test alone, reaches every surface without a
change anywhere else: the library's command line and config, `submit_job`, the new-job
form and the job row, the API's schema and checks, the runner, the advice, the stored
result and the report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import load_command_class

from advisor.jobs.forms import JobForm
from advisor.jobs.profile_config import config_for
from advisor.jobs.request import strict_errors
from profiling import techniques
from profiling.cli import build_parser, config_from_args
from profiling.config import ConfigError, ProfileConfig, Workload
from profiling.profile import Profile
from profiling.runner import run_profile
from tests.advisor.formdata import demo_form
from tests.advisor.pages import report_html
from tests.profiling.tiny import save_tiny_llama_dir

pytestmark = pytest.mark.django_db
FAKE = "tests.fake_technique.technique:FAKE"


@pytest.fixture
def registered():
    with techniques.registered(FAKE):
        yield
    assert techniques.technique("fake") is None  # gone again for every other test


def profile_flags(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["profile", "demo", *argv])


def test_the_library_command_line_takes_its_switch_and_option(registered):
    args = profile_flags(["--experiments", "fake", "--fake-largest", "5"])
    config = config_from_args(args)
    assert config.experiments == ["fake"] and config.fake_largest == 5
    assert config_from_args(profile_flags([])).fake_largest == 3  # the declared default
    with pytest.raises(ConfigError, match="fake_largest: Largest tensors to list must be"):
        config_from_args(profile_flags(["--fake-largest", "21"]))
    again = ProfileConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.to_dict()["fake_largest"] == 5


def test_submit_job_takes_its_flag(registered):
    command = load_command_class("advisor.jobs", "submit_job")
    parser = command.create_parser("manage.py", "submit_job")
    assert parser.parse_args(["--fake-largest", "7"]).fake_largest == 7


def test_the_form_shows_it_and_the_row_keeps_it(registered, cpu_worker, browser):
    html = browser.get("/").content.decode()
    group = html.split('id="fake-fields"')[1].split("</fieldset>")[0]
    assert "<legend>Count parameters (a test&#x27;s technique)</legend>" in group
    assert 'name="run_fake"' in group and 'name="fake_largest"' in group
    form = JobForm(data=demo_form(run_fake="on", fake_largest="4"))
    assert form.is_valid(), form.errors
    job = form.save()
    assert job.options["run_fake"] is True and job.options["fake_largest"] == 4
    config = config_for(job)
    assert config.experiments == ["fake"] and config.fake_largest == 4
    refused = JobForm(data=demo_form(run_fake="on", fake_largest="0"))
    assert "fake_largest" in refused.errors


def test_the_api_describes_and_checks_it(registered, browser):
    document = browser.get("/api/v1/openapi.json").json()
    fields = document["components"]["schemas"]["JobRequest"]["properties"]
    assert fields["run_fake"]["description"] == "Count the parameters"
    assert (fields["fake_largest"]["minimum"], fields["fake_largest"]["maximum"]) == (1, 20)
    assert strict_errors({"run_fake": True, "fake_largest": 5}) == {}
    assert "fake_largest" in strict_errors({"fake_largest": "5"})


def fake_result(**changes: Any) -> dict[str, Any]:
    return {"parameters": 1234, "largest": [["lm_head.weight", 1000]], "finding": "1,234 "
            "parameters", **changes}  # fmt: skip


def test_a_stored_result_with_it_is_read_and_drawn(registered, browser, demo_result):
    result = {**demo_result, "fake": fake_result()}
    result["experiments_run"] = [*demo_result.get("experiments_run", []), "fake"]
    assert Profile.from_dict(result).experiments.fake.parameters == 1234
    html = report_html(browser, result)
    fold = html.split('id="fold-fake"')[1].split("</details>")[0]
    assert "Parameter count" in fold and "1,234 parameters" in fold
    assert "lm_head.weight" in fold and "1,000 elements" in fold


def test_without_its_line_the_same_result_still_loads(browser, demo_result):
    result = {**demo_result, "fake": fake_result(), "fake_largest": 3}
    result["experiments_run"] = [*demo_result.get("experiments_run", []), "fake"]
    assert Profile.from_dict(result).experiments.names() == sorted(
        demo_result.get("experiments_run", [])
    )
    assert 'id="fold-fake"' not in report_html(browser, result)


@pytest.mark.model
def test_the_runner_runs_it_and_the_report_draws_it(registered, browser, tmp_path: Path):
    model = save_tiny_llama_dir(tmp_path / "tiny")
    config = ProfileConfig(
        model=str(model), device="cpu", quick=True, experiments=["fake"], fake_largest=2,
        workload=Workload(prompt_tokens=32, output_tokens=8, concurrency=1),
    )  # fmt: skip
    profile = run_profile(config)
    counted = profile.experiments.fake
    assert counted.parameters == profile.model.num_parameters
    assert len(counted.largest) == 2 and counted.largest[0][1] >= counted.largest[1][1]
    assert "fake" in profile.phase_seconds
    assert not any(m.technique == "fake" for m in profile.advice.experiments_missing)
    stored = json.loads(json.dumps(profile.to_dict()))
    assert stored["experiments_run"] == ["fake"] and Profile.from_dict(stored) == profile
    fold = report_html(browser, stored).split('id="fold-fake"')[1].split("</details>")[0]
    assert f"{counted.parameters:,}" in fold
