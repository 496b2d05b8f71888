"""Measurements on the serving engine users deploy (vLLM), beside the eager ones.

`run_engine(target, plan, progress)` (experiment.py) starts the user's model in
the engine's OpenAI-compatible server from the engine's own Python environment,
drives it with the engine's own benchmark client at the user's workload, reads
the server's Prometheus counters, and stops it, for each configuration a
technique needs. Its typed result is `results.EngineResult`, stored as the
profile's `engine` section.

Everything engine-specific (where it lives, its flags for each technique, its
benchmark client, its metric names, its log) is behind `interface.Engine`, which
`vllm.py` implements; the process handling (`server.py`, `_guard.py`), the
counters (`metrics.py`) and the techniques are engine-neutral, so another
OpenAI-compatible engine (SGLang) is a second module like `vllm.py`, listed here.
"""

from __future__ import annotations

from profiling.engine import vllm
from profiling.engine.interface import Engine

ENGINES: dict[str, Engine] = {vllm.NAME: vllm}  # type: ignore[dict-item]
