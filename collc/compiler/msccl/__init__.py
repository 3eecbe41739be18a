"""The two-sided lowering for the MSCCL XML runtimes: a Schedule becomes send/receive programs.

``threadblocks`` (channels and threadblock assignment, pairing), ``fusion`` (receive-reduce-send
fusion), ``dependencies`` (cross-threadblock dependencies) and ``program`` (the Program, the XML
model that ``collc.backends.msccl_xml`` prints).  docs/runtime-model.md describes the executor
these programs are written for.
"""
