"""The checker of any runtime file (what ``collc check`` runs): it reads a Program, never a
backend.  One module per concern:

``findings``       the Report and its Findings (codes)
``attributes``     rules on ``<algo>``: required attributes, values, collective names
``structure``      per-gpu/tb/step rules, dependencies and the dialect's limits
``matching``       send/receive sequences of every connection agree
``runtime_model``  slicing into pieces and FIFO slots (shared with ``collc.sim.event``)
``executor``       the executor simulation (deadlock, data, races)
``kernel``         the same simulation compiled (numba) for large runs without symbolic data or races
``data``, ``races`` the postconditions on the final buffers and the race-check support
``checker``        :func:`check_program` / :func:`check_parsed`: all of the above
``plan_*``         the MSCCL++ plan checker: report, reader rules and limits, executor simulation
"""

from collc.check.checker import check_parsed, check_program
from collc.check.executor import SimResult, simulate
from collc.check.findings import MAX_LISTED, Finding, Report
from collc.check.runtime_model import SizeModel, buffering_model, size_model

__all__ = ["MAX_LISTED", "Finding", "Report", "SimResult", "SizeModel", "buffering_model", "check_parsed",
           "check_program", "simulate", "size_model"]
