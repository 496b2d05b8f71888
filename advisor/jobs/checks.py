"""The checks of a job's fields that are more than a range or a choice: where a model
may come from, the order of ticked names, text a database can store.

Each raises (or adds) a `ValidationError` with a message meant for the person
who typed the value; the new-job form runs them, so the API and `submit_job`,
which go through that form, give the same words.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings

from advisor.jobs.models import Job
from profiling.config import is_repo_id
from profiling.text import text_problem

DEMO_NAMES = ("demo", "demo-draft")


def _resolved_roots() -> list[Path]:
    return [Path(root).resolve() for root in getattr(settings, "ADVISOR_MODEL_ROOTS", [])]


def check_local_dir(text: str) -> str:
    """The resolved directory if it lies under an allowed root; raises ValidationError."""
    path = Path(text)
    if not path.is_absolute():
        raise forms.ValidationError(
            "A local directory must be an absolute path, e.g. /models/llama."
        )
    roots = _resolved_roots()
    if not roots:
        raise forms.ValidationError(
            "Local directories are turned off on this site (ADVISOR_MODEL_ROOTS is empty)."
        )
    # resolve() follows symlinks and "..", so a link inside a root that points
    # outside it is judged by where it really goes.
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise forms.ValidationError(f"This path cannot be resolved: {exc}") from exc
    if not any(resolved.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise forms.ValidationError(f"Models can only be loaded from under: {allowed}.")
    return str(resolved)


def check_hub_id(text: str) -> str:
    if not is_repo_id(text):
        raise forms.ValidationError(
            "Not a Hugging Face Hub id: use name or namespace/name with letters, digits, "
            "'-', '_' and '.' (e.g. meta-llama/Llama-3.1-8B)."
        )
    return text


def check_model_name(source: str, name: str) -> str:
    """The model name to store for `source`, or a ValidationError saying why not."""
    if source == Job.ModelSource.DEMO:
        if name not in DEMO_NAMES:
            raise forms.ValidationError(f"The built-in models are: {', '.join(DEMO_NAMES)}.")
        return name
    if source == Job.ModelSource.HUB:
        return check_hub_id(name)  # never treated as a path, whatever it looks like
    if source == Job.ModelSource.LOCAL:
        return check_local_dir(name)
    # Config only: a Hub id, or an allowed directory holding config.json.
    return check_local_dir(name) if name.startswith("/") else check_hub_id(name)


def check_draft_name(name: str) -> str:
    """A draft is a demo name, an allowed local directory, or a Hub id; blank is the default."""
    if not name or name in DEMO_NAMES:
        return name
    return check_local_dir(name) if name.startswith("/") else check_hub_id(name)


def refuse_unstorable_text(form: forms.BaseForm, data: dict[str, Any]) -> None:
    """A field error for text no database can store (NUL, a lone surrogate)."""
    for name, value in list(data.items()):
        problem = text_problem(value) if isinstance(value, str) else None
        if problem is not None:
            form.add_error(name, f"This text holds {problem}; remove it.")


def in_choice_order(names: list[str], choices: Iterable[str]) -> list[str]:
    """Chosen names as stored (["fp32", "int8"]): in the order of `choices`, each once.

    The page lists the choices in that order and says the first ticked is the
    reference, so the stored order is the page's, whatever order a client posts.
    """
    chosen = set(names)
    return [name for name in choices if name in chosen]
