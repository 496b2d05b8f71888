"""A database outage costs a retry, never a 500.

While the database is unreachable (a crash, a managed failover, a network partition,
SQLite locked past its timeout), every page and API call that needed it answers 503 with
`Retry-After` and a short message: HTML for pages, the API's JSON error shape under
`/api/`. Load balancers, `manage.py submit_job` and scripts read 503 as "try again", not
as a bug in the site. Nothing is half-saved: the request's writes either committed
before the error or never happened (each submission is one transaction). When the
database returns, the next request opens a fresh connection (`CONN_HEALTH_CHECKS`):
no process restart.

Django turns any exception a view or a middleware raises into its 500 handler, which
runs while that exception is being handled; `server_error` is that handler and looks at
it. It touches no database and renders no template that could.
"""

from __future__ import annotations

import sys
from html import escape

from django.db.utils import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

# What a client waits before trying again; the reaper's and the worker's own retries
# are stated beside it in docs/promises.md.
RETRY_AFTER_S = 5
MESSAGE = (
    "The database is unreachable for the moment, so this request was not carried out "
    "and nothing of it was saved. Try again in a few seconds."
)
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Back in a moment</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto;
padding: 0 1rem">
<h1>Back in a moment</h1><p>{message}</p><p><a href="">Try again</a></p></body></html>
"""


def is_outage(exc: BaseException | None) -> bool:
    """Whether `exc` says the database cannot be reached (or answer), not that a query
    was wrong: Django raises OperationalError for a refused or dropped connection and
    InterfaceError for one already closed under it."""
    return isinstance(exc, OperationalError | InterfaceError)


def unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: the API's JSON error shape under /api/, a small page elsewhere."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            {"error": MESSAGE, "retry_after_s": RETRY_AFTER_S}, status=503
        )
    else:
        response = HttpResponse(PAGE.format(message=escape(MESSAGE)), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """The site's 500 handler: 503 while the database is away, Django's 500 otherwise."""
    if is_outage(sys.exc_info()[1]):
        return unavailable(request)
    return defaults.server_error(request)
