"""The prompt-sample parser and the prefix-reuse trie: no torch, clear errors, fast."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from profiling.caching import reuse
from profiling.caching.report import interpolate_warm
from profiling.caching.results import PrefixPoint
from profiling.caching.sample import (
    PromptSampleError,
    parse_prompt_sample,
    read_prompt_sample,
    render_messages,
)
from profiling.config import (
    PROMPT_SAMPLE_MAX_BYTES,
    PROMPT_SAMPLE_MAX_PROMPTS,
    ConfigError,
    ProfileConfig,
)
from profiling.results import Samples

REPO = Path(__file__).resolve().parents[3]


def jsonl(*records: object) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


# -- parsing ----------------------------------------------------------------------


def test_plain_text_is_one_prompt_per_line_skipping_blank_lines() -> None:
    data = "\ufeffwhat is KV caching?\r\n\n   \nwhy is prefill slow?\n".encode()
    assert parse_prompt_sample(data) == ["what is KV caching?", "why is prefill slow?"]


def test_jsonl_takes_prompt_strings_and_chat_messages() -> None:
    data = jsonl(
        {"prompt": "summarise this"},
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ]
        },
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}]},
    )
    assert parse_prompt_sample(data) == [
        "summarise this",
        "system: Be brief.\nuser: Hi",
        "user: ab",
    ]
    assert render_messages([{"role": "user", "content": "x"}]) == "user: x"


def test_a_prompt_may_hold_unicode_line_separators() -> None:
    assert parse_prompt_sample("one\u2028line\nnext") == ["one\u2028line", "next"]


@pytest.mark.parametrize("data", [b"", b"\n \n\t\n"])
def test_it_rejects_an_empty_file(data: bytes) -> None:
    with pytest.raises(PromptSampleError, match="empty"):
        parse_prompt_sample(data)


def test_it_rejects_binary_data_naming_the_line() -> None:
    with pytest.raises(PromptSampleError, match=r"binary \(a NUL byte on line 2\)"):
        parse_prompt_sample(b"fine\nnot\x00fine\n")


def test_it_rejects_text_that_is_not_utf8_naming_the_line() -> None:
    with pytest.raises(PromptSampleError, match="not UTF-8 text.*line 3"):
        parse_prompt_sample(b"one\ntwo\nthr\xffee\n")


def test_it_rejects_a_huge_file_before_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as f:
        f.truncate(PROMPT_SAMPLE_MAX_BYTES + 1)  # sparse: no 16 MiB written
    with pytest.raises(PromptSampleError, match="limit is 16.0 MiB"):
        read_prompt_sample(path)
    with pytest.raises(PromptSampleError, match="limit is 16.0 MiB"):
        parse_prompt_sample(b"x" * (PROMPT_SAMPLE_MAX_BYTES + 1))


def test_it_rejects_too_many_prompts_naming_the_line() -> None:
    data = "\n".join(f"prompt {i}" for i in range(PROMPT_SAMPLE_MAX_PROMPTS + 1))
    with pytest.raises(PromptSampleError, match="more than 20,000 prompts.*line 20001"):
        parse_prompt_sample(data)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "unclosed', "line 2: not valid JSON"),
        ('["a list"]', "line 2: expected a JSON object, got a list"),
        ('{"text": "x"}', 'line 2: expected a "prompt" string or a "messages" list'),
        ('{"prompt": 3}', 'line 2: "prompt" must be a non-empty string'),
        ('{"messages": []}', 'line 2: "messages" must be a non-empty list'),
        ('{"messages": [{"content": "x"}]}', 'line 2, message 1: "role"'),
        (
            '{"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": 7}]}',
            'line 2, message 2: "content" must be a string',
        ),
    ],
)
def test_it_rejects_malformed_jsonl_naming_the_line(line: str, message: str) -> None:
    with pytest.raises(PromptSampleError) as raised:
        parse_prompt_sample(b'{"prompt": "fine"}\n' + line.encode() + b"\n")
    assert message in str(raised.value)


def test_errors_are_config_errors_a_form_or_the_cli_can_show(tmp_path: Path) -> None:
    assert issubclass(PromptSampleError, ConfigError)
    with pytest.raises(PromptSampleError, match="cannot read the prompt file"):
        read_prompt_sample(tmp_path / "missing.txt")


def test_the_config_carries_the_sample_and_checks_its_size() -> None:
    config = ProfileConfig(model="demo", prompt_sample=["a", "b c"])
    config.validate()
    assert ProfileConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="20,000"):
        config.replace(prompt_sample=["x"] * (PROMPT_SAMPLE_MAX_PROMPTS + 1)).validate()
    with pytest.raises(ConfigError, match="non-empty string"):
        config.replace(prompt_sample=["ok", ""]).validate()
    with pytest.raises(ConfigError, match="limit is 16.0 MiB"):
        config.replace(prompt_sample=["x" * (PROMPT_SAMPLE_MAX_BYTES + 1)]).validate()


def test_the_parser_and_the_analysis_import_without_torch() -> None:
    code = (
        "import json, sys\n"
        "import profiling.caching.sample, profiling.caching.reuse, profiling.caching.results\n"
        "import profiling.caching.report, profiling.caching.experiment\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# -- the reuse trie ----------------------------------------------------------------


def test_reuse_on_a_hand_made_sample_has_the_known_answer() -> None:
    prompts = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9], [7, 8], [1, 2, 3, 4]]
    assert reuse.shared_prefix_lengths(prompts) == [0, 3, 2, 0, 4]
    result = reuse.analyse(prompts, block_size=2)
    # The repeated prompt reuses all but its last token, which a server computes.
    assert (result.prompts, result.total_tokens, result.reusable_tokens) == (5, 17, 8)
    assert result.reuse_fraction == pytest.approx(8 / 17)
    assert result.hit_rate == pytest.approx(3 / 5)
    assert (result.block_reusable_tokens, result.block_hit_rate) == (6, pytest.approx(3 / 5))
    assert result.unique_tokens == 8  # the trie's nodes: 1 2 3 4 5 9 7 8
    assert result.median_reused_tokens == 2
    counts = {(b.low, b.high): b.prompts for b in result.shared_prefix_histogram}
    assert counts[(0, 0)] == 2 and counts[(1, 15)] == 3 and counts[(4096, None)] == 0


def test_reuse_equals_a_brute_force_search_over_earlier_prompts() -> None:
    rng = random.Random(0)
    stems = [[rng.randrange(4) for _ in range(rng.randrange(1, 12))] for _ in range(8)]
    prompts = [
        rng.choice(stems)[: rng.randrange(0, 12)] + [rng.randrange(4) for _ in range(5)]
        for _ in range(300)
    ]

    def brute(i: int) -> int:
        return max(
            [reuse.common_prefix_length(prompts[i], prompts[j]) for j in range(i)], default=0
        )

    assert reuse.shared_prefix_lengths(prompts) == [brute(i) for i in range(len(prompts))]
    assert reuse.common_prefix_length([1, 2, 3], [1, 2, 3, 4]) == 3
    assert reuse.common_prefix_length([5], [6]) == 0


def test_ten_thousand_prompts_parse_and_analyse_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system = "You are the support assistant of a weather service. Answer in one sentence. " * 4
    data = jsonl(
        *(
            {"messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}
            for q in (f"Will it rain in city {i} on day {i % 7}?" for i in range(10_000))
        )
    )
    compared: list[int] = []
    real = reuse.common_prefix_length

    def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
        compared.append(1)
        return real(a, b)

    monkeypatch.setattr(reuse, "common_prefix_length", common_prefix_length)
    prompts = parse_prompt_sample(data)
    result = reuse.analyse([list(p.encode()) for p in prompts], tokenization="bytes")
    # The work, not the seconds: each prompt is compared with at most its two sorted
    # neighbours among the earlier ones, never with all of them (50 million pairs here).
    assert len(compared) <= 2 * len(prompts)
    assert result.prompts == 10_000 and result.hit_rate == pytest.approx(0.9999)
    assert result.reuse_fraction > 0.8


# -- combining with the measured curve ---------------------------------------------


def point(share: float, warm: float, cold: float = 0.1) -> PrefixPoint:
    return PrefixPoint(
        prompt_tokens=100,
        prefix_tokens=round(share * 100),
        prefix_share=share,
        suffixes=2,
        cold_ttft_seconds=Samples([cold, cold]),
        warm_ttft_seconds=Samples([warm, warm]),
        warm_to_cold=warm / cold,
        prefix_cache_bytes=0,
        outputs_match=True,
        tokens_match=True,
        max_abs_logit_diff=0.0,
        greedy_tokens=4,
    )


def test_warm_ttft_is_interpolated_between_measured_shares_and_clamped_outside() -> None:
    points = [point(0.5, 0.05), point(0.0, 0.1), point(0.9, 0.01)]
    assert interpolate_warm(points, 0.25) == pytest.approx(0.075)
    assert interpolate_warm(points, 0.7) == pytest.approx(0.03)
    assert interpolate_warm(points, 0.0) == pytest.approx(0.1)
    assert interpolate_warm(points, 0.99) == pytest.approx(0.01)
