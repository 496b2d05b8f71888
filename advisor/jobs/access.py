"""Who may create jobs: when ADVISOR_API_TOKEN is set, the new-job form asks for it.

The API wants it as a bearer token and `submit_job` as --token; a browser
gives it once and its session remembers that it did. Reading a job or a share
link never needs it.
"""

from __future__ import annotations

from django import forms
from django.http import HttpRequest

from advisor.jobs.submission import token_accepted, token_required

SESSION_KEY = "advisor:may-submit"


class AccessForm(forms.Form):
    access_token = forms.CharField(
        label="Access token",
        max_length=256,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="This site runs jobs only for people holding its access token "
        "(ADVISOR_API_TOKEN). Your browser remembers it for this session.",
    )

    def clean_access_token(self) -> str:
        given = self.cleaned_data["access_token"]
        if not token_accepted(given):
            raise forms.ValidationError("That is not this site's access token.")
        return given


def access_form(request: HttpRequest) -> AccessForm | None:
    """The token form this request must pass, or None when it need not."""
    if not token_required() or request.session.get(SESSION_KEY):
        return None
    return AccessForm(request.POST or None, prefix="access")


def grant(request: HttpRequest) -> None:
    request.session[SESSION_KEY] = True
