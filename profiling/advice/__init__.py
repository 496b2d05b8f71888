"""The advice: the measured bottleneck and one ranked recommendation with its evidence.

Torch-free: `bottleneck` classifies, each technique's rule (its folder's
`advice.py`, listed in `profiling.techniques`) recommends, `ranking` screens and
orders every recommendation by one rule, `build` puts them
together with the predictions beside the measurements, `missing` names what no
experiment measured, `stability` says whether repeated runs agree, and `text`
and `summary` write it all for a terminal. What every rule reads and returns
(the facts, the rule kit, the advice's types) is `profiling.technique_kit`.
"""
