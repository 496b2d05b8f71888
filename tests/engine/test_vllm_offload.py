"""The host-tier advice's flags, read by the installed vLLM's own argument parser: the
command the advice prints starts a server with the tier it names (a GPU is needed to
run one; parsing them needs none)."""

from __future__ import annotations

import subprocess

from profiling.engine import vllm
from profiling.projection.host_tier import offload_flags
from profiling.units import GIB
from tests.engine.engine_env import require_engine
from tests.engine.test_engine_environment import ended

PARSE = (
    "import runpy, sys; d = runpy.run_path({driver!r}); "
    "import importlib.metadata as m; m.version = d['_vllm_version']; "
    "from vllm.engine.arg_utils import EngineArgs; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "args = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(sys.argv[1:]); "
    "e = EngineArgs.from_cli_args(args); print(e.kv_offloading_backend, e.kv_offloading_size)"
)


def test_the_offload_flags_are_vllms_own():
    python = require_engine()
    flags = offload_flags(int(9.2 * GIB))
    done = subprocess.run(
        [str(python), "-I", "-c", PARSE.format(driver=str(vllm.DRIVER)), *flags],
        capture_output=True, text=True, timeout=300, env=vllm.environment("cpu"),
    )  # fmt: skip
    assert done.returncode == 0, ended(done.returncode, done.stderr, vllm.failure_reason)
    assert done.stdout.strip().splitlines()[-1] == "native 10.0"
