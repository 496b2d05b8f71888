"""The baseline: the prefill and decode sweeps every profile runs (`sweeps`), planned for
the workload and the time it has (`plan`), called by the runner directly.

The optional experiments live in their technique's folder
(`profiling/<technique>/experiment.py`), are listed in `profiling.techniques` and are
given an `ExperimentContext` (`profiling.technique_kit.context`); a name the config asks
for that has no experiment there is refused with a `ConfigError`, so nothing ever reports
results it did not measure.
"""
