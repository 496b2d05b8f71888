"""Compare two reports: the side-by-side page and the small form that leads to it.

Read-only, like a share link: anyone holding both codes may open it.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from advisor.jobs.lookup import find_job
from advisor.reports.compare import compare_context
from advisor.reports.forms import CompareForm

PICK_TWO = "Tick exactly two jobs to compare."


@require_GET
def compare(request: HttpRequest, token_a: str, token_b: str) -> HttpResponse:
    jobs = {"A": find_job(token_a), "B": find_job(token_b)}
    missing = [name for name, job in jobs.items() if job is None]
    if missing:
        return render(request, "reports/compare_missing.html", {"missing": missing}, status=404)
    context = compare_context(jobs["A"], jobs["B"])
    return render(request, "reports/compare.html", context)


@require_GET
def compare_pick(request: HttpRequest) -> HttpResponse:
    """From a report's "Compare with…" form (a, b) or the job list's ticks (pick, pick)."""
    picks = request.GET.getlist("pick")
    if "pick" in request.GET and len(picks) != 2:
        return render(request, "reports/compare_pick.html", {"pick_error": PICK_TWO}, status=400)
    form = CompareForm(dict(zip("ab", picks, strict=True)) if picks else request.GET)
    if not form.is_valid():
        return render(request, "reports/compare_pick.html", {"form": form}, status=400)
    a, b = form.cleaned_data["a"], form.cleaned_data["b"]
    return redirect("reports:compare", token_a=a.share_token, token_b=b.share_token)
