"""The API fuzzed from its own OpenAPI document (schemathesis, property-based).

Every generated request, valid or not, must get an answer the document
describes: no 5xx, a documented status and content type, a body matching its
schema, and data that violates the schema refused with a 4xx. The document's
own examples must be accepted.
"""

from __future__ import annotations

import collections

import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode

from advisor.api.openapi import document
from advisor.jobs.models import Job
from advisor.jobs.request import job_request
from advisor.wsgi import application
from tests.advisor.api_checks import CHECKS

pytestmark = pytest.mark.django_db(transaction=True)


EXAMPLES_PER_OPERATION = 40


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda mode: mode.value)
def test_every_answer_is_one_the_document_describes(mode, cpu_worker, redis_url):
    # Hypothesis drives schemathesis's strategies directly: its pytest plugin
    # does not run under this pytest.
    api = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) == 3
    statuses: collections.Counter[int] = collections.Counter()

    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @hypothesis_settings(
            max_examples=EXAMPLES_PER_OPERATION,
            # The same examples on every run, so the suite never fails by chance;
            # bench/fuzz_api.py explores anew on each run, 10,000 requests at a time.
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answers_as_documented(case: schemathesis.Case) -> None:
            # The site gzips what a client accepts; the WSGI client here does not unzip.
            plain = {"Accept-Encoding": "identity"}
            statuses[case.call_and_validate(headers=plain, checks=CHECKS).status_code] += 1

        answers_as_documented()
    print(
        f"fuzz {mode.value}: {statuses.total()} requests, statuses {dict(sorted(statuses.items()))}"
    )
    assert statuses.total() >= len(operations) and not any(code >= 500 for code in statuses)


@pytest.mark.parametrize("example", job_request().model_json_schema()["examples"])
def test_the_documents_examples_are_accepted(example, cpu_worker, redis_url):
    response = Client().post("/api/v1/jobs", example, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Job.objects.filter(share_token=response.json()["token"]).exists()


def test_the_document_states_types_ranges_and_enums():
    request = document("http://testserver/api/v1")["components"]["schemas"]["JobRequest"]
    fields = request["properties"]
    assert request["additionalProperties"] is False
    assert fields["prompt_tokens"]["type"] == "integer"
    assert (fields["prompt_tokens"]["minimum"], fields["prompt_tokens"]["maximum"]) == (
        1,
        1_048_576,
    )
    assert fields["quick"]["type"] == "boolean"
    assert "fp32" in fields["precisions"]["items"]["enum"]
    assert fields["model_source"]["enum"] == list(Job.ModelSource.values)


@pytest.mark.parametrize("field", ["serving_engine", "weights", "kv_cache"])
def test_a_blank_choice_the_document_does_not_list_is_refused(field, redis_url):
    # The form reads a blank as the default (its select never sends one); the document's
    # enum has no blank, so a script's blank is refused, as the document says.
    response = Client().post("/api/v1/jobs", {field: ""}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
