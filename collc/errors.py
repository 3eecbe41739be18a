"""One exception hierarchy for the whole package; the CLI maps it to exit codes.

``CollcError`` and its subclasses mean *bad input or an impossible request*
(exit code 2 in the CLI).  A failed ``collc check`` is not an exception: the
checker returns a report, and the CLI exits 1 when it has errors.
"""

from __future__ import annotations


class CollcError(Exception):
    """Base class for every error collc raises on purpose."""


class TopologyError(CollcError):
    """A topology spec or file is malformed or names an impossible topology."""


class ScheduleError(CollcError):
    """A frontend cannot build the requested schedule, or a Schedule is invalid."""


class LoweringError(CollcError):
    """A Schedule cannot be lowered within the runtime's limits."""


class NodeBudgetError(LoweringError):
    """A rank of the lowered program needs more XML nodes than the runtime's parser stores."""


class VerifyError(CollcError):
    """A Schedule failed its symbolic check (wrong data, double reduction, bad link)."""


class EmitError(CollcError):
    """An XML file cannot be written or read (I/O, malformed XML, missing attributes)."""


class UsageError(CollcError):
    """Bad command-line usage, or an input beyond collc's limits (``collc.inputs``)."""
