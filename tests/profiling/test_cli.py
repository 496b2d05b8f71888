"""`python -m profiling`: the profile, job and devices commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiling import cli
from profiling.caching.hit_check import DEMO_SAMPLE
from profiling.config import CONVERSATIONS_MAX_BYTES
from profiling.errors import OutOfMemory
from profiling.profile import Profile
from profiling.projection.conversation_workloads import MAX_TURNS
from tests.profiling.projection.test_conversations import turns_file
from tests.profiling.tiny import save_tiny_llama_dir

pytestmark = pytest.mark.model  # profiles through the command line

REPO = Path(__file__).resolve().parents[2]
# One thread (the box has two shared cores) and no Hub access, ever.
CLI_ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
SMALL_WORKLOAD = ["--prompt-tokens", "96", "--output-tokens", "16", "--concurrency", "2"]


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m profiling ARGS`; `timeout` only stops a hang (the slowest 2-core box
    finishes well inside it), it never checks speed."""
    return subprocess.run(
        [sys.executable, "-m", "profiling", *args],
        cwd=REPO,
        env={**os.environ, **CLI_ENV},  # read now: the run's demo cache is set at start
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llama_dir(tmp_path_factory.mktemp("cli") / "tiny", max_positions=512)


def test_profile_prints_a_summary_and_writes_the_profile_json(
    model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "profile.json"
    done = run_cli(
        "profile",
        str(model_dir),
        "--device",
        "cpu",
        "--quick",
        "--json",
        str(out),
        "--gpu",
        "l4",
        *SMALL_WORKLOAD,
    )
    assert done.returncode == 0, done.stderr
    assert "Prefill" in done.stdout and "Decode" in done.stdout and "dominates" in done.stdout
    assert "[100%]" in done.stderr
    # The deployments searched on the one L4, each with its command or why there is none.
    deployments = done.stdout[done.stdout.index("\nDeployments (1× L4") :]
    assert f"$ vllm serve {model_dir} --tensor-parallel-size 1" in deployments
    data = json.loads(out.read_text())
    found = data["advice"]["deployments"]
    for row in found["configurations"]:
        command = row["command"]["text"] or f"no command: {row['command']['unavailable']}"
        assert command in deployments, row["name"]
    assert data["memory"]["weights_bytes"] > 0
    assert data["memory"]["kv_cache_bytes_per_token"] == 256
    assert data["memory"]["fit"]["gpu_kind"] == "L4"
    for point in data["prefill"]:
        assert {"prompt_tokens", "batch_size"} <= point.keys()
        assert {"median", "p10", "p90", "samples"} <= point["seconds"].keys()
    for point in data["decode"]:
        assert {"batch_size", "context_tokens", "seconds_per_token", "tokens_per_second"} <= (
            point.keys()
        )
    assert data["environment"]["device"] == "cpu" and data["environment"]["torch"]
    assert Profile.from_dict(data).config.workload.prompt_tokens == 96


def test_profile_rejects_bad_input_with_a_message_and_exit_2() -> None:
    done = run_cli("profile", "demo", "--gpu", "tpu-v9")
    assert done.returncode == 2
    assert "unknown GPU kind 'tpu-v9'" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("profile", "demo", "--concurrency", "0")
    assert done.returncode == 2 and "concurrency" in done.stderr
    assert "Traceback" not in done.stderr


def progress_events(stdout: str) -> list[dict]:
    events = [json.loads(line) for line in stdout.splitlines()]  # every line is JSON
    assert all(e["event"] == "progress" for e in events)
    return events


def write_spec(path: Path, **spec: object) -> Path:
    path.write_text(json.dumps(spec))
    return path


def test_job_streams_progress_lines_and_writes_the_profile(model_dir: Path, tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "spec.json",
        model=str(model_dir),
        device="cpu",
        quick=True,
        workload={"prompt_tokens": 64, "output_tokens": 8, "concurrency": 1},
        allowed_roots=[str(model_dir.parent)],
    )
    out = tmp_path / "result.json"
    done = run_cli("job", "--spec", str(spec), "--out", str(out))
    assert done.returncode == 0, done.stderr
    events = progress_events(done.stdout)
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {"phase", "message"} <= events[0].keys()
    profile = Profile.from_dict(json.loads(out.read_text()))
    assert profile.model.source == "local" and profile.decode


def test_job_writes_an_error_for_a_bad_model(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.json", model=str(tmp_path / "missing"), device="cpu")
    out = tmp_path / "result.json"
    done = run_cli("job", "--spec", str(spec), "--out", str(out))
    assert done.returncode == 2, done.stderr
    error = json.loads(out.read_text())["error"]
    assert error["kind"] == "bad_model" and "does not exist" in error["message"]
    progress_events(done.stdout)


def test_job_refuses_a_directory_outside_its_roots(model_dir: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.json", model=str(model_dir), allowed_roots=[str(tmp_path)])
    out = tmp_path / "result.json"
    assert cli.main(["job", "--spec", str(spec), "--out", str(out)]) == 2
    assert json.loads(out.read_text())["error"]["kind"] == "not_allowed"


def test_job_with_an_unreadable_spec_is_a_config_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text("{not json")
    out = tmp_path / "result.json"
    assert cli.main(["job", "--spec", str(spec), "--out", str(out)]) == 2
    assert json.loads(out.read_text())["error"]["kind"] == "bad_config"


@pytest.mark.parametrize(
    ("raised", "kind", "code"),
    [
        (OutOfMemory("ran out of memory"), "out_of_memory", 3),
        (MemoryError(), "out_of_memory", 3),
        (ZeroDivisionError("division by zero\nsecond line"), "internal", 4),
    ],
)
def test_job_maps_failures_to_kinds_and_exit_codes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    raised: BaseException,
    kind: str,
    code: int,
) -> None:
    from profiling import runner

    def fail(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(runner, "run_profile", fail)
    spec = write_spec(tmp_path / "spec.json", model="demo")
    out = tmp_path / "result.json"
    assert cli.main(["job", "--spec", str(spec), "--out", str(out)]) == code
    error = json.loads(out.read_text())["error"]
    assert error["kind"] == kind and "\n" not in error["message"]
    captured = capfd.readouterr()
    assert captured.out == ""  # nothing but protocol lines on stdout
    assert ("Traceback" in captured.err) == (kind == "internal")


def test_the_job_protocol_keeps_stray_prints_off_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    with cli.protocol_stdout() as events:
        print("a library chatting")
        os.write(1, b"a C library chatting\n")
        events.write('{"event": "progress"}\n')
    captured = capfd.readouterr()
    assert captured.out == '{"event": "progress"}\n'
    assert "a library chatting" in captured.err and "C library" in captured.err


def test_devices_lists_the_cpu_first() -> None:
    done = run_cli("devices")
    assert done.returncode == 0, done.stderr
    devices = json.loads(done.stdout)
    assert devices[0]["device"] == "cpu" and devices[0]["name"]
    assert {"device", "name", "memory_bytes", "gpu_kind"} <= devices[0].keys()


def test_profile_flags_build_the_config() -> None:
    args = cli.build_parser().parse_args(
        [
            "profile",
            "org/model",
            "--source",
            "hub",
            "--dtype",
            "bfloat16",
            "--gpu",
            "a100",
            "--gpus",
            "2",
            "--ttft-ms",
            "200",
            "--tpot-ms",
            "20",
            "--shared-prefix-tokens",
            "64",
            "--stated-bottleneck",
            "memory",
            "--experiments",
            "quantization, caching",
            "--allow-root",
            "/models",
            "--allow-root",
            "/data",
        ]
    )
    config = cli.config_from_args(args)
    assert (config.model, config.source, config.dtype) == ("org/model", "hub", "bfloat16")
    assert config.hardware.gpu_kind == "A100-80GB" and config.hardware.gpu_count == 2
    assert config.workload.ttft_ms == 200 and config.workload.shared_prefix_tokens == 64
    assert config.experiments == ["quantization", "caching"]
    assert config.allowed_roots == ["/models", "/data"] and config.stated_bottleneck == "memory"


def test_the_conversations_flag_puts_the_files_text_and_name_in_the_config(tmp_path: Path) -> None:
    path = tmp_path / "my chats.jsonl"
    path.write_text(DEMO_SAMPLE.read_text())
    args = cli.build_parser().parse_args(["profile", "demo", "--conversations", str(path)])
    config = cli.config_from_args(args)
    assert config.conversations == DEMO_SAMPLE.read_text()
    assert config.conversations_name == "my chats.jsonl"
    plain = cli.config_from_args(cli.build_parser().parse_args(["profile", "demo"]))
    assert (plain.conversations, plain.conversations_name) == ("", "")


def bad_conversation_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Files every `--conversations` refuses, each with words its refusal holds."""
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(CONVERSATIONS_MAX_BYTES + 1)  # sparse: refused by its size, never read
    files = {
        "missing": (tmp_path / "nope.jsonl", "No such file or directory"),
        "a directory": (tmp_path, "Is a directory"),
        "too big": (big, f"is {CONVERSATIONS_MAX_BYTES + 1:,} bytes, over the limit of 8.00 MiB"),
        "over the turn cap": (tmp_path / "turns.jsonl",
                              f"holds {MAX_TURNS + 1:,} turns, over the limit of {MAX_TURNS:,}"),
        "a bad line": (tmp_path / "bad.jsonl", "line 2: not valid JSON"),
        "not UTF-8": (tmp_path / "latin1.jsonl", "line 1: not UTF-8 text"),
        "empty": (tmp_path / "empty.jsonl", "holds no conversations"),
    }  # fmt: skip
    (tmp_path / "turns.jsonl").write_text(turns_file(MAX_TURNS + 1))
    (tmp_path / "bad.jsonl").write_text(DEMO_SAMPLE.read_text().splitlines()[0] + "\n{oops\n")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"messages": [{"role": "user", "content": "\xe9"}]}')
    (tmp_path / "empty.jsonl").write_text("")
    return files


@pytest.mark.parametrize(
    "args",
    [("llama-3.1-8b", "--gpu", "A100-80GB", "--weights", "fp8"),
     ("deepseek-v3", "--gpu", "A100-80GB", "--gpus", "16")],  # its checkpoint is block fp8
    ids=["asked-for", "the-checkpoints"],
)  # fmt: skip
def test_a_format_the_gpu_has_no_compute_for_is_refused_in_a_sentence(args):
    done = run_cli("estimate", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "A100 80GB SXM has no fp8 compute" in done.stderr
    assert "give --weights bf16, int8 or int4" in done.stderr


def test_a_bad_conversation_file_is_refused_in_estimates_words_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from profiling import runner

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the profile ran with a file it should have refused")

    monkeypatch.setattr(runner, "run_profile", never)
    for case, (path, words) in bad_conversation_files(tmp_path).items():
        assert cli.main(["profile", "demo", "--conversations", str(path)]) == 2, case
        profile_said = capsys.readouterr().err
        estimate = ["estimate", "llama-3.1-8b", "--gpu", "L4", "--conversations", str(path)]
        assert cli.main(estimate) == 2, case
        assert profile_said == capsys.readouterr().err, case
        assert profile_said.startswith("error: ") and words in profile_said, (case, profile_said)
        assert profile_said.count("\n") == 1 and "Traceback" not in profile_said


def test_profile_replays_the_conversations_of_the_file_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "my-chats.jsonl"
    path.write_text(DEMO_SAMPLE.read_text())
    out = tmp_path / "profile.json"
    done = run_cli("profile", "demo", "--device", "cpu", "--quick", "--concurrency", "2",
                   "--conversations", str(path), "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Conversations (from your file my-chats.jsonl)" in done.stdout
    data = json.loads(out.read_text())
    assert data["conversations"]["source"] == "your file my-chats.jsonl"
    assert data["conversations"]["hit_check"]["points"]  # measured on the file's turns
    assert data["config"]["conversations_name"] == "my-chats.jsonl"  # the text is not kept
    assert not any("conversations could not be read" in w for w in data["warnings"])
