"""The advice: the measured bottleneck and one ranked recommendation with its evidence.

Torch-free: `facts` reads a profile dict (or an analytic projection) into the
figures the rules need, `bottleneck` classifies, `recommend` holds the rules,
`build` puts it together with the predictions beside the measurements.
"""
