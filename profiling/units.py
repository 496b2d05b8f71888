"""Number formatting with units, one way everywhere: ms, bytes (binary: KiB, MiB, GiB,
as devices report memory), rates (GB/s and TFLOP/s in SI, as datasheets count them),
tok/s, percentages, and ratios ("3.6× smaller").

Every formatter prints "—" for a value that is unknown (None, NaN, not a
number), so a missing measurement never shows as 0 and never raises. The
site's templates use these as filters (`advisor.reports.templatetags.units`);
its Python code and the library's text use them directly. No torch, no Django.
"""

from __future__ import annotations

import math
from typing import Any

UNKNOWN = "—"
KIB, MIB, GIB = 2**10, 2**20, 2**30


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(number: float) -> str:
    """About three significant figures, thousands separated: 1,234 · 12.3 · 0.0123."""
    size = abs(number)
    if size >= 100 or size == 0:
        return f"{number:,.0f}"
    if size >= 10:
        return f"{number:.1f}"
    if size >= 1:
        return f"{number:.2f}"
    # Fixed point, never 9.8e-05: three significant figures after the zeros.
    decimals = 2 - math.floor(math.log10(size))
    return f"{number:.{decimals}f}"


def _with_unit(value: Any, scale: float, unit: str) -> str:
    number = _number(value)
    return UNKNOWN if number is None else f"{significant(number * scale)} {unit}"


def ms(value: Any, unit: str = "s") -> str:
    """Seconds (default) or, with `ms:"ms"`, milliseconds → "12.3 ms"."""
    return _with_unit(value, 1.0 if unit == "ms" else 1e3, "ms")


def size(value: Any) -> str:
    """Bytes in the largest binary unit that keeps a number of at least 1: "66 B", "1.50 MiB"."""
    number = _number(value)
    if number is None:
        return UNKNOWN
    for scale, unit in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if abs(number) >= scale:
            return f"{significant(number / scale)} {unit}"
    return f"{number:,.0f} B"


def gb_s(value: Any) -> str:
    """Bytes per second → "123 GB/s"."""
    return _with_unit(value, 1e-9, "GB/s")


def tflop_s(value: Any) -> str:
    """FLOP per second → "12.3 TFLOP/s"."""
    return _with_unit(value, 1e-12, "TFLOP/s")


def tok_s(value: Any) -> str:
    """Tokens per second → "1,234 tok/s"."""
    return _with_unit(value, 1.0, "tok/s")


def pct(value: Any) -> str:
    """A fraction (0.123) → "12.3 %"."""
    return _with_unit(value, 100.0, "%")


# A ratio this close to 1 reads as "same" rather than "1.00× faster".
SAME_WITHIN = 1.005


def _factor(factor: float) -> str:
    if factor < 1.1:
        return f"{factor:.2f}"
    return f"{factor:.1f}" if factor < 10 else f"{factor:,.0f}"


def ratio(value: Any, reference: Any, below: str, above: str) -> str:
    """How `value` compares with `reference`: "3.6× smaller" when below it (with
    below="smaller"), "1.4× larger" when above, "same" within 0.5 %; "" when unknown."""
    number, ref = _number(value), _number(reference)
    if number is None or ref is None or number <= 0 or ref <= 0:
        return ""
    factor = max(number, ref) / min(number, ref)
    if factor < SAME_WITHIN:
        return "same"
    return f"{_factor(factor)}× {below if number < ref else above}"


def count(value: Any) -> str:
    """A whole number with thousands separators → "1,234,567"."""
    number = _number(value)
    return UNKNOWN if number is None else f"{round(number):,}"


def number_text(value: Any) -> str:
    """A bare number at about three significant figures (a logit difference), or "—"."""
    number = _number(value)
    return UNKNOWN if number is None else significant(number)


def or_dash(value: Any) -> Any:
    """The value, or "—" when it is empty or unknown."""
    return UNKNOWN if value in (None, "") else value
