"""While the shared cache's Redis is unreachable, pages still answer: limits count
nothing, the reaper waits, the report is rendered without its cache."""

from __future__ import annotations

import pytest
from django.test import Client

from advisor.jobs.models import Comment, Job
from tests.advisor.pages import csrf_token, make_job, own
from tests.advisor.reports.test_charts import real_demo_profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def dead_cache(settings):
    """The cache at a socket nothing listens on (changing the setting resets the handler)."""
    default = {**settings.CACHES["default"], "LOCATION": "unix:///nonexistent/advisor.sock?db=1"}
    settings.CACHES = {**settings.CACHES, "default": default}


def test_every_page_answers_without_the_cache(dead_cache, cpu_worker):
    job = make_job(state=Job.State.SUCCEEDED, result=real_demo_profile())
    client = Client(enforce_csrf_checks=True)
    own(client, job)  # a browser with a session, which every page reads
    for url in ("/", "/jobs/", f"/jobs/{job.share_token}/", f"/api/v1/jobs/{job.share_token}"):
        assert client.get(url).status_code == 200, url
    page = f"/jobs/{job.share_token}/"
    response = client.post(
        f"/reports/{job.share_token}/comments",
        {"text": "still here", "csrfmiddlewaretoken": csrf_token(client, page)},
    )
    assert response.status_code == 302
    assert Comment.objects.filter(job=job).count() == 1
    health = client.get("/health")
    assert health.status_code == 503 and not health.json()["checks"]["cache"]["ok"]
