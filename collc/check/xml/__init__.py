"""The checker of MSCCL XML programs: reader rules (``attributes``, ``structure``), send/receive
``matching``, the ``executor`` simulation and its compiled ``kernel``, the op stream
(``opstream``) and :func:`checker.check_program`.  docs/runtime-model.md is the model.
"""
