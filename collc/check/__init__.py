"""The checker of any runtime file (what ``collc check`` runs): it reads a Program or a Plan,
never a backend.  Shared here: ``findings`` (the Report and its Findings), ``runtime_model``
(slicing into pieces and FIFO slots, shared with ``collc.sim.event``), ``data`` and ``races``
(postconditions on the final buffers, race-check support).  One room per runtime family:

``xml/``   MSCCL XML: reader rules, send/receive matching, the executor simulation and its
           compiled kernel, :func:`check_program` / :func:`check_parsed`
``plan/``  MSCCL++ plans: reader rules and limits, the one-sided simulation with the proxy,
           per-release semantics, placement on hosts
"""

from collc.check.xml.checker import check_parsed, check_program
from collc.check.xml.executor import SimResult, simulate
from collc.check.findings import MAX_LISTED, Finding, Report
from collc.check.runtime_model import SizeModel, buffering_model, size_model

__all__ = ["MAX_LISTED", "Finding", "Report", "SimResult", "SizeModel", "buffering_model", "check_parsed",
           "check_program", "simulate", "size_model"]
