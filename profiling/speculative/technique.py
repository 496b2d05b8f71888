"""Speculative decoding, as the registry knows it (`profiling.techniques`): its switch and
options."""

from __future__ import annotations

from profiling.option_type import BOOL, INTS, TEXT, Option
from profiling.options import FULL_KS, QUICK_KS
from profiling.technique_type import Switch, Technique

SPECULATIVE: Technique = Technique(
    "speculative", "Speculative decoding",
    result_path="profiling.speculative.results:SpeculativeResult",
    advise_path="profiling.speculative.advice:speculative",
    run_path="profiling.speculative.experiment:run_technique",
    switch=Switch("Measure speculative decoding",
                  "Acceptance and speedup per draft length K, with a token trace."),
    options=(
        Option(
            "draft_model", "speculative", TEXT, "", "Draft model",
            "Blank: the family's default (demo-draft for demo) · a Hub id · /an/absolute/dir",
            "--draft", max_length=512, config="draft", metavar="MODEL",
        ),
        Option(
            "spec_ks", "speculative", INTS, (), "Draft lengths (K)",
            f"Comma-separated, 1 to 16, at most 8 values. Blank: "
            f"{','.join(map(str, QUICK_KS))} in quick mode, "
            f"{','.join(map(str, FULL_KS))} in full.",
            "--spec-k", low=1, high=16, max_items=8, metavar="1,2,4",
        ),
        Option(
            "prompt_lookup", "speculative", BOOL, True,
            "Also try prompt lookup (n-gram drafts, no model)",
            "Drafts taken from the prompt itself: no draft model, no extra memory.",
            "--no-prompt-lookup", negated_flag=True,
            off_help="Skip prompt lookup (n-gram drafts taken from the prompt).",
        ),
    ),
    work=11.0,
    missing_hint="its gain rests on how many drafted tokens are accepted, which only a run "
    "measures",
)  # fmt: skip
