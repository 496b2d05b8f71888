"""What every fuzzed API answer is checked against (schemathesis): shared by the suite's
fuzz (tests/advisor/api/test_api_fuzz.py) and its soak at scale (bench/fuzz_api.py)."""

from __future__ import annotations

from schemathesis import checks

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    checks.negative_data_rejection,
]
