"""Measurements on the serving engine users deploy (vLLM), beside the eager ones.

`run_engine(target, plan, progress)` (experiment.py) starts the user's model in
the engine's OpenAI-compatible server from the engine's own Python environment,
drives it with the engine's own benchmark client at the user's workload, reads
the server's Prometheus counters, and stops it, for each configuration a
technique needs. Its typed result is `results.EngineResult`, stored as the
profile's `engine` section.

The engine-specific parts (where it lives, its flags, its log) are in
`vllm.py`; the process handling (`server.py`, `_guard.py`) and the counters
(`metrics.py`) are engine-neutral, so another OpenAI-compatible engine (SGLang)
is a second module like `vllm.py`.
"""

ENGINES = ("vllm",)
