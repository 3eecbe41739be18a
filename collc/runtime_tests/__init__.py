"""Proving a schedule on a real cluster: nccl-tests / rccl-tests output parsers
(:mod:`collc.runtime_tests.parse`), the MSCCL-ran verdict, the launcher
(:mod:`collc.runtime_tests.launch`) and the bench report
(:mod:`collc.runtime_tests.report`).  See ``docs/runtime-tests.md``."""
