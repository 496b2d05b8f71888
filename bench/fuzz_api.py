"""Goal: >= 10,000 generated API requests, 0 answers of 5xx.

The suite fuzzes the API with a few dozen requests per operation (tests/advisor/
test_api_fuzz.py); this soak runs the same checks at scale against the production
server setting: fresh state as bench/load.py makes it (a temporary SQLite database, an
embedded Redis, gunicorn with ADVISOR_PRODUCTION=1), the submit limit raised so that
valid submissions reach the database and the broker instead of a 429, and schemathesis
generating requests from the site's own OpenAPI document, positive and negative, until
`--requests` have been answered. Every answer is checked as the suite checks it (no
5xx, a documented status, content type, headers and body, invalid data refused).

    python bench/fuzz_api.py [--requests 10000] [--workers 2]
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import load  # noqa: E402  (bench/load.py: the same fresh site)
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

from tests.advisor.api_checks import CHECKS  # noqa: E402  (the suite's own checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-fuzz-") as tmp:
        env = load.environment(Path(tmp), None)
        env["ADVISOR_SUBMIT_RATE"] = "1000000/h"
        load.prepare(env)
        port = load.free_port()
        server = load.start_server(env, port, args.workers, Path(tmp) / "access.log")
        try:
            return fuzz(f"http://127.0.0.1:{port}", args.requests)
        finally:
            server.terminate()
            server.wait(15)


def fuzz(base: str, wanted: int) -> int:
    api = schemathesis.openapi.from_url(f"{base}/api/v1/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    modes = list(GenerationMode)
    per_run = math.ceil(wanted / (len(operations) * len(modes)))
    statuses: collections.Counter[int] = collections.Counter()
    failures: list[str] = []
    start = time.perf_counter()
    rounds = 0
    # A small input space runs out of new cases before max_examples: go round again.
    while statuses.total() + len(failures) < wanted and rounds < 20:
        rounds += 1
        run_round(operations, modes, per_run, statuses, failures)
    seconds = time.perf_counter() - start
    server_errors = sum(n for code, n in statuses.items() if code >= 500)
    print(f"\n{statuses.total():,} requests answered in {seconds:.0f} s ({rounds} rounds); "
          f"statuses {dict(sorted(statuses.items()))}; {len(failures)} failed a check; "
          f"{server_errors} answered 5xx")  # fmt: skip
    for failure in failures[:10]:
        print("  " + failure)
    ok = statuses.total() + len(failures) >= wanted and not failures and not server_errors
    return 0 if ok else 1


def run_round(
    operations: list,
    modes: list,
    per_run: int,
    statuses: collections.Counter[int],
    failures: list[str],
) -> None:
    for mode in modes:
        for operation in operations:
            answer_some(operation, mode, per_run, statuses, failures)
            print(f"{mode.value:9s} {operation.label}: {statuses.total():,} answered so far",
                  flush=True)  # fmt: skip


def answer_some(
    operation: object,
    mode: GenerationMode,
    examples: int,
    statuses: collections.Counter[int],
    failures: list[str],
) -> None:
    where = f"{operation.label} ({mode.value})"  # type: ignore[attr-defined]

    @given(case=operation.as_strategy(generation_mode=mode))  # type: ignore[attr-defined]
    @hypothesis_settings(max_examples=examples, deadline=None, database=None,
                         suppress_health_check=list(HealthCheck))  # fmt: skip
    def answers_as_documented(case: schemathesis.Case) -> None:
        try:
            response = case.call_and_validate(checks=CHECKS)
        except Exception as exc:  # a failed check: counted, the soak goes on
            failures.append(f"{where}: {exc}"[:300])
            return
        statuses[response.status_code] += 1

    answers_as_documented()


if __name__ == "__main__":
    sys.exit(main())
