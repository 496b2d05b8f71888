"""The model: resolving and loading it, and what it is made of.

`loading` (a demo name, a Hub id or a local path resolved and loaded:
safetensors only, no remote code, local paths under the allowed roots), `hub`
(downloads from the Hugging Face Hub), `shapes` (parameters, weight and KV bytes,
FLOPs and bytes of a pass, read from the model's config), `memory` (weight, KV
and peak bytes measured from the loaded tensors), `info` (what was loaded, as a
profile stores it), the built-in demo family (`demo`: the recipe and its cache,
`demo_corpus`, `demo_training`) and `prompts` (the fixed prompt set and
evaluation text, `profiling/data/`).

Below the projection; it reads the measurement layer's progress and nothing above.
"""
