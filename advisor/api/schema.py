"""The API's answers, declared with pydantic so the OpenAPI document is generated
from the same types (`advisor.api.openapi`); the request is `advisor.jobs.request`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.jobs.models import Job

JobState = Literal.__getitem__(tuple(Job.State.values))


class Links(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    self: str = Field(json_schema_extra={"format": "uri"})
    result: str = Field(json_schema_extra={"format": "uri"})
    report: str = Field(description="The share link", json_schema_extra={"format": "uri"})


class JobOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    token: str = Field(description="The share token: the job's id everywhere")
    state: JobState
    final: bool
    progress: float = Field(ge=0, le=1)
    phase: str
    message: str
    error: str
    model_name: str
    queue: str
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    started_at: str | None = Field(json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(json_schema_extra={"format": "date-time"})
    links: Links


class Errors(BaseModel):
    errors: dict[str, list[str]] = Field(
        description='Field name → messages; "__all__" for those of no one field'
    )


class Error(BaseModel):
    error: str
    state: str | None = None
