"""The one-sided lowering for MSCCL++: a Schedule becomes an execution plan.

``lower`` (slots, pairing, semaphores, memory and port channels), ``plan`` (the plan model that
``collc.backends.mscclpp`` prints) and ``placement`` (which channel type a pair of ranks can
use on a Topology's hosts).  docs/mscclpp-backend.md describes the design.
"""
