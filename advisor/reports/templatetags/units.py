"""The template filters of `profiling.units` (load them with the `units` library):
one formatter per unit, the same functions the Python code and the CLI use."""

from __future__ import annotations

from django import template

from profiling import units

register = template.Library()

for _name in ("ms", "size", "gb_s", "tflop_s", "tok_s", "pct", "count", "or_dash"):
    register.filter(_name, getattr(units, _name))
