"""Quantization, as the registry knows it (`profiling.techniques`): its switch and options."""

from __future__ import annotations

from profiling.option_type import NAMES, Option
from profiling.options import FORM_PRECISIONS, PRECISIONS, QUANT_VARIANTS
from profiling.technique_type import Switch, Technique

QUANTIZATION: Technique = Technique(
    "quantization", "Quantization",
    result_path="profiling.quantization.results:QuantizationResult",
    advise_path="profiling.quantization.advice:quantization",
    run_path="profiling.quantization.experiment:run_for_context",
    switch=Switch("Measure quantization",
                  "Memory, speed and quality per precision against the reference, with "
                  "greedy outputs side by side."),
    options=(
        Option(
            "precisions", "quantization", NAMES, (), "Precisions to compare",
            "Two or more. The first ticked or listed, in this list's order, is the reference "
            "the others are compared against (fp32 on a CPU; bf16 is the usual one on a GPU). "
            "int4 and fp8 need a CUDA GPU: a CPU worker reports them as “not available here” "
            "rather than skipping them. None: the run's dtype, int8 and int4.",
            "--precisions", choices=tuple(PRECISIONS), initial=FORM_PRECISIONS,
            choice_labels=tuple(f"{name} — {label}" for name, label in PRECISIONS.items()),
            metavar="fp32,int8",
        ),
        Option(
            "quant_variants", "quantization", NAMES, (),
            "Also measure each quantized precision with",
            "Each quantized precision keeps the output head and the token embeddings in the "
            "reference precision, as serving engines do. Each variant ticked here is measured "
            "beside it, one part changed, to show what that part costs and saves.",
            "--quant-variants", choices=tuple(QUANT_VARIANTS), metavar="lm_head,embeddings",
            choice_labels=tuple(QUANT_VARIANTS.values()),
        ),
    ),
    work=2.0,
    own_weights=True,
    missing_hint="run it to measure speed and quality on your model",
)  # fmt: skip
