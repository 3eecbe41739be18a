"""The clock of ``--timings`` and the benchmarks (base layer): CPU seconds, not wall time.

The machines collc is measured on are shared, so wall time says more about the neighbours
than about a pass.  :func:`cpu_seconds` counts this process's user and system time plus
that of its reaped children, which is where the worker processes of a parallel lowering
land once their pool is closed: a stage timed around the pool includes its workers.
"""

from __future__ import annotations

import os


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have ended."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
