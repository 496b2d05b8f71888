"""The OpenAPI 3 description of /api/v1/, written by hand.

The request schema lists the new-job form's fields (a test checks the two
agree); limits and choices are read from the library, as the form reads them.
"""

from __future__ import annotations

from typing import Any

from advisor.jobs.models import Job
from profiling.config import DTYPES, KEEP_CHOICES, LIMITS, PRECISIONS, TP_MEASURE_SIZES


def _limited(name: str, description: str) -> dict[str, Any]:
    low, high = LIMITS[name]
    return {"type": "integer", "minimum": low, "maximum": high, "description": description}


def _flag(description: str, default: bool = False) -> dict[str, Any]:
    return {"type": "boolean", "default": default, "description": description}


def _names(choices: dict[str, str], description: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string", "enum": list(choices)},
        "description": description,
    }


JOB_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "The new-job form's fields; a field left out takes the form's default. "
    "The prompt-sample upload is the browser form's only.",
    "properties": {
        "model_source": {"type": "string", "enum": list(Job.ModelSource.values), "default": "demo"},
        "model_name": {
            "type": "string",
            "maxLength": 512,
            "default": "demo",
            "description": "demo or demo-draft, a Hub id, or an absolute directory under "
            "ADVISOR_MODEL_ROOTS",
        },
        "dtype": {"type": "string", "enum": list(DTYPES), "default": "auto"},
        "quick": _flag("Small sweeps: seconds instead of minutes.", default=True),
        "gpu_kind": {
            "type": "string",
            "description": "Target GPU: a catalog key (H100-SXM, L4, …) or empty for any worker",
            "default": "",
        },
        "gpu_count": _limited("gpu_count", "GPUs of that kind"),
        "run_on": {
            "type": "string",
            "default": "",
            "description": "Empty: the target's queue, which needs a live worker; a live "
            "queue name (cpu, default, gpu-…) to run elsewhere; or wait-for-target.",
        },
        "prompt_tokens": _limited("prompt_tokens", "Prompt tokens per request"),
        "output_tokens": _limited("output_tokens", "Output tokens per request"),
        "concurrency": _limited("concurrency", "Concurrent requests"),
        "shared_prefix_tokens": _limited(
            "shared_prefix_tokens", "Tokens every prompt starts with (≤ prompt_tokens)"
        ),
        "ttft_ms": {"type": ["number", "null"], "description": "Time-to-first-token target"},
        "tpot_ms": {"type": ["number", "null"], "description": "Time-per-output-token target"},
        "stated_bottleneck": {
            "type": "string",
            "enum": list(Job.Bottleneck.values),
            "default": "unsure",
        },
        "notes": {"type": "string", "maxLength": 4000},
        "run_speculative": _flag("Measure speculative decoding."),
        "draft_model": {"type": "string", "description": "Blank: the family's default draft"},
        "spec_ks": {"type": "string", "default": "1,2,4", "description": "Draft lengths K, 1–16"},
        "prompt_lookup": _flag("Also try prompt lookup (n-gram drafts).", default=True),
        "run_quantization": _flag("Measure quantization."),
        "precisions": _names(PRECISIONS, "Two or more; the first, in this order, is the reference"),
        "quant_keep": _names(KEEP_CHOICES, "Parts also tried kept in the reference precision"),
        "run_caching": _flag("Measure prefix caching."),
        "run_parallel": _flag("Measure parallelism and disaggregation."),
        "tp_measure": {
            "type": ["integer", "null"],
            "enum": [None, *TP_MEASURE_SIZES],
            "description": "Processes for a measured tensor-parallel run; null: the default",
        },
    },
}

JOB: dict[str, Any] = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "description": "The share token: the job's id everywhere"},
        "state": {"type": "string", "enum": list(Job.State.values)},
        "final": {"type": "boolean"},
        "progress": {"type": "number", "minimum": 0, "maximum": 1},
        "phase": {"type": "string"},
        "message": {"type": "string"},
        "error": {"type": "string"},
        "model_name": {"type": "string"},
        "queue": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "finished_at": {"type": ["string", "null"], "format": "date-time"},
        "links": {
            "type": "object",
            "properties": {
                "self": {"type": "string", "format": "uri"},
                "result": {"type": "string", "format": "uri"},
                "report": {"type": "string", "format": "uri", "description": "The share link"},
            },
        },
    },
}

ERRORS = {
    "type": "object",
    "properties": {
        "errors": {
            "type": "object",
            "description": 'Field name → messages; "__all__" for those of no one field',
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        }
    },
}
ERROR = {"type": "object", "properties": {"error": {"type": "string"}}}


def _json(schema: str, description: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    return {"description": description, "content": {"application/json": {"schema": ref}}}


TOKEN_PARAMETER = {
    "name": "token",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$"},
}
UNAUTHORIZED = _json("Error", "ADVISOR_API_TOKEN is set and the bearer token is missing or wrong")


def document(server_url: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document, with `server_url` (…/api/v1/) as its server."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Bottleneck Advisor API",
            "version": "1",
            "description": "Submit a profiling job, follow its progress, fetch its result. "
            "When the site sets ADVISOR_API_TOKEN, send Authorization: Bearer <token>.",
        },
        "servers": [{"url": server_url}],
        "security": [{}, {"bearer": []}],
        "paths": {
            "/jobs": {
                "post": {
                    "summary": "Submit a job (validated exactly as the new-job form)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/JobRequest"}
                            }
                        },
                    },
                    "responses": {
                        "201": _json("Job", "Queued; Location is the job's API URL"),
                        "400": _json("Errors", "Invalid fields, with a message per field"),
                        "401": UNAUTHORIZED,
                        "415": _json("Error", "The body was not sent as application/json"),
                        "503": _json("Error", "The job queue is down; nothing was saved"),
                    },
                }
            },
            "/jobs/{token}": {
                "get": {
                    "summary": "A job's state and progress",
                    "parameters": [TOKEN_PARAMETER],
                    "responses": {
                        "200": _json("Job", "The job"),
                        "401": UNAUTHORIZED,
                        "404": _json("Error", "No job has this token"),
                    },
                }
            },
            "/jobs/{token}/result": {
                "get": {
                    "summary": "The finished job's result (the profile JSON)",
                    "parameters": [TOKEN_PARAMETER],
                    "responses": {
                        "200": {
                            "description": "Profile.to_dict(), as result.json on the site",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "401": UNAUTHORIZED,
                        "404": _json("Error", "No job has this token"),
                        "409": _json("Error", "Not finished yet, or ended without a result"),
                    },
                }
            },
        },
        "components": {
            "schemas": {"JobRequest": JOB_REQUEST, "Job": JOB, "Errors": ERRORS, "Error": ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
