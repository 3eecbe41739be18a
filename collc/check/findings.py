"""What the checker reports: a :class:`Report` of :class:`Finding` values, each with a code.

Codes name the invariant broken (docs/runtime-model.md):

``lexical``      the runtime parser's lexical rules (reported by the reader)
``attribute``    required attributes for the dialect, valid values
``limit``        every hard limit of the dialect (steps/tb, tbs/gpu, channels, cnt,
                 depid, offsets, node budget, ``<gpu>`` count)
``structure``    tb ids contiguous, one tb per (peer, chan, direction), peers valid,
                 buffers and offsets in range, ``s`` equal to the position
``dependency``   targets exist and carry ``hasdep="1"``, nops carry a dependency,
                 the parser's chain rule, no own-tb dependency
``match``        send/recv sequences of every (a->b, chan) agree in order and ``cnt``
``deadlock``     the executor simulation cannot finish (blocked steps listed)
``data``         wrong, missing or double-counted chunks in the final buffers
``race``         a step touches a slot another tb writes, with no ordering between them
``order``        (warning) ranks reduce one output chunk in different orders

>>> rep = Report("x.xml", Dialect.EXECUTOR)
>>> rep.add("order", "ranks reduce in different orders", "warning")
>>> rep.ok, [f.code for f in rep.findings]
(True, ['order'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collc.limits import Dialect

#: Most items a finding lists (blocked steps, data errors, races).
MAX_LISTED = 12


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    severity: str = "error"

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


class FindingList:
    """What every report does with its findings (the MSCCL XML :class:`Report` and the plan
    checker's ``PlanReport``)."""

    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def add(self, code: str, message: str, severity: str = "error") -> None:
        self.findings.append(Finding(code, message, severity))


@dataclass
class Report(FindingList):
    path: str
    dialect: Dialect
    findings: list[Finding] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "dialect": self.dialect.value, "ok": self.ok, "info": self.info,
                "findings": [f.to_json() for f in self.findings]}


@dataclass(frozen=True, slots=True)
class Loc:
    """"gpu G tb T step S", formatted only when a finding names it."""

    tb: str
    step: int

    def __str__(self) -> str:
        return f"{self.tb} step {self.step}"
