"""The fleet's options: the load a fleet must carry and which GPU kinds, at what price, it
is sized on (`profiling.projection.fleet`). Declared here as every option is, with its
flag, range and help; `python -m profiling estimate` takes them (`profiling.fleet_cli`).
They are not yet among `profiling.options.OPTIONS`, whose every option the form, the API
and the job row also carry."""

from __future__ import annotations

from profiling.measure.hardware import catalog
from profiling.option_type import FLOAT, INT, NAMES, TEXT, Option

MAX_GPUS = 64  # GPUs of one kind sized, by default

# fmt: off
FLEET = (
    Option("load_rps", "fleet", FLOAT, None, "Target load (requests/s)",
           "Optional: the requests per second the deployment must carry within the "
           "targets; the fleet table then sizes every GPU kind for it (the fewest GPUs, "
           "as replicas × GPUs per replica, and their cost). Needs a TTFT or TPOT target.",
           "--load-rps", low=0.001, high=1_000_000, unit="requests/s", optional=True,
           metavar="R"),
    Option("load_users", "fleet", INT, None, "Target load (users)",
           "Optional, instead of a request rate: the concurrent users the deployment must "
           "carry within the targets, each sending the next request when the last ends.",
           "--load-users", low=1, high=1_000_000, unit="users", optional=True, metavar="U"),
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
