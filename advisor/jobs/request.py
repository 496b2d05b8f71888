"""A job request from a script (the JSON API, `manage.py submit_job`), declared once
with pydantic: it checks the values strictly and generates the OpenAPI
document's request schema (`advisor.api.openapi`).

Strict means JSON's own types: the integer 16, not "16"; true, not "true" or 1;
a list where a list is due; no unknown fields. Every text refuses NUL and lone
surrogates. What passes is then checked by the new-job form, exactly as a
browser's post is (model location, the prefix against the prompt, live queues),
so the API and the form can never accept different jobs.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from advisor.jobs.models import Job
from profiling.config import CONVERSATIONS_MAX_BYTES, DTYPES
from profiling.measure import hardware
from profiling.options import (
    BOOL,
    CHOICE,
    FLOAT,
    INT,
    INTS,
    NAMES,
    OPTIONS,
    TEXT,
    Option,
)
from profiling.projection.conversation_workloads import MAX_TURNS
from profiling.technique_type import Technique
from profiling.techniques import switched
from profiling.text import text_problem


def _storable(text: str) -> str:
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(f"the text holds {problem}")
    return text


def Text(max_length: int, description: str = "") -> Any:  # a type factory, named as a type
    return Annotated[
        str, AfterValidator(_storable), Field(max_length=max_length, description=description)
    ]


def _default(name: str) -> Any:
    return Job._meta.get_field(name).get_default()


def _enum(values: tuple[Any, ...]) -> Any:
    return Literal.__getitem__(values)


def option_field(option: Option) -> tuple[Any, Any]:
    """(type, pydantic Field) of a declared option (`profiling.options`), as the API takes it:
    lists of names as JSON lists; draft lengths as the form's comma text ("1,2,4")."""
    about = option.help if not option.unit else f"{option.help} ({option.unit})"
    kind = option.kind
    if kind in (INT, FLOAT):
        number = int if kind == INT else float
        tp: Any = Annotated[number, Field(ge=option.low, le=option.high)]
        default = option.default
    elif kind == BOOL:
        tp, default = bool, option.default
    elif kind == TEXT:
        tp, default = Text(option.max_length or 64), option.default
    elif kind == INTS:
        pattern = r"^[0-9]+( *, *[0-9]+)*$|^$"
        tp = Annotated[str, Field(max_length=64, pattern=pattern)]
        default = ",".join(map(str, option.default))
    elif kind == NAMES:
        tp = list[_enum(option.choices)]
        default = list(option.form_default)
    elif kind == CHOICE:
        tp, default = _enum(option.choices), option.default
    else:
        raise ValueError(f"no API type for option kind {kind!r}")
    if option.optional:
        tp = tp | None
    return tp, Field(default, description=about, title=option.label)


class SiteFields(BaseModel):
    """The new-job form's own fields; the techniques' switches and the declared options are
    added to it below (`job_request()`). A field left out takes the form's default.

    The prompt-sample upload is the browser form's only; a conversation file is sent as
    its text.
    """

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        protected_namespaces=(),  # model_source and model_name are the form's names
        json_schema_extra={
            "examples": [
                {"model_name": "demo", "prompt_tokens": 256, "output_tokens": 64},
                {
                    "model_source": "demo",
                    "model_name": "demo",
                    "run_on": "wait-for-target",
                    "run_speculative": True,
                    "spec_ks": "1,2,4",
                },
            ]
        },
    )

    model_source: _enum(tuple(Job.ModelSource.values)) = _default("model_source")
    model_name: Text(
        512, "demo or demo-draft, a Hub id, or an absolute directory under ADVISOR_MODEL_ROOTS"
    ) = "demo"
    dtype: _enum(DTYPES) = "auto"
    quick: bool = Field(_default("quick"), description="Small sweeps: seconds, not minutes")
    gpu_kind: _enum(("", *hardware.catalog())) = Field(
        "",
        description="Target GPU: a catalog key (a name such as H100 or a100-80gb is also "
        "taken and stored as its key), or empty for any worker",
    )
    run_on: Text(
        64,
        "Empty: the target's queue (needs a live worker); a live queue name (cpu, default, "
        "gpu-…) to run elsewhere; or wait-for-target",
    ) = ""
    stated_bottleneck: _enum(tuple(Job.Bottleneck.values)) = _default("stated_bottleneck")
    notes: Text(4000, "Anything a teammate should know") = ""
    conversation_file: Text(
        CONVERSATIONS_MAX_BYTES,
        "The text of a JSON Lines file of your conversations (OpenAI chat or ShareGPT), as "
        f"estimate --conversations reads it, of up to {MAX_TURNS:,} turns; within the body's "
        "size limit",
    ) = ""


def switch_field(technique: Technique) -> tuple[Any, Any]:
    """(type, pydantic Field) of a technique's switch, with the registry's label."""
    assert technique.switch is not None
    return bool, Field(False, description=technique.switch.label)


@cache
def _request_model(declared: tuple[Technique, ...]) -> type[BaseModel]:
    return create_model(
        "JobRequest",
        __base__=SiteFields,
        __doc__=SiteFields.__doc__,
        **{t.switch_name: switch_field(t) for t in declared},
        **{option.name: option_field(option) for option in OPTIONS.values()},
    )


def job_request() -> type[BaseModel]:
    """The request type: the site's fields, each registered technique's switch, and every
    declared option (built once per registry)."""
    return _request_model(switched())


FRIENDLY = {
    "int_type": 'Send a whole number as a JSON number (16, not "16").',
    "float_type": 'Send a JSON number (250.5, not "250.5"), or null.',
    "bool_type": "Send true or false (JSON booleans, not strings or numbers).",
    "list_type": 'Send a JSON list of names, e.g. ["fp32", "int8"].',
    "string_type": "Send a JSON string.",
}


def _unknown_field() -> str:
    return "Unknown field. The fields are: " + ", ".join(job_request().model_fields) + "."


# Errors the new-job form also finds, in its own words: left to it, so a script
# and a browser read the same message for the same out-of-range value. A text's
# length is the exception (`_text_too_long`): the form counts it after trimming
# surrounding whitespace, the document (maxLength) before, so the API refuses it
# itself, in the form's words.
LEFT_TO_THE_FORM = {
    "greater_than", "greater_than_equal", "less_than", "less_than_equal",
    "literal_error", "string_too_long", "too_long", "string_pattern_mismatch",
    "extra_forbidden",
}  # fmt: skip


def _text_too_long(error: dict[str, Any]) -> bool:
    return error["type"] in ("string_too_long", "too_long") and isinstance(error["input"], str)


def _blank_choice(error: dict[str, Any]) -> bool:
    """A blank where the document's enum has no blank: the form would read it as the
    default (its select never sends one), so it is refused here, as the document says."""
    return error["type"] == "literal_error" and error["input"] == ""


def strict_errors(values: dict[str, Any]) -> dict[str, list[str]]:
    """What the strict types refuse in `values` (a wrong JSON type, unstorable text),
    as `{field: [messages]}`; range and choice errors are the form's to report."""
    try:
        job_request().model_validate(values)
    except ValidationError as exc:
        return field_errors(exc, skip=LEFT_TO_THE_FORM)
    return {}


def field_errors(
    exc: ValidationError, skip: frozenset[str] | set[str] = frozenset()
) -> dict[str, list[str]]:
    """pydantic's errors as the form's `{field: [messages]}` ("__all__": the body itself)."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        if error["type"] in skip and not (_text_too_long(error) or _blank_choice(error)):
            continue
        field = str(error["loc"][0]) if error["loc"] else "__all__"
        message = FRIENDLY.get(error["type"]) or _sentence(error["msg"])
        if error["type"] == "extra_forbidden":
            message = _unknown_field()
        if _text_too_long(error):  # in Django's MaxLengthValidator's words
            most, has = error["ctx"]["max_length"], len(error["input"])
            message = f"Ensure this value has at most {most} characters (it has {has})."
        if message not in errors.setdefault(field, []):
            errors[field].append(message)
    return errors


def _sentence(text: str) -> str:
    text = text.removeprefix("Value error, ")
    return text[:1].upper() + text[1:].rstrip(".") + "."
