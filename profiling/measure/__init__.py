"""What measures on a device: the clock and repeat loop, and what a measurement reads.

`timing` (one `measure()`: warm-ups, synchronisation, repeats, an injectable
clock), `stats` (intervals on a ratio of medians), `bandwidth` (copy and read
bandwidth), `decode_path` (the timed decode step on a static KV cache, compiled
on CUDA), `environment` (the device, the driver and the libraries a run used),
`hardware` (the GPU catalog the device is named from: datasheet memory, bandwidth
and peak rates, `profiling/data/gpus.json`), `resident` (one set of weights
resident at a time), `numerics` (the tolerance two outputs are compared at),
`cost` (a plan's cost from the measured steps) and `progress`.

Nothing here imports the model's loading, the projection, a technique or the advice.
"""
