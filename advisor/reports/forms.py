"""The report page's small forms: compare with another report, and a comment."""

from __future__ import annotations

from typing import Any

from django import forms

from advisor.jobs.checks import refuse_unstorable_text
from advisor.jobs.lookup import find_job, token_from_text
from advisor.jobs.models import Comment, Job

NOT_A_LINK = (
    "That is not a share link or a report code: paste a report's link "
    "(…/jobs/<code>/) or its 22-character code."
)


def _job_from(text: str) -> Job:
    token = token_from_text(text)
    if token is None:
        raise forms.ValidationError(NOT_A_LINK)
    job = find_job(token)
    if job is None:
        raise forms.ValidationError(
            f"No report has the code “{token}”. It may have been cut short when it was copied."
        )
    return job


class CompareForm(forms.Form):
    """Two reports, each given as a share link or code; `cleaned_data` holds the jobs."""

    a = forms.CharField(label="This report", max_length=512, widget=forms.HiddenInput)
    b = forms.CharField(
        label="Compare with",
        max_length=512,
        widget=forms.TextInput(attrs={"placeholder": "another report's share link or code"}),
    )

    def clean_a(self) -> Job:
        return _job_from(self.cleaned_data["a"])

    def clean_b(self) -> Job:
        return _job_from(self.cleaned_data["b"])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        a, b = data.get("a"), data.get("b")
        if a is not None and a == b:
            self.add_error("b", "That is the same report: paste another report's link.")
        return data


class CommentForm(forms.ModelForm):
    def clean(self) -> dict[str, Any]:
        data = super().clean()
        refuse_unstorable_text(self, data)
        return data

    class Meta:
        model = Comment
        fields = ["author", "text"]
        labels = {"author": "Your name (optional)", "text": "Comment"}
        widgets = {"text": forms.Textarea(attrs={"rows": 3})}
        help_texts = {
            "text": f"Up to {Comment.TEXT_MAX:,} characters; shown to anyone with the link."
        }
