"""The user's prompt sample: parse a file of real prompts, fast and without torch.

The site calls `parse_prompt_sample` in its form validation and the CLI
calls `read_prompt_sample` for `--prompts FILE`; both return a list of
prompt strings in file order (the order a server would see them) or raise
`PromptSampleError`, a `ConfigError` whose message names the problem and the
line, written for the person who uploaded the file.

Two formats, told apart by the first non-blank line:
- JSON Lines, when that line starts with "{": one object per line, with a
  `prompt` string or a chat `messages` list of `{"role", "content"}` objects
  (`content` a string, or a list of `{"type": "text", "text"}` parts).
- Plain text otherwise: one prompt per line.
Blank lines are skipped in both. A UTF-8 byte-order mark is ignored.

Chat messages are rendered here, once, to a single string in a plain format:
each message becomes `"{role}: {content}"` and the messages are joined with
a newline. Model chat templates are not applied (a worker may not have one,
and the site never loads a tokenizer); a conversation's later turns still
extend its earlier turns' text, which is what prefix reuse depends on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from profiling import units
from profiling.config import PROMPT_SAMPLE_MAX_BYTES, PROMPT_SAMPLE_MAX_PROMPTS, ConfigError
from profiling.text import text_problem

MESSAGE_FORMAT = "{role}: {content}"  # one rendered chat message
MESSAGE_SEPARATOR = "\n"


class PromptSampleError(ConfigError):
    """The prompt sample cannot be used; the message says why (and on which line)."""


def read_prompt_sample(path: str | Path) -> list[str]:
    """The prompts of the file at `path`; its size is checked before it is read."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > PROMPT_SAMPLE_MAX_BYTES:
            raise PromptSampleError(_too_big(size))
        data = path.read_bytes()
    except OSError as exc:
        raise PromptSampleError(f"cannot read the prompt file {path}: {exc.strerror}") from None
    return parse_prompt_sample(data)


def parse_prompt_sample(data: bytes | str) -> list[str]:
    """The prompts in `data` (a file's bytes, or text); see the module docstring."""
    text = _decode(data)
    lines = text.split("\n")  # not splitlines(): U+2028 and friends stay inside a prompt
    first = next((line.strip() for line in lines if line.strip()), None)
    if first is None:
        raise PromptSampleError("the prompt file is empty: it holds no prompts")
    parse_line = _jsonl_prompt if first.startswith("{") else _text_prompt
    prompts: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(prompts) == PROMPT_SAMPLE_MAX_PROMPTS:
            raise PromptSampleError(
                f"the prompt file has more than {PROMPT_SAMPLE_MAX_PROMPTS:,} prompts "
                f"(line {number} is one too many); send a smaller sample"
            )
        prompts.append(parse_line(line, number))
    return prompts


def render_messages(messages: list[dict[str, str]]) -> str:
    """One string for a chat: `role: content` per message, one per line."""
    return MESSAGE_SEPARATOR.join(
        MESSAGE_FORMAT.format(role=m["role"], content=m["content"]) for m in messages
    )


def _too_big(size: int) -> str:
    return (
        f"the prompt file is {units.size(size)}; the limit is {units.size(PROMPT_SAMPLE_MAX_BYTES)}"
    )


def _decode(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > PROMPT_SAMPLE_MAX_BYTES:
        raise PromptSampleError(_too_big(len(data)))
    nul = data.find(b"\0")
    if nul >= 0:
        raise PromptSampleError(
            f"the prompt file looks binary (a NUL byte on line {_line_of(data, nul)}); "
            "send plain text or JSON Lines"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PromptSampleError(
            f"the prompt file is not UTF-8 text (an invalid byte on line "
            f"{_line_of(data, exc.start)}); save it as UTF-8"
        ) from None


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _text_prompt(line: str, number: int) -> str:
    return line.rstrip("\r")


def _jsonl_prompt(line: str, number: int) -> str:
    prompt = _jsonl_record_prompt(line, number)
    problem = text_problem(prompt)
    if problem is not None:
        raise PromptSampleError(f"line {number}: the prompt holds {problem}; remove it")
    return prompt


def _jsonl_record_prompt(line: str, number: int) -> str:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise PromptSampleError(f"line {number}: not valid JSON ({exc})") from None
    except RecursionError:
        raise PromptSampleError(f"line {number}: JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise PromptSampleError(f"line {number}: expected a JSON object, got {_kind(record)}")
    if "prompt" in record:
        prompt = record["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise PromptSampleError(f'line {number}: "prompt" must be a non-empty string')
        return prompt
    if "messages" in record:
        return render_messages(_messages(record["messages"], number))
    raise PromptSampleError(f'line {number}: expected a "prompt" string or a "messages" list')


def _messages(value: Any, number: int) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise PromptSampleError(f'line {number}: "messages" must be a non-empty list')
    out = []
    for i, message in enumerate(value, start=1):
        where = f"line {number}, message {i}"
        if not isinstance(message, dict):
            raise PromptSampleError(f"{where}: expected an object, got {_kind(message)}")
        role = message.get("role")
        if not isinstance(role, str) or not role.strip():
            raise PromptSampleError(f'{where}: "role" must be a non-empty string')
        out.append({"role": role, "content": _content(message.get("content"), where)})
    return out


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else None
    if parts and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        return "".join(p["text"] for p in parts)
    raise PromptSampleError(
        f'{where}: "content" must be a string or a list of {{"type": "text", "text": ...}} parts'
    )


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "true/false"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else "null"
    )
