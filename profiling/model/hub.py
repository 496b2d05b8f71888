"""Models from the Hugging Face Hub: safe files only, and failures that say what to do next.

Only configs, safetensors weights and tokenizer files are fetched (never
pickles or code); every failure of the Hub client becomes a `ModelSourceError`
whose message names the next step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import errors, hf_hub_download

from profiling.errors import ModelSourceError, one_line

# Files fetched from the Hub: configs, weights and tokenizer files only.
HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt"]


def _hub_call(repo_id: str, fn: Callable[[], str]) -> Path:
    """Run a huggingface_hub download and turn its failures into ModelSourceError."""
    try:
        return Path(fn())
    except errors.GatedRepoError as exc:
        raise ModelSourceError(
            f"{repo_id} is gated: this worker has no access to it; accept its terms on the Hub "
            "and give the worker a token that has access (HF_TOKEN)"
        ) from exc
    except errors.RepositoryNotFoundError as exc:
        raise ModelSourceError(f"{repo_id} was not found on the Hugging Face Hub") from exc
    except errors.RevisionNotFoundError as exc:
        raise ModelSourceError(f"{repo_id}: revision not found") from exc
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as exc:
        raise ModelSourceError(
            f"{repo_id} is not in the local Hub cache and the Hub cannot be reached; "
            + offline_hint(repo_id)
        ) from exc
    except (errors.HfHubHTTPError, errors.HFValidationError, OSError, ValueError) as exc:
        raise ModelSourceError(
            f"could not download {repo_id}: {one_line(exc)}; {offline_hint(repo_id)}"
        ) from exc
    except Exception as exc:  # transport errors (httpx) and anything else the Hub raises
        message = f"could not download {repo_id}: {type(exc).__name__}: {one_line(exc)}"
        raise ModelSourceError(f"{message}; {offline_hint(repo_id)}") from exc


def offline_hint(repo_id: str) -> str:
    """The next step when the Hub cannot serve a model: a local copy, or an estimate that
    needs only the model's config.json."""
    return (
        f"download {repo_id} where the Hub is reachable and run the job on that directory "
        "(under the worker's ADVISOR_MODEL_ROOTS), or estimate it from its config.json alone: "
        "python -m profiling estimate /path/to/config.json --gpu KIND"
    )


def download(repo_id: str) -> Path:
    """Snapshot configs, safetensors and tokenizer files of a Hub repo."""
    # patched: tests replace huggingface_hub.snapshot_download
    from huggingface_hub import snapshot_download

    return _hub_call(repo_id, lambda: snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))


def download_config(repo_id: str) -> Path:
    return _hub_call(repo_id, lambda: hf_hub_download(repo_id, "config.json"))


def revision(path: Path) -> str | None:
    """The commit hash of a Hub snapshot directory (its name), if it is one."""
    return path.name if re.fullmatch(r"[0-9a-f]{40}", path.name) else None
