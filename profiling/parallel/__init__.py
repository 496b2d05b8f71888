"""Model parallelism and prefill/decode disaggregation.

`results` has no torch import (the site reads it); `plans` and
`disaggregation` are pure arithmetic; `interference` and `tp_worker` run the
model. The experiment entry point is `profiling.parallel.experiment`.
"""
