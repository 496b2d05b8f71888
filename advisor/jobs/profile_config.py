"""A job row → the `ProfileConfig` the worker's child process runs."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from advisor.jobs.models import Job
from advisor.jobs.stored_options import read_option, switches
from profiling.config import Hardware, ProfileConfig, Workload, technique_options
from profiling.options import Option, family
from profiling.techniques import experiment_names

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
    return option.library_value(read_option(job, option.name))


def config_for(job: Job) -> ProfileConfig:
    """The validated profiling config for `job`; raises ConfigError if invalid."""
    techniques = {name: option_value(job, o) for name, o in technique_options().items()}
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
        engine=job.engine,
        load_rps=job.load_rps,
        load_users=job.load_users,
        technique_options=techniques,
    )
    config.validate()
    return config


def experiments_for(job: Job) -> list[str]:
    """The optional experiments the row asks for, in the library's order."""
    chosen = {name for switch, name in switches().items() if read_option(job, switch)}
    return [name for name in experiment_names() if name in chosen]


def workload_for(job: Job) -> Workload:
    return Workload(**{o.name: getattr(job, o.name) for o in family("workload")})


def hardware_for(job: Job) -> Hardware:
    """The deployment target: the GPU kind and the declared hardware options."""
    return Hardware(
        gpu_kind=job.gpu_kind or None, **{o.name: getattr(job, o.name) for o in family("hardware")}
    )
