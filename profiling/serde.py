"""Dataclass trees to plain JSON-able dicts and back.

Every result and config type of the library is a dataclass built from
primitives, lists, dicts, optionals and other dataclasses. One generic pair
of functions serialises all of them, so a new field needs no hand-written
(de)serialiser, and `from_dict(to_dict(x)) == x` holds for every type.
Unknown keys are ignored on the way in so older code can read newer JSON. A dict field
marked `metadata={"flatten": True}` sits flat among its owner's keys in the JSON (its
owner's other keys are read as its own on the way back).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


def to_dict(obj: Any) -> Any:
    """Turn a dataclass tree into dicts, lists and primitives."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = to_dict(getattr(obj, f.name))
            if f.metadata.get("flatten"):
                out.update(value)
            else:
                out[f.name] = value
        if hasattr(obj, "json_extra"):
            out.update(obj.json_extra())
        return out
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild an instance of dataclass `cls` from `to_dict` output."""
    return _convert(cls, data)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(tp):
        hints, fields = _hints(tp), dataclasses.fields(tp)
        kwargs = {
            f.name: _convert(hints[f.name], value[f.name])
            for f in fields
            if f.init and f.name in value and not f.metadata.get("flatten")
        }
        for f in fields:
            if f.metadata.get("flatten"):
                own = {g.name for g in fields}
                kwargs[f.name] = {k: v for k, v in value.items() if k not in own}
        return tp(**kwargs)
    if origin in (list, tuple):
        (item,) = get_args(tp)[:1] or (Any,)
        return [_convert(item, v) for v in value]
    if origin is dict:
        _, item = get_args(tp) or (Any, Any)
        return {k: _convert(item, v) for k, v in value.items()}
    if tp is float and isinstance(value, int):
        return float(value)
    return value
