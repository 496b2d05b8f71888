"""Goal (issue #41): PostgreSQL stopped `immediate` twice for 5–10 s during >= 20 jobs:
0 lost, 0 run twice at once, 0 re-run in full, 0 answers other than 2xx/4xx/503.

One run, fresh state: a PostgreSQL cluster of its own (tests/pg_cluster.py: its own port
and data directory under a temporary directory, removed at the end), an embedded Redis on
a socket in a temporary directory, the site under gunicorn in the production setting
(ADVISOR_PRODUCTION=1), and one Celery worker with two pool processes and one task per
child, as fleet workers run. Heartbeats, the stale limit and the reaper keep their
production defaults unless the environment sets them (the run prints what it used).
`--jobs` quick demo jobs are submitted over the JSON API at once; each time a further
share of them has ended, the cluster is stopped `immediate` for the next of `--down-s`
seconds and started again, so the outages meet jobs running and jobs queued. A poller
asks pages and API endpoints for their status throughout, and posts a job now and then
while the database is away (one that is answered 201 joins the batch).

Counted at the end: jobs submitted, succeeded, failed, lost (not ended by `--timeout-s`);
attempts (the row's counter); profiles run to the end per job, from the worker's log (one
line per outcome the worker computed, written or not: two for one job is a re-run in
full); attempts of one job that overlapped in time (its "claimed" line to its task's end
line, from the log); what met the outage in the worker (its warnings, counted); every
answer's status during the outages and outside them, and 503s without Retry-After. A job
failed counts against the goal too: an outage should cost a wait, never a job. The exit
status is 0 when the goal is met.

    python bench/db_outage.py [--jobs 24] [--outages 2] [--down-s 5,10] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import load  # noqa: E402  (bench/load.py: the production environment)

from advisor import embedded_redis  # noqa: E402  (imports no Django)
from tests.pg_cluster import Cluster, private_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Quick demo jobs with a small workload, as the chaos tests submit them.
JOB = {"model_name": "demo", "quick": True, "prompt_tokens": 32, "output_tokens": 8,
       "concurrency": 2}  # fmt: skip
# What the run's figures depend on, printed with them, as the worker's settings read them.
SETTINGS = ("ADVISOR_HEARTBEAT_S", "ADVISOR_HEARTBEAT_STALE_S", "ADVISOR_REAP_EVERY_S",
            "ADVISOR_REDISPATCH_GRACE_S", "ADVISOR_MAX_ATTEMPTS")  # fmt: skip
READ_SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings; "
    f"print(json.dumps({{name: getattr(settings, name) for name in {SETTINGS!r}}}))"
)
JOBS_TABLE = "jobs_job"  # the Job model's table (Django's default name)
POLL_EVERY_S = 0.1
HTTP_TIMEOUT_S = 30


# --- The stack -----------------------------------------------------------------------


@dataclass
class Stack:
    cluster: Cluster
    port: int
    worker_log: Path
    settings: dict[str, int]

    def request(self, method: str, path: str, body: dict | None = None) -> Answer:
        """One request on a connection of its own, as a script's client sends it."""
        headers = {"Host": "127.0.0.1"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body), "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        sent = time.monotonic()
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            text = response.read()
            retry_after = response.getheader("Retry-After")
            body_text = text[:2000].decode(errors="replace")
            return Answer(method, path, sent, time.monotonic(), response.status, retry_after,
                          body_text)  # fmt: skip
        except (OSError, http.client.HTTPException) as exc:
            return Answer(method, path, sent, time.monotonic(), None, None, type(exc).__name__)
        finally:
            conn.close()


@contextlib.contextmanager
def stack(tmp: Path, site_workers: int) -> Iterator[Stack]:
    """Cluster, Redis, gunicorn and one worker, up; all stopped on the way out."""
    with private_cluster() as cluster:
        env = load.environment(tmp, cluster.url)
        env.update(
            ADVISOR_DEMO_DIR=os.environ.get("ADVISOR_DEMO_DIR") or str(ROOT / "var" / "demo"),
            ADVISOR_SUBMIT_RATE="1000000/h", ADVISOR_WORKER_GPUS="", CELERY_SKIP_CHECKS="1",
        )  # fmt: skip
        for name in ("ADVISOR_DB_NAME", "ADVISOR_TEST_DB_NAME", "ADVISOR_CACHE_URL"):
            env.pop(name, None)
        run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True, "text": True}
        print("building the demo model if needed (minutes, the first time)", flush=True)
        subprocess.run([sys.executable, "-c", "from profiling.model.demo import ensure_demo; "
                        "ensure_demo('demo')"], **run)  # fmt: skip
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], **run)
        read = subprocess.run([sys.executable, "-c", READ_SETTINGS], **run)
        settings = json.loads(read.stdout.strip().splitlines()[-1])
        redis_socket = tmp / "redis.sock"  # the site's and worker's Redis (ADVISOR_VAR_DIR)
        embedded_redis.ensure(redis_socket)
        port, worker_log = load.free_port(), tmp / "worker.log"
        server = start_site(env, port, site_workers, tmp / "site.log")
        worker = start_worker(env, worker_log)
        try:
            found = Stack(cluster, port, worker_log, settings)
            wait_for_worker(found, worker)
            yield found
        finally:
            stop_group(worker)
            server.terminate()
            server.wait(15)
            embedded_redis.stop(redis_socket)


def start_site(env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen:
    """gunicorn as bench/load.py starts it, its log (a traceback per 503) in a file."""
    argv = [sys.executable, "-m", "gunicorn", "advisor.wsgi", "-w", str(workers),
            "-b", f"127.0.0.1:{port}", "--log-level", "warning"]  # fmt: skip
    with open(log, "wb") as out:
        server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return server
        time.sleep(0.2)
    server.kill()
    raise SystemExit(f"gunicorn did not start:\n{log.read_text()[-3000:]}")


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "celery", "-A", "advisor", "worker", "-Q", "default",
            "--concurrency", "2", "--pool", "prefork", "--max-tasks-per-child", "1",
            "-n", "db-outage@%h", "-l", "info", "--without-gossip", "--without-mingle"]  # fmt: skip
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def wait_for_worker(site: Stack, worker: subprocess.Popen, timeout_s: float = 300) -> None:
    """Until /health lists the worker (its announcer wrote its row)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited:\n{site.worker_log.read_text()[-3000:]}")
        answer = site.request("GET", "/health")
        if answer.status == 200 and json.loads(answer.body).get("workers"):
            return
        time.sleep(0.5)
    raise SystemExit(f"the worker did not announce itself:\n{site.worker_log.read_text()[-3000:]}")


def stop_group(proc: subprocess.Popen) -> None:
    """Warm shutdown of a process started in a session of its own, then SIGKILL the rest."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# --- Requests --------------------------------------------------------------------------


@dataclass
class Answer:
    method: str
    path: str
    sent: float  # time.monotonic()
    done: float
    status: int | None  # None: no HTTP answer at all (refused, reset, timed out)
    retry_after: str | None
    body: str


@dataclass
class Outage:
    down_s: float
    began: float = 0.0  # time.monotonic() when the stop was issued
    ended: float = 0.0  # when the cluster accepted connections again
    final_jobs_before: int = 0

    def overlaps(self, answer: Answer) -> bool:
        return answer.sent <= self.ended and answer.done >= self.began


@dataclass
class Batch:
    """The jobs this run submitted (share tokens) and the poller's answers."""

    tokens: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    away: threading.Event = field(default_factory=threading.Event)  # the database is down
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_token(self, answer: Answer) -> None:
        if answer.status == 201:
            with self.lock:
                self.tokens.append(json.loads(answer.body)["token"])


def submit(site: Stack, batch: Batch) -> None:
    """One job over the API, again after each 503 or 429 as Retry-After asks."""
    while True:
        answer = site.request("POST", "/api/v1/jobs", JOB)
        batch.answers.append(answer)
        if answer.status == 201:
            batch.add_token(answer)
            return
        if answer.status not in (429, 503):
            raise SystemExit(f"submit answered {answer.status}: {answer.body[:500]}")
        time.sleep(float(answer.retry_after or 1))


def poll(site: Stack, batch: Batch, stop: threading.Event) -> None:
    """Pages and API endpoints in turn, every answer kept; a submit now and then while the
    database is away (the answer should be 503; a 201 joins the batch)."""
    round_no = 0
    while not stop.is_set():
        round_no += 1
        with batch.lock:
            token = batch.tokens[round_no % len(batch.tokens)]
        paths = ["/", "/jobs/", "/health", f"/jobs/{token}/", f"/jobs/{token}/status",
                 f"/api/v1/jobs/{token}", f"/api/v1/jobs/{token}/result"]  # fmt: skip
        for path in paths:
            batch.answers.append(site.request("GET", path))
            time.sleep(POLL_EVERY_S)
        if batch.away.is_set():
            answer = site.request("POST", "/api/v1/jobs", JOB)
            batch.answers.append(answer)
            batch.add_token(answer)


def states(cluster: Cluster, tokens: list[str]) -> dict[str, dict] | None:
    """Each job's row as the database holds it; None while the database is away."""
    import psycopg

    query = (
        f"SELECT share_token, state, attempts, error FROM {JOBS_TABLE} WHERE share_token = ANY(%s)"
    )
    try:
        with psycopg.connect(cluster.url, connect_timeout=2) as conn:
            rows = conn.execute(query, (tokens,)).fetchall()
    except psycopg.OperationalError:
        return None
    return {t: {"state": s, "attempts": a, "error": e} for t, s, a, e in rows}


def final_count(cluster: Cluster, tokens: list[str]) -> int | None:
    found = states(cluster, tokens)
    if found is None:
        return None
    return sum(row["state"] in ("succeeded", "failed", "cancelled") for row in found.values())


# --- The worker's log ------------------------------------------------------------------

LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/([\w-]+)\] (.*)$")
CLAIMED = re.compile(r"^job (\d+): claimed, attempt (\d+)")
OUTCOME = re.compile(r"^job (\d+): (succeeded|failed|stopped)( \(not written)?")
TASK_END = re.compile(r"^Task advisor\.jobs\.tasks\.run_job\[advisor-job-(\d+)-\w+\] "
                      r"(succeeded|raised|failed)")  # fmt: skip
# advisor.jobs.tasks.retried: "job 7: the outcome not read or written yet (…): again in 1.0 s"
RETRIED = re.compile(r"^job \d+: (.+?) not read or written yet")


@dataclass
class Attempt:
    job: int
    process: str
    claimed: datetime
    ended: datetime | None = None
    outcome: str = ""  # what the profile came to; "" when the attempt never got that far
    written: bool = False


def attempts_in_log(text: str) -> tuple[list[Attempt], collections.Counter[str]]:
    """Every claim in the worker's log with its outcome and task end, and counts of what
    met the outage: deliveries that raised, beats not written, reads and writes retried
    (claim, row, config, outcome), attempts that gave up past their lease."""
    attempts: list[Attempt] = []
    current: dict[str, Attempt] = {}  # pool process → the attempt it runs
    met: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        found = LOG_LINE.match(line)
        if not found:
            continue
        when = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f")
        process, message = found[2], found[3]
        if claimed := CLAIMED.match(message):
            current[process] = Attempt(int(claimed[1]), process, when)
            attempts.append(current[process])
        elif (outcome := OUTCOME.match(message)) and process in current:
            current[process].outcome, current[process].written = outcome[2], not outcome[3]
        elif ended := TASK_END.match(message):
            if ended[2] != "succeeded":
                met["deliveries that raised"] += 1
            if process in current and current[process].job == int(ended[1]):
                current.pop(process).ended = when
        elif "heartbeat not written" in message:
            met["heartbeats not written"] += 1
        elif retried := RETRIED.match(message):
            met[f"retries of {retried[1]}"] += 1
        elif "stayed away past the lease" in message:
            met["attempts that gave up"] += 1
    return attempts, met


def overlapping(attempts: list[Attempt]) -> int:
    """Jobs with two attempts alive at once (an attempt with no end is alive to the last)."""
    last = max((a.ended or a.claimed for a in attempts), default=None)
    by_job: dict[int, list[Attempt]] = collections.defaultdict(list)
    for attempt in attempts:
        by_job[attempt.job].append(attempt)
    twice = 0
    for runs in by_job.values():
        spans = sorted((a.claimed, a.ended or last) for a in runs)
        twice += any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    return twice


# --- The run ---------------------------------------------------------------------------


@dataclass
class Finished:
    """What a run leaves to count."""

    batch: Batch
    outages: list[Outage]
    rows: dict[str, dict]  # share token → the row's state, attempts, error
    worker_log: str
    wall_s: float
    settings: dict[str, int]


def run(args: argparse.Namespace, tmp: Path) -> Finished:
    downs = [float(s) for s in args.down_s.split(",")]
    outages = [Outage(downs[i % len(downs)]) for i in range(args.outages)]
    batch = Batch()
    with stack(tmp, args.site_workers) as site:
        begun = time.monotonic()
        for _ in range(args.jobs):
            submit(site, batch)
        print(f"{args.jobs} jobs submitted in {time.monotonic() - begun:.1f} s", flush=True)
        stop = threading.Event()
        poller = threading.Thread(target=poll, args=(site, batch, stop), daemon=True)
        poller.start()
        deadline = begun + args.timeout_s
        try:
            for number, outage in enumerate(outages, 1):
                # Each outage once a further share of the batch has ended: jobs still run
                # and queue, the last outage included.
                wanted = math.ceil(args.jobs * number / (len(outages) + 1))
                while (final_count(site.cluster, batch.tokens) or 0) < wanted:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                outage.final_jobs_before = final_count(site.cluster, batch.tokens) or 0
                outage.began = time.monotonic()
                batch.away.set()
                site.cluster.stop_immediate()
                print(f"outage {number}: PostgreSQL stopped with {outage.final_jobs_before} "
                      f"jobs ended; {outage.down_s:g} s down", flush=True)  # fmt: skip
                time.sleep(max(0.0, outage.began + outage.down_s - time.monotonic()))
                site.cluster.start()
                outage.ended = time.monotonic()
                batch.away.clear()
                print(f"outage {number}: back after {outage.ended - outage.began:.1f} s",
                      flush=True)  # fmt: skip
            while time.monotonic() < deadline:
                with batch.lock:
                    tokens = list(batch.tokens)
                if final_count(site.cluster, tokens) == len(tokens):
                    break
                time.sleep(1.0)
        finally:
            stop.set()
            poller.join(HTTP_TIMEOUT_S + 5)
        return Finished(
            batch, outages, states(site.cluster, batch.tokens) or {},
            site.worker_log.read_text(errors="replace"), time.monotonic() - begun, site.settings,
        )  # fmt: skip


def summarize(command: str, finished: Finished) -> dict:
    """Every figure of the run, as printed and as written by --json."""
    batch, outages, rows = finished.batch, finished.outages, finished.rows
    attempts, met = attempts_in_log(finished.worker_log)
    states_seen = collections.Counter(row["state"] for row in rows.values())
    lost = len(batch.tokens) - sum(states_seen[s] for s in ("succeeded", "failed", "cancelled"))
    ran_to_end = collections.Counter(a.job for a in attempts if a.outcome == "succeeded")
    histogram: dict[str, collections.Counter[str]] = {"outage": collections.Counter(),
                                                     "up": collections.Counter()}  # fmt: skip
    unexpected: list[str] = []
    no_retry_after: collections.Counter[str] = collections.Counter()  # by first path part
    for answer in batch.answers:
        phase = "outage" if any(o.overlaps(answer) for o in outages) else "up"
        status = str(answer.status) if answer.status is not None else f"none ({answer.body})"
        histogram[phase][status] += 1
        if answer.status == 503 and not answer.retry_after:
            no_retry_after[answer.path.split("/")[1] or "/"] += 1
        if answer.status is None or answer.status >= 500 and answer.status != 503:
            unexpected.append(f"{phase} {answer.method} {answer.path} → {status}: "
                              f"{answer.body[:200]}")  # fmt: skip
    return {
        "command": command,
        "settings": finished.settings,
        "wall_s": round(finished.wall_s, 1),
        "outages": [
            {"down_s": round(o.ended - o.began, 1), "jobs_ended_before": o.final_jobs_before}
            for o in outages
        ],
        "jobs": {
            "submitted": len(batch.tokens),
            "succeeded": states_seen["succeeded"],
            "failed": states_seen["failed"],
            "cancelled": states_seen["cancelled"],
            "lost": lost,
            "attempts": sum(row["attempts"] for row in rows.values()),
            "claims_in_log": len(attempts),
            "profiles_run_to_the_end": sum(ran_to_end.values()),
            "re_run_in_full": sum(n - 1 for n in ran_to_end.values() if n > 1),
            "run_twice_at_once": overlapping(attempts),
        },
        "met_the_outage": dict(met),
        "failed_errors": sorted({row["error"][:200] for row in rows.values() if row["error"]}),
        "answers": {phase: dict(sorted(c.items())) for phase, c in histogram.items()},
        "answers_503_without_retry_after": dict(no_retry_after),
        "unexpected_answers": unexpected[:20],
        "attempt_log": [
            asdict(a) | {"claimed": str(a.claimed), "ended": str(a.ended)} for a in attempts
        ],
    }


def verdict(found: dict) -> list[str]:
    """What missed the goal; [] when it was met."""
    jobs, missed = found["jobs"], []
    for name in ("lost", "failed", "re_run_in_full", "run_twice_at_once"):
        if jobs[name]:
            missed.append(f"{name.replace('_', ' ')}: {jobs[name]}")
    if found["unexpected_answers"]:
        missed.append(f"{len(found['unexpected_answers'])} answers other than 2xx/4xx/503")
    if without := sum(found["answers_503_without_retry_after"].values()):
        missed.append(f"{without} × 503 without Retry-After")
    return missed


def report(found: dict) -> None:
    jobs = found["jobs"]
    print(f"\n{found['command']}  ({os.cpu_count()} cores, {found['wall_s']:.0f} s)")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in found["settings"].items()))
    print("outages: " + "; ".join(f"{o['down_s']:g} s down after {o['jobs_ended_before']} jobs "
                                  "ended" for o in found["outages"]))  # fmt: skip
    print(
        f"jobs: submitted={jobs['submitted']} succeeded={jobs['succeeded']} "
        f"failed={jobs['failed']} lost={jobs['lost']} attempts={jobs['attempts']}"
    )
    print(
        f"profiles run to the end={jobs['profiles_run_to_the_end']} "
        f"re-run in full={jobs['re_run_in_full']} run twice at once={jobs['run_twice_at_once']}"
    )
    print("met the outage: " + (", ".join(f"{k}={v}" for k, v in found["met_the_outage"].items())
                                or "nothing logged"))  # fmt: skip
    for phase, counts in found["answers"].items():
        print(
            f"answers while {'the database was away' if phase == 'outage' else 'it was up'}: "
            + ", ".join(f"{status}×{n}" for status, n in counts.items())
        )
    print(
        "503 without Retry-After: "
        + (
            ", ".join(
                f"/{path}×{n}" for path, n in found["answers_503_without_retry_after"].items()
            )
            or "none"
        )
    )
    for line in found["unexpected_answers"] + found["failed_errors"]:
        print("  " + line)
    missed = verdict(found)
    print("goal: " + ("met" if not missed else "NOT met (" + "; ".join(missed) + ")"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--outages", type=int, default=2)
    parser.add_argument("--down-s", default="5,10",
                        help="seconds down, one per outage in turn (comma-separated)")  # fmt: skip
    parser.add_argument("--site-workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--timeout-s", type=float, default=1800,
                        help="from the first submit: a job not ended by then is lost")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--logs", type=Path, help="keep the worker's and the site's logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-dbout-", dir="/tmp") as tmp:
        try:
            found = summarize(" ".join(["python", *sys.argv]), run(args, Path(tmp)))
        finally:
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    shutil.copy(log, args.logs / log.name)
    report(found)
    if args.json:
        args.json.write_text(json.dumps(found, indent=2, default=str))
    return 0 if not verdict(found) else 1


if __name__ == "__main__":
    sys.exit(main())
