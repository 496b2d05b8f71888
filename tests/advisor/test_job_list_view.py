"""Recent jobs: the jobs this browser session submitted."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.advisor.pages import (
    make_job,
    own,
)

pytestmark = pytest.mark.django_db


def test_recent_jobs_has_a_helpful_empty_state(browser):
    html = browser.get(reverse("jobs:list")).content.decode()
    assert "Nothing profiled from this browser yet" in html
    assert reverse("jobs:new") in html


def test_recent_jobs_lists_only_this_sessions_jobs(browser):
    mine, theirs = make_job(model_name="demo"), make_job(model_name="demo-draft")
    own(browser, mine)
    html = browser.get(reverse("jobs:list")).content.decode()
    assert mine.share_token in html and theirs.share_token not in html
