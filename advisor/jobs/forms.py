"""The new-job form: what to profile, the deployment target, the workload.

Every value is checked here, on the server, with errors on the field they
belong to; the worker checks the model location again before it loads
anything. Limits come from `profiling.config` so the form and the library
never disagree.
"""

from __future__ import annotations

from typing import Any

from django import forms

from advisor.jobs import dispatch
from advisor.jobs.checks import (
    check_draft_name,
    check_model_name,
    in_choice_order,
    refuse_unstorable_text,
)
from advisor.jobs.conversation_upload import ConversationFileField
from advisor.jobs.models import Job, Worker
from advisor.jobs.option_fields import clean_ints, form_field
from advisor.jobs.samples import PromptFileField
from advisor.jobs.stored_options import read_option, stored_names, write_option
from profiling.config import DTYPES, ConfigError, Hardware, Workload, load_problem
from profiling.measure import hardware
from profiling.option_type import BOOL, INTS, NAMES
from profiling.options import OPTIONS, family
from profiling.technique_type import Technique
from profiling.techniques import switched

MIN_PRECISIONS = 2
# The "run on" value that keeps a job in its target's queue until a worker for
# that queue starts (a fleet box may still be booting).
WAIT_FOR_TARGET = "wait-for-target"
# One line under each choice of "the bottleneck you believe you have".
BOTTLENECK_HINTS = {
    Job.Bottleneck.MEMORY: "the weights or the KV cache barely fit",
    Job.Bottleneck.PROMPT: "long prompts, often sharing a prefix; slow first token",
    Job.Bottleneck.GENERATION: "tokens stream out too slowly",
    Job.Bottleneck.DEVICES: "one device is not enough",
    Job.Bottleneck.UNSURE: "let the measurement decide",
}
START_WORKER_HINT = (
    "Start one with ./scripts/run-local (site + CPU worker), or on a GPU box: "
    "celery -A advisor worker -Q gpu-<kind>,default --concurrency 1 --max-tasks-per-child 1"
)


def served_queues() -> dict[str, list[str]]:
    """Queues served by live workers → labels of those workers ("local@host (CPU)")."""
    served: dict[str, list[str]] = {}
    for queue, workers in dispatch.available_queues().items():
        served[queue] = [_worker_label(w) for w in workers]
    return served


def live_engines() -> dict[str, str]:
    """Engines that live workers announced → their versions ("vllm" → "0.32.0")."""
    found: dict[str, str] = {}
    for worker in Worker.objects.live():
        if isinstance(worker.engines, dict):
            found.update({str(k): str(v) for k, v in worker.engines.items()})
    return found


def _worker_label(worker: Worker) -> str:
    kinds = sorted(
        {str(d.get("name") or d.get("device")) for d in worker.devices if isinstance(d, dict)}
    )
    return f"{worker.name} ({', '.join(kinds)})" if kinds else worker.name


# Fields about a fixed deployment and its load that most jobs leave as they are: folded
# under "Deployment details" on the form, its summary line saying what is set.
DEPLOYMENT_DETAILS = (
    "serving_engine", "weights", "kv_cache", "tp", "pp", "replicas", "gpu_hourly_usd",
    "host_memory_gib",
    "request_rate", "requests", "conversation_turns", "conversation_think_s",
    "conversation_file", "load_rps", "load_users",
)  # fmt: skip


# The site's own fields of a technique's group, after its options: the prompt sample is a
# file the site stores with the job (`advisor.jobs.samples`), not an option.
SITE_FIELDS = {"caching": ("prompt_file",)}
# The form's order: the model, where it runs, the workload and its targets, the hunch before
# any technique; then each technique's group (its switch, its options) in the registry's
# order; the engine; a fixed deployment, folded; the notes.
BEFORE_TECHNIQUES = (
    "model_source", "model_name", "dtype", "quick",
    "gpu_kind", "gpu_count", "run_on",
    "prompt_tokens", "output_tokens", "concurrency", "shared_prefix_tokens",
    "ttft_ms", "tpot_ms", "stated_bottleneck",
)  # fmt: skip
AFTER_TECHNIQUES = ("engine", *DEPLOYMENT_DETAILS, "notes")


def technique_fields(technique: Technique) -> list[str]:
    """A technique's group on the form: its switch, its options, the site's own fields."""
    return [
        technique.switch_name,
        *(o.name for o in technique.options),
        *SITE_FIELDS.get(technique.name, ()),
    ]


class JobForm(PromptFileField, ConversationFileField, forms.ModelForm):
    model_name = forms.CharField(
        label="Model",
        max_length=512,
        help_text="demo or demo-draft · a Hub id like Qwen/Qwen2.5-0.5B · /an/absolute/dir",
    )
    dtype = forms.ChoiceField(choices=[(d, d) for d in DTYPES], initial="auto")
    gpu_kind = forms.ChoiceField(label="GPU kind", required=False)
    # The declared options (profiling.options): label, help, range and default from there.
    gpu_count = form_field(OPTIONS["gpu_count"])
    prompt_tokens = form_field(OPTIONS["prompt_tokens"])
    output_tokens = form_field(OPTIONS["output_tokens"])
    concurrency = form_field(OPTIONS["concurrency"])
    shared_prefix_tokens = form_field(OPTIONS["shared_prefix_tokens"])
    ttft_ms = form_field(OPTIONS["ttft_ms"])
    tpot_ms = form_field(OPTIONS["tpot_ms"])
    request_rate = form_field(OPTIONS["request_rate"])
    requests = form_field(OPTIONS["requests"])
    conversation_turns = form_field(OPTIONS["conversation_turns"])
    conversation_think_s = form_field(OPTIONS["conversation_think_s"])
    load_rps = form_field(OPTIONS["load_rps"])
    load_users = form_field(OPTIONS["load_users"])
    serving_engine = form_field(OPTIONS["serving_engine"])
    weights = form_field(OPTIONS["weights"])
    kv_cache = form_field(OPTIONS["kv_cache"])
    gpu_hourly_usd = form_field(OPTIONS["gpu_hourly_usd"])
    tp = form_field(OPTIONS["tp"])
    pp = form_field(OPTIONS["pp"])
    replicas = form_field(OPTIONS["replicas"])
    host_memory_gib = form_field(OPTIONS["host_memory_gib"])
    # Each registered technique's switch and options are added per form (`__init__`).
    engine = form_field(OPTIONS["engine"])
    run_on = forms.ChoiceField(
        label="Run on",
        required=False,
        help_text="Where the measurements are taken. On another device, the report still "
        "projects memory and speed to the GPU kind above.",
        error_messages={"invalid_choice": "That worker is no longer live; pick another."},
    )

    class Meta:
        model = Job
        fields = [
            "model_source", "model_name", "dtype", "quick", "gpu_kind",
            "stated_bottleneck", "notes",
        ]  # fmt: skip
        widgets = {
            "model_source": forms.RadioSelect,
            "stated_bottleneck": forms.RadioSelect,
            "notes": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {
            "quick": "Quick mode",
            "stated_bottleneck": "The bottleneck you believe you have",
        }
        help_texts = {
            "notes": "Anything a teammate should know (up to 4,000 characters).",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # A fresh row as the instance makes the model's defaults the initial
        # values of the fields declared here too (512/128/8, quick, demo).
        kwargs.setdefault("instance", Job(model_name="demo"))
        super().__init__(*args, **kwargs)
        self.techniques = switched()
        for technique in self.techniques:
            switch = technique.switch
            assert switch is not None
            self.fields[technique.switch_name] = forms.BooleanField(
                label=switch.label, required=False, help_text=switch.help
            )
            for option in technique.options:
                self.fields[option.name] = form_field(option)
        self.order_fields(
            [*BEFORE_TECHNIQUES, *(n for t in self.techniques for n in technique_fields(t)),
             *AFTER_TECHNIQUES]
        )  # fmt: skip
        self.served = served_queues()
        self.fields["gpu_kind"].choices = self._gpu_choices()
        self.fields["run_on"].choices = self._run_on_choices()
        self.engines = live_engines()
        if not self.engines:  # offered only when a live worker has one (scripts and the
            self.fields["engine"].widget.attrs["disabled"] = True  # API get the field error)
        self.fields["stated_bottleneck"].choices = [
            (value, f"{label} — {BOTTLENECK_HINTS[value]}")
            for value, label in Job.Bottleneck.choices
        ]
        # The stored options are the fields' first values. Lists show as the
        # widgets take them: K as comma text, precisions as ticks (an empty
        # list, the library's default, shows the form's default ticks).
        for name in stored_names():
            if name not in self.initial:
                self.initial[name] = read_option(self.instance, name)
        for technique in self.techniques:
            for option in technique.options:
                if option.kind == INTS:
                    self.initial[option.name] = ",".join(map(str, self.initial[option.name] or []))
                elif option.kind == NAMES:
                    self.initial[option.name] = self.initial[option.name] or list(
                        option.form_default
                    )

    def _post_clean(self) -> None:
        # The options go into the row's JSON before the model's own checks run.
        for name in stored_names():
            if name in self.cleaned_data:
                write_option(self.instance, name, self.cleaned_data[name])
        super()._post_clean()

    # Where it runs -----------------------------------------------------------

    def _gpu_choices(self) -> list[tuple[str, str]]:
        choices = [("", self._annotate("Any worker", ""))]
        for key, gpu in hardware.catalog().items():
            choices.append((key, self._annotate(gpu.label, key)))
        return choices

    def _annotate(self, label: str, gpu_kind: str) -> str:
        return label if self.is_served(gpu_kind) else f"{label} — no live worker now"

    def _run_on_choices(self) -> list[tuple[str, str]]:
        choices = [("", "Its own queue (the target's workers)")]
        for queue, workers in self.served.items():
            choices.append((queue, f"{queue} — {', '.join(workers)}"))
        choices.append((WAIT_FOR_TARGET, "Wait in the target's queue until a worker starts"))
        return choices

    def target_queue(self, gpu_kind: str) -> str:
        return dispatch.queue_for(Job(gpu_kind=gpu_kind))

    def is_served(self, gpu_kind: str) -> bool:
        return self.target_queue(gpu_kind) in self.served

    @property
    def served_gpu_kinds(self) -> list[str]:
        """GPU kinds whose queue has a live worker (the page's script reads these)."""
        return [key for key, _ in self.fields["gpu_kind"].choices if self.is_served(key)]

    @property
    def no_workers(self) -> bool:
        return not self.served

    @property
    def current_gpu_kind(self) -> str:
        value = self["gpu_kind"].value() or ""
        return value if value in hardware.catalog() else ""

    @property
    def target_unserved(self) -> bool:
        """Whether the chosen target has no live worker (shown next to the field)."""
        return not self.is_served(self.current_gpu_kind)

    @property
    def technique_groups(self) -> list[dict[str, Any]]:
        """Each technique's group as the page lays it out: its heading, its switch, then
        its settings: the fields (side by side where there are two or more), then the
        options that are a checkbox."""
        groups = []
        for technique in self.techniques:
            settings = [self[name] for name in technique_fields(technique)[1:]]
            kinds = {o.name: o.kind for o in technique.options}
            row = [
                {"field": f, "boxes": kinds.get(f.name) == NAMES,
                 "note": getattr(self, f"{f.name}_note", "")}
                for f in settings if kinds.get(f.name) != BOOL
            ]  # fmt: skip
            groups.append({
                "name": technique.name,
                "heading": technique.heading or technique.label,
                "switch": self[technique.switch_name],
                "row": row,
                "checks": [f for f in settings if kinds.get(f.name) == BOOL],
                "open": any(f.errors for f in settings),
            })  # fmt: skip
        return groups

    @property
    def deployment_errors(self) -> bool:
        """Whether a folded deployment field has an error (the fold then opens)."""
        return any(self[name].errors for name in DEPLOYMENT_DETAILS)

    @property
    def deployment_summary(self) -> str:
        """What the folded deployment fields set, in a line ("nothing set: ..." by default)."""
        set_ = []
        for name in DEPLOYMENT_DETAILS:
            if name == "conversation_file":
                continue
            value, default = self[name].value(), OPTIONS[name].default
            if value in (None, "") or str(value) == str(default):
                continue
            if name == "conversation_think_s" and not self._turns_set():
                continue
            set_.append(f"{self.fields[name].label.lower()}: {value}")
        if not set_:
            return "nothing set: the checkpoint's weights, the layout searched"
        return "set: " + ", ".join(set_)

    def _turns_set(self) -> bool:
        turns = self["conversation_turns"].value()
        return turns not in (None, "", "1", 1)

    # Validation --------------------------------------------------------------

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        refuse_unstorable_text(self, data)
        self._clean_model(data)
        prompt, prefix = data.get("prompt_tokens"), data.get("shared_prefix_tokens")
        if prompt is not None and prefix is not None and prefix > prompt:
            self.add_error(
                "shared_prefix_tokens", "The shared prefix cannot be longer than the prompt."
            )
        self._clean_technique_options(data)
        self._clean_quantization(data)
        self._clean_load(data)
        if self.prompt_sample is not None:
            data["run_caching"] = True  # the sample is only for this experiment
        if not self.errors:
            self._check_with_library(data)
            self._clean_run_on(data)
        return data

    def clean_engine(self) -> str:
        engine = self.cleaned_data.get("engine") or ""
        if engine and engine not in live_engines():
            raise forms.ValidationError(
                f"No live worker has {engine}: create its environment on a worker with "
                "scripts/engine-env and restart the worker, or leave this blank."
            )
        return engine

    def clean_draft_model(self) -> str:
        return check_draft_name(self.cleaned_data.get("draft_model", "").strip())

    def _clean_technique_options(self, data: dict[str, Any]) -> None:
        """Numbers typed as comma text to their list; names ticked in the page's order."""
        for option in (o for t in self.techniques for o in t.options):
            if option.name not in data:
                continue
            if option.kind == INTS:
                try:
                    data[option.name] = clean_ints(option, data[option.name] or "")
                except forms.ValidationError as exc:
                    self.add_error(option.name, exc)
            elif option.kind == NAMES:
                data[option.name] = in_choice_order(data[option.name] or [], option.choices)

    def _clean_quantization(self, data: dict[str, Any]) -> None:
        # The site's rule for quantization's form: a reference and one to compare. Unknown
        # names were refused by the fields themselves (not among the choices).
        chosen = data.get("precisions")
        if chosen is None or not data.get("run_quantization"):
            return
        if len(chosen) < MIN_PRECISIONS:
            self.add_error(
                "precisions",
                f"Tick at least {MIN_PRECISIONS} precisions: a reference and one to compare.",
            )

    def _clean_load(self, data: dict[str, Any]) -> None:
        rate, users = data.get("load_rps"), data.get("load_users")
        if "ttft_ms" in self.errors or "tpot_ms" in self.errors:
            return  # a target refused: said there
        targets = Workload(ttft_ms=data.get("ttft_ms"), tpot_ms=data.get("tpot_ms"))
        problem = load_problem(rate, users, targets)
        if problem:
            self.add_error("load_users" if users is not None else "load_rps", problem)

    def _clean_model(self, data: dict[str, Any]) -> None:
        source, name = data.get("model_source"), data.get("model_name")
        if source is None or name is None:
            return
        try:
            data["model_name"] = check_model_name(source, name.strip())
        except forms.ValidationError as exc:
            self.add_error("model_name", exc)

    def _check_with_library(self, data: dict[str, Any]) -> None:
        """The library's own validation, so a limit changed there cannot slip past."""
        try:
            Workload(**{o.name: data.get(o.name) for o in family("workload")}).validate()
            deployment = {o.name: data.get(o.name) for o in family("hardware")}
            Hardware(gpu_kind=data.get("gpu_kind") or None, **deployment).validate()
        except ConfigError as exc:
            self.add_error(None, str(exc))

    def _clean_run_on(self, data: dict[str, Any]) -> None:
        # A chosen "run on" is one of the choices: a live queue, or "wait".
        gpu_kind = data.get("gpu_kind") or ""
        if not data.get("run_on") and not self.is_served(gpu_kind):
            self.add_error("gpu_kind", self.unserved_message(gpu_kind))

    def unserved_message(self, gpu_kind: str) -> str:
        queue = self.target_queue(gpu_kind)
        if self.no_workers:
            return (
                f"No worker is connected, so nothing can run this job now. {START_WORKER_HINT}. "
                "Or choose “Wait in the target's queue” under “Run on”."
            )
        return (
            f"No live worker serves the {queue} queue right now. Choose where to run it under "
            "“Run on”: the report still projects memory and speed to this GPU."
        )

    def save(self, commit: bool = True) -> Job:
        """The job row; with commit=False, `save_m2m()` saves its prompt sample afterwards.

        Call that in the transaction that saves the job, so a worker never sees
        the job without its sample.
        """
        job = super().save(commit=False)
        run_on = self.cleaned_data.get("run_on") or ""
        job.queue = run_on if run_on in self.served else dispatch.queue_for(job)
        if self.prompt_sample is not None:
            job.prompt_sample = self.prompt_sample  # config_for reads it before it is saved
        if commit:
            job.save()
            self.save_m2m()
        return job

    def _save_m2m(self) -> None:
        super()._save_m2m()
        self.save_prompt_sample(self.instance)
        self.save_conversations(self.instance)
