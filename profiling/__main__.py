"""`python -m profiling ...`: see profiling.cli."""

from __future__ import annotations

from profiling.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
