"""Run at the start of every Python process with this folder on PYTHONPATH (tests/gate.py).

Only a job's child (`python -m profiling job ...`) with $ADVISOR_TEST_GATE set is
changed: it stops at the gate. The worker and anything else it starts are left alone.
"""

import os
import sys

if os.environ.get("ADVISOR_TEST_GATE") and sys.orig_argv[1:4] == ["-m", "profiling", "job"]:
    from tests.gate import hold_this_child

    hold_this_child()
