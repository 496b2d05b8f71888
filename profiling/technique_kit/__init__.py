"""What every technique shares: what its experiment is given, the figures its rule reads,
the rule's arithmetic and the types it returns.

`context` (`ExperimentContext`: the loaded model, the baseline, the clock, the budget),
`facts` (the figures a rule reads, from a profile or from an analytic projection),
`rule_kit` (the smallest gain worth advising, capacity arithmetic, judging a measured
effect on its interval, number text) and `advice_results` (the advice's types: a
recommendation, a change, what is not recommended, the predictions beside the
measurements).

A folder of its own, below the technique folders: each technique's rule
(`profiling/<technique>/advice.py`) imports it, and `profiling.advice`, which runs
every rule through the registry, imports the techniques; inside `profiling.advice`
the two would import each other.
"""
