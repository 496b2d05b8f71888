"""A job row → the `ProfileConfig` the worker's child process runs."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from advisor.jobs.models import Job
from advisor.jobs.stored_options import SWITCHES
from profiling.config import EXPERIMENT_NAMES, Hardware, ProfileConfig, Workload
from profiling.options import OPTIONS, TEXT, Option, family

# The row's source names the library's own source words one to one; the map
# keeps a renamed choice from silently becoming "auto".
SOURCES = {
    Job.ModelSource.DEMO: "demo",
    Job.ModelSource.HUB: "hub",
    Job.ModelSource.LOCAL: "local",
    Job.ModelSource.CONFIG: "config",
}


def option_value(job: Job, option: Option) -> Any:
    """A declared option's value on the row, as the library takes it (a blank text is
    None: the library's default)."""
    stored = getattr(job, option.name)
    if option.kind == TEXT:
        return stored or None
    return stored


def config_for(job: Job) -> ProfileConfig:
    """The validated profiling config for `job`; raises ConfigError if invalid."""
    techniques = {
        o.config_name: option_value(job, o)
        for o in OPTIONS.values()
        if o.family not in ("workload", "hardware")
    }
    conversations, conversations_name = job.conversations()
    config = ProfileConfig(
        model=job.model_name,
        source=SOURCES[job.model_source],
        device="auto",  # the worker runs on what it has; gpu_kind is the target
        dtype=job.dtype or "auto",
        quick=job.quick,
        workload=workload_for(job),
        hardware=hardware_for(job),
        stated_bottleneck=job.stated_bottleneck,
        allowed_roots=[str(root) for root in settings.ADVISOR_MODEL_ROOTS],
        experiments=experiments_for(job),
        # Read here, on the worker: the sample travels in the database, not the message.
        prompt_sample=job.sample_prompts() if job.run_caching else [],
        conversations=conversations,
        conversations_name=conversations_name,
        **techniques,
    )
    config.validate()
    return config


def experiments_for(job: Job) -> list[str]:
    """The optional experiments the row asks for, in the library's order."""
    chosen = {name for switch, name in SWITCHES.items() if getattr(job, switch)}
    return [name for name in EXPERIMENT_NAMES if name in chosen]


def workload_for(job: Job) -> Workload:
    return Workload(**{o.name: getattr(job, o.name) for o in family("workload")})


def hardware_for(job: Job) -> Hardware:
    """The deployment target: the GPU kind and the declared hardware options."""
    return Hardware(
        gpu_kind=job.gpu_kind or None, **{o.name: getattr(job, o.name) for o in family("hardware")}
    )
