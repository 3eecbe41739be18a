"""Findings and the report of ``collc check`` on an MSCCL++ execution plan.

The JSON shape is the one ``collc check --json`` prints for MSCCL XML files (path, dialect, ok, info,
findings with code, severity and message); the dialect of a plan is ``mscclpp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collc.check.findings import Finding, FindingList

DIALECT = "mscclpp"


@dataclass
class PlanReport(FindingList):
    path: str
    findings: list[Finding] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)

    def codes(self) -> list[str]:
        return sorted({f.code for f in self.errors()})

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "dialect": DIALECT, "ok": self.ok, "info": self.info,
                "findings": [f.to_json() for f in self.findings]}
