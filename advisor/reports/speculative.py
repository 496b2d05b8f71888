"""The speculative-decoding section: sweep rows, draft memory and the token trace.

Built from the raw `result["speculative"]` dict the library writes. Token text
stays plain strings here; the template's autoescape is what makes it safe.
"""

from __future__ import annotations

from typing import Any

from profiling.units import UNKNOWN, significant

# Whitespace drawn visibly in the trace, so " the" and "the" differ on screen.
VISIBLE_WHITESPACE = str.maketrans({" ": "·", "\n": "↵", "\t": "→"})


def visible(text: Any) -> str:
    return str(text if text is not None else "").translate(VISIBLE_WHITESPACE)


def size(value: Any) -> str:
    """Bytes → MB below a gigabyte (drafts are small), else GB."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return UNKNOWN
    if value >= 1e9:
        return f"{significant(value / 1e9)} GB"
    return f"{significant(value / 1e6)} MB"


def sweep_rows(speculative: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per sweep point, sorted draft → batch → K, the best K per batch marked."""
    best = {
        (b.get("draft"), b.get("batch_size")): b.get("k") for b in speculative.get("best_k") or []
    }
    rows = []
    for sweep in speculative.get("sweeps") or []:
        key = (sweep.get("draft"), sweep.get("batch_size"))
        rows.append({**sweep, "is_best": best.get(key) == sweep.get("k")})
    rows.sort(key=lambda r: (str(r.get("draft")), r.get("batch_size") or 0, r.get("k") or 0))
    return rows


def memory_rows(speculative: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**draft, "weights": size(draft.get("weights_bytes"))}
        for draft in speculative.get("draft_memory") or []
    ]


def trace_rows(speculative: dict[str, Any]) -> list[dict[str, Any]]:
    """Each step: the proposed tokens (accepted, rejected, or discarded after a rejection)
    and the target's own token after them."""
    rows = []
    for number, step in enumerate(speculative.get("trace") or [], start=1):
        accepted = int(step.get("accepted_count") or 0)
        tokens = []
        for i, text in enumerate(step.get("proposed_text") or []):
            state = "acc" if i < accepted else ("rej" if i == accepted else "skip")
            tokens.append({"text": visible(text), "state": state})
        rows.append({
            "number": number,
            "tokens": tokens,
            "accepted": accepted,
            "target": visible(step.get("target_text")),
            "bonus": bool(step.get("bonus")),
        })  # fmt: skip
    return rows


def section_context(speculative: Any) -> dict[str, Any] | None:
    if not isinstance(speculative, dict):
        return None
    return {
        "raw": speculative,
        "sweeps": sweep_rows(speculative),
        "memory": memory_rows(speculative),
        "trace": trace_rows(speculative),
    }
