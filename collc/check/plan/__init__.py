"""The checker of MSCCL++ execution plans: reader ``rules`` and limits, the one-sided ``sim``
with the proxy's asynchronous reads, per-release semantics (``releases``), ``placement`` on a
Topology's hosts, ``report`` and :func:`check.check_plan`.  docs/mscclpp.md is the model.
"""
