"""Text that can be stored: every database takes it, every page can show it.

PostgreSQL refuses NUL in text and JSON; a lone surrogate (U+D800–U+DFFF, not
part of a pair) cannot be encoded as UTF-8 at all. Both arrive easily through
JSON escapes ("\\u0000", "\\ud800"), so every text field and prompt is checked
once, where it comes in, and refused with the place named.
"""

from __future__ import annotations

import re

_BAD = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """What makes `text` unstorable ("a NUL character at position 4"), or None."""
    found = _BAD.search(text)
    if found is None:
        return None
    char = found.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"
    return f"{what} at position {found.start() + 1}"
