"""The speculative-decoding section: sweep rows, draft memory and the token trace.

Built from the typed `SpeculativeResult` of the profile. Token text
stays plain strings here; the template's autoescape is what makes it safe.
"""

from __future__ import annotations

from typing import Any

from profiling.speculative.results import SpeculativeResult
from profiling.units import size

# Whitespace drawn visibly in the trace, so " the" and "the" differ on screen.
VISIBLE_WHITESPACE = str.maketrans({" ": "·", "\n": "↵", "\t": "→"})


def visible(text: Any) -> str:
    return str(text if text is not None else "").translate(VISIBLE_WHITESPACE)


def sweep_rows(speculative: SpeculativeResult) -> list[dict[str, Any]]:
    """One row per sweep point, sorted draft → batch → K, the best K per batch marked."""
    best = {(b.draft, b.batch_size): b.k for b in speculative.best_k}
    rows = [
        {**vars(sweep), "is_best": best.get((sweep.draft, sweep.batch_size)) == sweep.k}
        for sweep in speculative.sweeps
    ]
    rows.sort(key=lambda r: (r["draft"], r["batch_size"], r["k"]))
    return rows


def memory_rows(speculative: SpeculativeResult) -> list[dict[str, Any]]:
    return [
        {**vars(draft), "weights": size(draft.weights_bytes)} for draft in speculative.draft_memory
    ]


def trace_rows(speculative: SpeculativeResult) -> list[dict[str, Any]]:
    """Each step: the proposed tokens (accepted, rejected, or discarded after a rejection)
    and the target's own token after them."""
    rows = []
    for number, step in enumerate(speculative.trace, start=1):
        tokens = []
        for i, text in enumerate(step.proposed_text):
            state = (
                "acc"
                if i < step.accepted_count
                else ("rej" if i == step.accepted_count else "skip")
            )
            tokens.append({"text": visible(text), "state": state})
        rows.append({
            "number": number,
            "tokens": tokens,
            "accepted": step.accepted_count,
            "target": visible(step.target_text),
            "bonus": step.bonus,
        })  # fmt: skip
    return rows


def section_context(speculative: SpeculativeResult | None) -> dict[str, Any] | None:
    if speculative is None:
        return None
    return {
        "raw": speculative,
        "sweeps": sweep_rows(speculative),
        "memory": memory_rows(speculative),
        "trace": trace_rows(speculative),
    }
