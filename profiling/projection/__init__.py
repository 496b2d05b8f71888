"""Serving projected from a step model: what a workload would do on GPUs not measured.

`calibration` (the rates of one forward pass: datasheet peaks times assumed
efficiencies, or fitted to a profile's measured points by `rate_fit`, with each
point's leave-one-out error), `step_time` (one engine step's seconds from the
model's shapes and those rates, with the collectives of a parallel layout),
`serving` (the simulated engine: continuous batching with chunked prefill at the
user's concurrency), `estimate` (the user's workload projected: TTFT, TPOT,
throughput), `precision` (the serving precisions and what each GPU runs), `fit`
(do the weights and the KV cache fit, after the engine's reserve) and `verdict`
(the measured phases read as memory- or compute-bound, and the batch nearest the
user's concurrency).

No torch import. Below it: the measurements (`profiling.measure`) and the model's
shapes and bytes (`profiling.model`); above it: the techniques and the advice.
"""
