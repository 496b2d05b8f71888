"""The fleet's options: the load a fleet must carry and which GPU kinds, at what price, it
is sized on (`profiling.projection.fleet`), each with its flag, range and help;
`python -m profiling estimate` takes them all (`profiling.fleet_cli`). The load
(`TARGET_LOAD`: a request rate or a number of users) is declared in `profiling.options`
(importing the catalog there would make an import circle) and is among its `OPTIONS`, so
the form, the API, the job row and `profile` take it too and a job's result holds the
fleet for it; the kinds, prices and most GPUs are the estimate's alone (a job sizes every
kind at the catalog's prices, its own kind at its own price, up to `MAX_GPUS`)."""

from __future__ import annotations

from profiling.measure.hardware import catalog
from profiling.option_type import INT, NAMES, TEXT, Option
from profiling.options import TARGET_LOAD

MAX_GPUS = 64  # GPUs of one kind sized, by default

# fmt: off
FLEET = (
    *TARGET_LOAD,
    Option("fleet_gpus", "fleet", NAMES, (), "GPU kinds to size",
           "The GPU kinds the fleet table sizes. None: every kind of the catalog.",
           "--fleet-gpus", choices=tuple(catalog()), metavar="H100-SXM,L4"),
    Option("fleet_prices", "fleet", TEXT, "", "Your price per GPU kind",
           "Optional: what one GPU of a kind costs you per hour, in US dollars, as "
           "KIND=USD pairs (H100=2.10,L4=0.70); the other kinds keep the catalog's price.",
           "--fleet-prices", max_length=2000, metavar="KIND=USD,…"),
    Option("fleet_max_gpus", "fleet", INT, MAX_GPUS, "Most GPUs of a kind",
           "The fleet table sizes each kind up to this many GPUs; past it, the kind cannot "
           "carry the load.",
           "--fleet-max-gpus", low=1, high=1024, unit="GPUs"),
)
# fmt: on
