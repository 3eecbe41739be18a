"""Memory helpers shared by the stages (base layer).

:func:`gc_paused` pauses Python's cyclic garbage collector around work that makes millions
of small acyclic objects (a 4096-rank IR, a Program read back from its XML): the collector
would rescan them over and over and find nothing to free.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enable it after only if it was enabled
    (so nested pauses leave it off until the outermost one ends)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
