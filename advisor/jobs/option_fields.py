"""The new-job form's fields for the declared options (`profiling.options`).

Label, help text, range and default come from the declaration; only the
widget is the form's own choice. K values are typed as comma text ("1,2,4")
and precisions ticked; both are stored on the row as lists.
"""

from __future__ import annotations

from django import forms

from profiling.options import BOOL, CHOICE, FLOAT, INT, INTS, NAMES, TEXT, Option, parse_ints


def form_field(option: Option) -> forms.Field:
    common = {"label": option.label, "help_text": option.help}
    if option.kind == INT:
        optional = {"required": False, "widget": forms.NumberInput(attrs={"placeholder": "none"})}
        return forms.IntegerField(
            min_value=option.low, max_value=option.high, **(optional if option.optional else {}),
            **common,
        )  # fmt: skip
    if option.kind == FLOAT:
        return forms.FloatField(
            required=not option.optional,
            min_value=option.low,
            max_value=option.high,
            widget=forms.NumberInput(attrs={"step": "any", "placeholder": "none"}),
            **common,
        )
    if option.kind == BOOL:
        return forms.BooleanField(required=False, **common)
    if option.kind in (TEXT, INTS):
        return forms.CharField(max_length=option.max_length or 64, required=False, **common)
    if option.kind == NAMES:
        labels = option.choice_labels or tuple(map(str, option.choices))
        return forms.MultipleChoiceField(
            required=False,
            choices=list(zip(option.choices, labels, strict=True)),
            widget=forms.CheckboxSelectMultiple,
            **common,
        )
    if option.kind == CHOICE:
        blank = "Default" if option.optional else None
        choices = [("", blank)] if blank else []
        choices += [(str(c), f"{c} {option.unit}".strip() if c else "Off") for c in option.choices]
        if all(isinstance(c, int) for c in option.choices):
            coerce, empty = int, None
        else:  # names: "" is itself a choice ("Off")
            coerce, empty = str, option.default
        return forms.TypedChoiceField(
            required=False, choices=choices, coerce=coerce, empty_value=empty, **common
        )
    raise ValueError(f"no form field for option kind {option.kind!r}")


def clean_ints(option: Option, text: str) -> list[int]:
    """Numbers as stored ([1, 2, 4]), sorted and each once; blank is [] (the default)."""
    numbers = parse_ints(text)
    if numbers is None:
        raise forms.ValidationError(
            f"{option.label}: whole numbers separated by commas, e.g. 1,2,4."
        )
    problem = option.problem(numbers)
    if problem is not None:
        raise forms.ValidationError(problem)
    return numbers
