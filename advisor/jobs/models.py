"""The job row is the truth of a profiling job; Worker rows say who is connected."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F
from django.utils import timezone

from advisor.jobs.stored_options import options_problem, stored_names, stored_option


def new_share_token() -> str:
    """128 random bits, URL-safe: the permalink id of a report."""
    return secrets.token_urlsafe(16)


def new_lease() -> str:
    """A fencing token: the attempt that holds it may write the row, no other."""
    return secrets.token_hex(8)


class JobQuerySet(models.QuerySet):
    def active(self) -> JobQuerySet:
        return self.filter(state__in=Job.ACTIVE_STATES)

    def listed(self) -> JobQuerySet:
        """Rows for a list of jobs: without the stored result or error, which lists never show."""
        return self.defer("result", "error")

    def stale(self, now=None, after: timedelta | None = None) -> JobQuerySet:
        """Running jobs whose worker stopped beating (crashed or lost)."""
        from django.conf import settings

        now = now or timezone.now()
        after = after or timedelta(seconds=settings.ADVISOR_HEARTBEAT_STALE_S)
        return self.filter(state=Job.State.RUNNING, heartbeat_at__lt=now - after)

    def published_before(self, moment) -> JobQuerySet:
        """Queued jobs published before `moment` (their message may since have been lost)."""
        return self.filter(state=Job.State.QUEUED, dispatched_at__lt=moment)

    def undispatched(self, now=None, after: timedelta = timedelta(minutes=1)) -> JobQuerySet:
        """Queued jobs whose message was never published (the broker was down, or a crash)."""
        now = now or timezone.now()
        return self.filter(
            state=Job.State.QUEUED, dispatched_at__isnull=True, created_at__lt=now - after
        )

    # Transitions. Each is one conditional UPDATE, so two processes racing on
    # a row (duplicate deliveries, a cancel, the reaper) can never both win.

    def claim(self, pk: int, worker: str) -> str:
        """QUEUED -> RUNNING for exactly one delivery: the lease of this attempt, or "".

        "" means taken, cancelled or gone. Every later write of the attempt
        (beat, progress, result, final state) is conditional on the lease, so
        an attempt the reaper gave away can never write over its successor.
        """
        now, lease = timezone.now(), new_lease()
        claimed = self.filter(pk=pk, state=Job.State.QUEUED).update(
            state=Job.State.RUNNING,
            lease=lease,
            attempts=F("attempts") + 1,
            started_at=now,
            heartbeat_at=now,
            finished_at=None,
            worker_host=worker[:255],
            child_pid=None,
            progress=0.0,
            phase="",
            message="starting",
            error="",
        )
        return lease if claimed else ""

    def holding(self, pk: int, lease: str) -> JobQuerySet:
        """The row while the attempt holding `lease` owns it (empty once it lost it)."""
        return self.filter(pk=pk, state=Job.State.RUNNING, lease=lease).exclude(lease="")

    def beat(self, pk: int, lease: str, **fields) -> bool:
        """Heartbeat (and progress) of a running attempt; False: stop, it was cancelled or lost."""
        live = self.holding(pk, lease).filter(cancel_requested=False)
        return bool(live.update(heartbeat_at=timezone.now(), **fields))

    def finish(self, pk: int, lease: str, state: str, **fields) -> bool:
        """RUNNING -> a final state, by the attempt holding the lease only."""
        running = self.holding(pk, lease)
        if state == Job.State.CANCELLED:
            running = running.filter(cancel_requested=True)
        return bool(
            running.update(state=state, finished_at=timezone.now(), child_pid=None, **fields)
        )

    def cancel(self, pk: int) -> bool:
        """QUEUED -> CANCELLED at once; RUNNING -> cancel_requested (the task stops it)."""
        queued = self.filter(pk=pk, state=Job.State.QUEUED)
        if queued.update(
            state=Job.State.CANCELLED, finished_at=timezone.now(), message="cancelled"
        ):
            return True
        running = self.filter(pk=pk, state=Job.State.RUNNING, cancel_requested=False)
        return bool(running.update(cancel_requested=True, message="cancelling"))


class Job(models.Model):
    """One profiling request and its life.

    Transitions (anything else is refused by the conditional updates):
        QUEUED  -> RUNNING    the task claims the row (only one delivery wins)
        QUEUED  -> CANCELLED  the user cancels before a worker takes it
        RUNNING -> SUCCEEDED  the child process wrote a result
        RUNNING -> FAILED     child crashed/killed/timed out, bad model, or
                              the reaper found the heartbeat stale too often
        RUNNING -> CANCELLED  the user asked; the task kills the child (or the
                              reaper ends it, if its worker was lost)
        RUNNING -> QUEUED     the reaper re-dispatches a job whose worker was
                              lost, at most ADVISOR_MAX_ATTEMPTS times in all
    A queued job whose message the broker lost is published again (it stays
    QUEUED; a duplicate message is harmless, as only one claim can win).

    Each claim takes a fresh `lease`; every write of that attempt names it,
    so once the reaper re-queues a job, the old attempt's writes match no row.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)
    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    class ModelSource(models.TextChoices):
        DEMO = "demo", "Built-in demo model"
        HUB = "hub", "Hugging Face Hub id"
        LOCAL = "local", "Local directory on the worker"
        CONFIG = "config", "Config only (random weights)"

    class Origin(models.TextChoices):
        FORM = "form", "the new-job form"
        API = "api", "the JSON API"
        CLI = "cli", "the command line (submit_job)"

    class Bottleneck(models.TextChoices):
        MEMORY = "memory", "Save model memory"
        PROMPT = "prompt", "Reuse prompt work"
        GENERATION = "generation", "Speed up token generation"
        DEVICES = "devices", "Split work across devices"
        UNSURE = "unsure", "Not sure"

    share_token = models.CharField(
        max_length=32, unique=True, default=new_share_token, editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Where the request came from; Recent jobs lists scripts' jobs beside a browser's own.
    origin = models.CharField(
        max_length=8, choices=Origin.choices, default=Origin.FORM, db_index=True
    )

    # What to profile.
    model_source = models.CharField(
        max_length=16, choices=ModelSource.choices, default=ModelSource.DEMO
    )
    model_name = models.CharField(max_length=512, help_text="Hub id, local directory, or demo name")
    dtype = models.CharField(max_length=16, default="auto")
    quick = models.BooleanField(default=True, help_text="Small sweeps: seconds instead of minutes")
    # Deployment target (catalog key, empty = any) and where the job runs.
    gpu_kind = models.CharField(max_length=32, blank=True)
    queue = models.CharField(max_length=64, default="default")
    stated_bottleneck = models.CharField(
        max_length=16, choices=Bottleneck.choices, default=Bottleneck.UNSURE
    )
    notes = models.TextField(blank=True, max_length=4000)
    # Every declared option (profiling.options: workload, GPU count, each
    # technique's settings) and the optional experiments' switches, as one
    # validated JSON value in the library's types: {"prompt_tokens": 512,
    # "spec_ks": [1, 2, 4], "precisions": ["fp32", "int8"], "run_speculative":
    # true, ...}. A missing key is the option's default. Each is also an
    # attribute (`job.prompt_tokens`), and `Job(prompt_tokens=...)` sets it.
    # Columns remain only for what lists show, filter or search.
    options = models.JSONField(default=dict, blank=True)

    # Life of the job.
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.QUEUED, db_index=True
    )
    progress = models.FloatField(default=0.0)  # 0..1
    phase = models.CharField(max_length=64, blank=True)
    message = models.CharField(max_length=512, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # The fencing token of the attempt that holds the row (blank: none does).
    lease = models.CharField(max_length=32, blank=True)
    cancel_requested = models.BooleanField(default=False)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_host = models.CharField(max_length=255, blank=True)
    child_pid = models.IntegerField(null=True, blank=True)
    device = models.CharField(max_length=255, blank=True)
    error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.model_name} ({self.get_state_display()})"

    def clean(self) -> None:
        problem = options_problem(self.options)
        if problem is not None:
            raise ValidationError({"options": problem})

    def save(self, *args, **kwargs) -> None:
        # Every writer (form, API, command, admin, tests) stores options that
        # the worker can read: a wrong one fails here, never in a job child.
        problem = options_problem(self.options)
        if problem is not None:
            raise ValueError(f"job options: {problem}")
        super().save(*args, **kwargs)

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    def sample_info(self) -> PromptSample | None:
        """The prompt sample's name, count and size, without loading its prompts."""
        if self.pk is None:
            return None
        return PromptSample.objects.defer("prompts").filter(job=self).first()

    def uploads(self) -> list[Upload]:
        """The files sent with the job (prompt sample, conversations): their names, sizes
        and counts, without loading their contents."""
        if self.pk is None:
            return []
        found = (
            self.sample_info(),
            ConversationFile.objects.defer("text").filter(job=self).first(),
        )
        return [upload for upload in found if upload is not None]

    def conversations(self) -> tuple[str, str]:
        """(the uploaded conversation file's text, its name); ("", "") without one."""
        try:
            found = self.conversation_file
        except ConversationFile.DoesNotExist:
            return "", ""
        return found.text, found.filename

    def sample_prompts(self) -> list[str]:
        """The prompt sample's prompts in file order; [] when the job has none."""
        try:
            return list(self.prompt_sample.prompts)
        except PromptSample.DoesNotExist:
            return []


# `job.<option>` for the options and switches known when the site starts; code that serves
# every registered technique reads them with `stored_options.read_option`.
for _name in stored_names():
    setattr(Job, _name, stored_option(_name))


class Upload(models.Model):
    """What the site keeps of every file a user sends with a job: its name (shown only),
    size and digest; the job's own row holds the checked contents."""

    LABEL = "File"  # what the job page calls it
    ANCHOR = "file"  # its element id on the job page

    filename = models.CharField(max_length=255, blank=True)
    size_bytes = models.PositiveIntegerField()  # of the uploaded file
    sha256 = models.CharField(max_length=64)  # of the uploaded file
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def holds(self) -> list[tuple[int, str]]:
        """What the file was read as: (count, singular noun) pairs, (2, "prompt")."""
        return []


class PromptSample(Upload):
    """The user's own prompts for the prefix-caching experiment, parsed at upload.

    A row of its own, saved in the job's transaction, so a worker on another
    machine reads it from the database like the job; it can hold up to
    PROMPT_SAMPLE_MAX_PROMPTS prompts and PROMPT_SAMPLE_MAX_BYTES of text, so
    pages and the admin show only its name, count and size (`Job.sample_info`).
    """

    LABEL, ANCHOR = "Prompt sample", "prompt-sample"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="prompt_sample")
    prompts = models.JSONField(default=list)  # list[str], in file order
    prompt_count = models.PositiveIntegerField()

    def holds(self) -> list[tuple[int, str]]:
        return [(self.prompt_count, "prompt")]

    def __str__(self) -> str:
        return f"{self.filename or 'prompt sample'} ({self.prompt_count:,} prompts)"


class ConversationFile(Upload):
    """The user's conversations (JSON Lines, OpenAI chat or ShareGPT), checked at upload
    by the library's parser and kept as the file's text, up to CONVERSATIONS_MAX_BYTES,
    for the worker to parse again and tokenize with the model's own tokenizer, as
    `estimate --conversations` does. Pages show its name, counts and size only."""

    LABEL, ANCHOR = "Conversations", "conversation-file"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="conversation_file")
    text = models.TextField()  # the file, decoded as UTF-8
    conversation_count = models.PositiveIntegerField()
    # The turns the replay takes (`ChatRecord.turns`); null: a file over MAX_TURNS that
    # was kept before the cap, which the worker refuses.
    turn_count = models.PositiveIntegerField(null=True, blank=True)

    def holds(self) -> list[tuple[int, str]]:
        held = [(self.conversation_count, "conversation")]
        return held if self.turn_count is None else [*held, (self.turn_count, "turn")]

    def __str__(self) -> str:
        return f"{self.filename or 'conversations'} ({self.conversation_count:,} conversations)"


class WorkerQuerySet(models.QuerySet):
    def live(self, now=None) -> WorkerQuerySet:
        from django.conf import settings

        now = now or timezone.now()
        return self.filter(last_seen__gte=now - timedelta(seconds=settings.ADVISOR_WORKER_STALE_S))

    def serving(self, queue: str) -> WorkerQuerySet:
        """Live workers consuming `queue` (queues are stored comma-wrapped: ",cpu,default,")."""
        return self.live().filter(queues__contains=f",{queue},")


class Worker(models.Model):
    """A Celery worker that announced itself: host, devices, queues, last seen."""

    name = models.CharField(max_length=255, unique=True)  # celery hostname, e.g. celery@box
    host = models.CharField(max_length=255)
    queues = models.CharField(max_length=512)  # ",cpu,default,"
    devices = models.JSONField(
        default=list
    )  # [{"device": "cuda:0", "name": ..., "memory_bytes": ..., "gpu_kind": ...}]
    engines = models.JSONField(default=dict, blank=True)  # {"vllm": "0.32.0"}: what it serves on
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    objects = WorkerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue_list(self) -> list[str]:
        return [q for q in self.queues.split(",") if q]

    @staticmethod
    def wrap_queues(queues: list[str]) -> str:
        """The stored form of a queue list, so `serving()` can match whole names."""
        return "," + ",".join(sorted(set(queues))) + ","


class Comment(models.Model):
    """A teammate's note under a shared report; anyone holding the share link may post."""

    AUTHOR_MAX = 80
    TEXT_MAX = 2000

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="comments")
    author = models.CharField(max_length=AUTHOR_MAX, blank=True)
    text = models.TextField(max_length=TEXT_MAX)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.author or 'anonymous'} on {self.job_id}: {self.text[:40]}"
