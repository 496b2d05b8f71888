"""A job row → the `ProfileConfig` the worker's child process runs."""

from __future__ import annotations

from django.conf import settings

from advisor.jobs.models import Job
from profiling.config import EXPERIMENT_NAMES, Hardware, ProfileConfig, Workload

# The row's source names the library's own source words one to one; the map
# keeps a renamed choice from silently becoming "auto".
SOURCES = {
    Job.ModelSource.DEMO: "demo",
    Job.ModelSource.HUB: "hub",
    Job.ModelSource.LOCAL: "local",
    Job.ModelSource.CONFIG: "config",
}


def config_for(job: Job) -> ProfileConfig:
    """The validated profiling config for `job`; raises ConfigError if invalid."""
    config = ProfileConfig(
        model=job.model_name,
        source=SOURCES[job.model_source],
        device="auto",  # the worker runs on what it has; gpu_kind is the target
        dtype=job.dtype or "auto",
        quick=job.quick,
        workload=workload_for(job),
        hardware=Hardware(gpu_kind=job.gpu_kind or None, gpu_count=job.gpu_count),
        stated_bottleneck=job.stated_bottleneck,
        allowed_roots=[str(root) for root in settings.ADVISOR_MODEL_ROOTS],
        experiments=experiments_for(job),
        draft=job.draft_model or None,
        spec_ks=job.spec_k_list,
        prompt_lookup=job.prompt_lookup,
        precisions=job.precision_list,
        quant_keep=job.quant_keep_list,
        # Read here, on the worker: the sample travels in the database, not the message.
        prompt_sample=job.sample_prompts() if job.run_caching else [],
        tp_measure=job.tp_measure,
    )
    config.validate()
    return config


def experiments_for(job: Job) -> list[str]:
    """The optional experiments the row asks for, in the library's order."""
    chosen = {
        "quantization": job.run_quantization,
        "speculative": job.run_speculative,
        "caching": job.run_caching,
        "parallel": job.run_parallel,
    }
    return [name for name in EXPERIMENT_NAMES if chosen.get(name)]


def workload_for(job: Job) -> Workload:
    return Workload(
        prompt_tokens=job.prompt_tokens,
        output_tokens=job.output_tokens,
        concurrency=job.concurrency,
        shared_prefix_tokens=job.shared_prefix_tokens,
        ttft_ms=job.ttft_ms,
        tpot_ms=job.tpot_ms,
    )
