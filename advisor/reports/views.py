"""The report: what a succeeded job's page shows, built from `job.result`.

The job page (`jobs:detail`) is the report's URL and share link; this module
turns the stored `Profile.to_dict()` into the template's context. A result
that cannot be read (written by a newer or broken worker) becomes a message on
the page, never a server error.

A finished job's report never changes, so its HTML is rendered once per
what-if query and kept in the shared cache, keyed by the job, its finish time
and a digest of this site's code and templates (a deploy renders afresh).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from advisor import cache as shared_cache
from advisor.jobs.models import Job
from advisor.reports import (
    advice,
    caching,
    charts,
    conversations,
    deployments,
    engine,
    fleet,
    parallel,
    predictions,
    quantization,
    speculative,
    summary,
    verdict,
    whatif_form,
)
from profiling.profile import Experiments, Profile
from profiling.technique_type import Technique
from profiling.techniques import techniques
from profiling.units import UNKNOWN, count, size

log = logging.getLogger(__name__)
REPORT_CACHE_S = 24 * 3600


def rendered_report(job: Job, query: QueryDict | None = None) -> dict[str, Any]:
    """`report_html` (the report section) and `report_charts` (whether it draws any)."""
    what_if = hashlib.sha256((query.urlencode() if query else "").encode()).hexdigest()[:16]
    finished = job.finished_at.timestamp() if job.finished_at else 0
    key = f"advisor:report:{shared_cache.code_digest()}:{job.pk}:{finished}:{what_if}"
    found = shared_cache.get_many([key]).get(key)
    if found is not None:
        return {**found, "report_html": mark_safe(found["report_html"])}  # rendered by us above
    context = report_context(job, query)
    rendered = {
        "report_html": str(render_to_string("reports/report.html", {"job": job, **context})),
        "report_charts": context.get("profile") is not None,
    }
    shared_cache.set_many({key: rendered}, REPORT_CACHE_S)
    return {**rendered, "report_html": mark_safe(rendered["report_html"])}


def load_profile(job: Job) -> Profile | None:
    try:
        return Profile.from_dict(job.result)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def report_context(job: Job, query: QueryDict | None = None) -> dict[str, Any]:
    """The report's context; `query` holds the what-if form's GET parameters, if any."""
    profile = load_profile(job)
    if profile is None:
        return {"report_error": "This job's result could not be read by this version of the site."}
    context = {
        "profile": profile,
        "summary": summary.summary_context(profile),
        "charts": charts.all_charts(profile),
        "verdict": _verdict_context(job, profile),
        "environment_rows": environment_rows(profile),
        "model_rows": model_rows(profile),
        **technique_sections(profile),
        "engine": engine.section_context(profile.engine, profile.advice),
        # The deployment search the advice carries, where it ran (a deployment GPU known).
        "deployments": deployments.section_context(
            profile.advice.deployments if profile.advice else None
        ),
        # The fleet for the job's target load, where it gave one.
        "fleet": fleet.section_context(profile.fleet),
    }
    context["technique_parts"] = technique_parts(profile, context)
    context.update(_advice_sections(job, profile, context, query))
    context["folds"] = summary.section_findings(profile, context)
    # A what-if that was sent opens its section; every other section starts folded.
    context["open_whatif"] = bool(query) and any(k.startswith("whatif-") for k in query)
    return context


# The techniques the site draws a page part of its own for (charts, outputs side by side):
# its template, its title, its context from the results and, where the page part words
# it, its fold's finding from that context (else the result's `finding`). Disaggregation is
# drawn in parallel's. Every other registered technique is drawn from its folder's
# `ReportSection` (`reports/_technique.html`).
@dataclass(frozen=True)
class Page:
    template: str
    title: str
    build: Callable[[Experiments], dict[str, Any] | None]
    finding: Callable[[dict[str, Any]], str] | None = None


def _section_of(result: Any) -> dict[str, Any] | None:
    return result.section if result is not None else None


PAGES = {
    "quantization": Page("reports/_quantization.html", "Quantization",
                         lambda ran: quantization.section_context(ran.quantization)),
    "speculative": Page("reports/_speculative.html", "Speculative decoding",
                        lambda ran: speculative.section_context(ran.speculative)),
    "caching": Page("reports/_caching.html", "Prefix caching",
                    lambda ran: caching.section_context(ran.caching)),
    "conversations": Page(
        "reports/_conversations.html", "Conversations and the KV cache's memory",
        lambda ran: conversations.section_context(_section_of(ran.conversations)),
        finding=lambda context: context["finding"],
    ),
    "parallel": Page("reports/_parallel.html", "Split work across devices",
                     lambda ran: parallel.section_context(ran.parallel, ran.disaggregation)),
}  # fmt: skip


def technique_sections(profile: Profile) -> dict[str, Any]:
    """Each page part's context, by its technique's name (None where it did not run)."""
    return {name: page.build(profile.experiments) for name, page in PAGES.items()}


def technique_parts(profile: Profile, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's technique sections, in the registry's order: each that ran, folded
    under its finding (`reports/_fold.html`); `context` holds the page parts' contexts."""
    parts = []
    for technique in techniques():
        part = _part(technique, profile.experiments, context.get(technique.name))
        if part is not None:
            parts.append(part)
    return parts


def _part(
    technique: Technique, ran: Experiments, drawn: dict[str, Any] | None
) -> dict[str, Any] | None:
    result = ran[technique.name]
    if result is None or technique.measured_by:  # drawn in the one that measured it
        return None
    finding = summary.finding_of(result)
    page = PAGES.get(technique.name)
    if page is not None:
        if drawn is None:
            return None
        if page.finding is not None:
            finding = page.finding(drawn)
        return {"name": technique.name, "template": page.template, "title": page.title,
                "finding": finding}  # fmt: skip
    section = technique.section(result)
    return {
        "name": technique.name,
        "template": "reports/_technique.html",
        "title": technique.label,
        "finding": section.finding if section else finding,
        "section": section,
    }


def _advice_sections(
    job: Job, profile: Profile, context: dict[str, Any], query: QueryDict | None
) -> dict[str, Any]:
    """The advice, the predictions and the what-if panel (evidence links only to sections
    the page has, so they are built after the others)."""
    anchors = advice.present_anchors(context, bool(profile.warnings))
    return {
        "advice": advice.section_context(profile.advice, anchors),
        "predictions": predictions.section_context(profile.predictions),
        "whatif": whatif_form.section_context(profile, query),
    }


def _verdict_context(job: Job, profile: Profile) -> dict[str, Any] | None:
    measured, fit, work = profile.verdict, profile.memory.fit, profile.config.workload
    if measured is None:
        return None
    return {
        "measured": measured,
        "split": verdict.phase_split(measured),
        # The targets the verdict was judged against are the ones in the result.
        "targets": verdict.targets(measured, work.ttft_ms, work.tpot_ms),
        "fit": verdict.fit_line(fit),
        "fits": measured.fits if measured.fits is not None else (fit.fits if fit else None),
        "stated": verdict.stated_label(job.stated_bottleneck),
        # One name for the bottleneck on the whole page: the advice's, where it has one.
        "measured_label": (
            profile.advice.bottleneck_label
            if profile.advice is not None
            else verdict.measured_label(measured, fit)
        ),
    }


def _text(value: Any) -> str:
    return UNKNOWN if value in (None, "") else str(value)


def environment_rows(profile: Profile) -> list[tuple[str, str]]:
    env = profile.environment
    return [
        ("Device", f"{env.device} — {env.device_name}"),
        ("GPUs given to this run", env.visible_devices or "all the machine's"),
        ("Device memory", size(env.device_memory_bytes)),
        ("Matched GPU kind", _text(env.gpu_kind)),
        ("Driver / CUDA", f"{_text(env.driver)} / {_text(env.cuda)}"),
        ("dtype", _text(env.dtype)),
        ("torch / transformers", f"{_text(env.torch)} / {_text(env.transformers)}"),
        ("Python", _text(env.python)),
        ("Platform", _text(env.platform)),
        ("Host", _text(env.hostname)),
        ("CPU cores / torch threads", f"{count(env.cpu_count)} / {count(env.torch_threads)}"),
        ("Started / finished", f"{_text(env.started_at)} / {_text(env.finished_at)}"),
        ("Time spent", profile.time_spent() or "not recorded"),
    ]


def model_rows(profile: Profile) -> list[tuple[str, str]]:
    model = profile.model
    heads = [model.num_attention_heads, model.num_key_value_heads, model.head_dim]
    return [
        ("Model", f"{model.name} ({model.source})"),
        ("Architecture", _text(model.architecture)),
        ("Revision", _text(model.revision)),
        ("Parameters", count(model.num_parameters)),
        ("Layers / hidden size", f"{count(model.num_layers)} / {count(model.hidden_size)}"),
        ("Attention heads / KV heads / head dim", " / ".join(count(n) for n in heads)),
        ("Vocabulary", count(model.vocab_size)),
        ("Weights", "random (config only)" if model.config_only else "loaded"),
    ]  # fmt: skip
