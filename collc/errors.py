"""One exception hierarchy for the whole package; the CLI maps it to exit codes.

``CollcError`` and its subclasses mean *bad input or an impossible request*
(exit code 2 in the CLI).  A failed ``collc check`` is not an exception: the
checker returns a report, and the CLI exits 1 when it has errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CollcError(Exception):
    """Base class for every error collc raises on purpose."""


class CollcWarning(UserWarning):
    """Advice about a result that was built all the same (``collc build`` prints each as one
    ``collc: warning:`` line on stderr and still exits 0)."""


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


#: Names an "unknown X" message offers at most: the nearest few, never a truncated list.
MAX_SUGGESTIONS = 3


#: Lists this short are given whole when nothing is close.
SHORT_LIST = 8


def nearest(given: str, known: Iterable[str], n: int = MAX_SUGGESTIONS) -> list[str]:
    """The known names closest to ``given`` (those it begins, then ``difflib``'s close matches,
    case-insensitive), at most ``n``.

    >>> nearest("forestcol", ["ring", "forestcoll", "direct"])
    ['forestcoll']
    >>> nearest("multi", ["multitree", "ring"])
    ['multitree']
    """
    names = list(dict.fromkeys(known))
    low = {k.lower(): k for k in names}
    g = given.strip().lower()
    prefix = [k for k in names if g and k.lower().startswith(g)]
    close = [low[m] for m in difflib.get_close_matches(g, list(low), n=n, cutoff=0.6)]
    return list(dict.fromkeys(close + prefix))[:n]


def did_you_mean(given: str, known: Iterable[str], listing: str) -> str:
    """``"did you mean 'a' or 'b'? see `listing`"``: the nearest names and the command that
    lists them all (an error never offers a truncated list).

    >>> did_you_mean("allredcue", ["allreduce", "allgather"], "collc list collectives")
    "did you mean 'allreduce'? see `collc list collectives`"
    >>> did_you_mean("zzz", ["allreduce", "allgather"], "collc list collectives")
    'known: allreduce, allgather'
    """
    names = list(dict.fromkeys(known))
    close = nearest(given, names)
    if not close and len(names) <= SHORT_LIST:     # a short list is cheaper to read than a pointer to it
        return f"known: {', '.join(names)}"
    head = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"{head}see `{listing}`"
