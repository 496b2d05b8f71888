"""The shipped, versioned texts the experiments generate from and score on.

A prompt set for the generation experiments (speculative decoding, the
quantization's greedy outputs, the caching's fallback text) and an evaluation
text for perplexity. Below every technique, so each can use them without
importing another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
PROMPTS_PATH = DATA / "prompts_v1.json"
EVAL_TEXT_PATH = DATA / "eval_text_v1.json"


@dataclass
class PromptSet:
    version: int
    prompts: list[str]


@dataclass
class EvalText:
    version: int
    text: str


def load_prompts(path: Path = PROMPTS_PATH) -> PromptSet:
    """The shipped, versioned prompt set (shared by the generation experiments)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return PromptSet(version=int(data["version"]), prompts=list(data["prompts"]))


def load_eval_text(path: Path = EVAL_TEXT_PATH) -> EvalText:
    """The shipped, versioned evaluation text scored for perplexity."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return EvalText(int(data["version"]), str(data["text"]))
