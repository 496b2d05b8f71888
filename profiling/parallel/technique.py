"""Parallelism and prefill/decode disaggregation, as the registry knows them
(`profiling.techniques`): the parallel experiment measures both, and keeps
disaggregation's result beside its own."""

from __future__ import annotations

from profiling.option_type import CHOICE, Option
from profiling.options import TP_MEASURE_SIZES
from profiling.technique_type import Switch, Technique

PARALLEL: Technique = Technique(
    "parallel", "Parallelism across devices",
    result_path="profiling.parallel.results:ParallelResult",
    advise_path="profiling.parallel.advice:parallel",
    run_path="profiling.parallel.experiment:run_for_context",
    switch=Switch("Measure parallelism and disaggregation",
                  "Per-device memory of tensor × pipeline splits and the fewest devices that "
                  "fit; how much a prefill joining decode steps slows them, and the prefill : "
                  "decode worker ratio and KV transfer of a split deployment."),
    heading="Split work across devices",
    options=(
        Option(
            "tp_measure", "parallel", CHOICE, None, "Measured tensor-parallel run",
            "Also run the model split over this many processes (torchrun) against one "
            "process: per-device weights, prefill and decode time, outputs checked equal. "
            "On a CPU worker, 2 runs two processes with gloo: slow, but it checks the split. "
            "4 and 8 need that many GPUs. None: 2 where the worker has 2+ CUDA GPUs, "
            "else off; 0: off.",
            "--tp-measure", choices=TP_MEASURE_SIZES, optional=True, unit="processes",
        ),
    ),
    work=0.5,
    missing_hint="run it to size each device from the real parameters",
)  # fmt: skip

DISAGGREGATION: Technique = Technique(
    "disaggregation", "Prefill/decode disaggregation",
    result_path="profiling.parallel.results:DisaggregationResult",
    advise_path="profiling.parallel.advice:disaggregation",
    measured_by="parallel",
    missing_hint="the parallel experiment measures a prefill joining decode steps",
)  # fmt: skip
