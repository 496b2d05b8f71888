"""Speculative decoding: our own exact greedy loop, its drafts, and its result types.

`results` has no torch import (the site reads it); `drafting` and `loop` do.
The experiment entry point is `profiling.speculative.experiment.run_speculative`.
"""
