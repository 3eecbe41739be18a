"""MSCCL++ releases whose executors ``collc check`` models, and what differs between them.

Read from the MSCCL++ sources at each tag (docs/mscclpp.md, "Port channels and releases"):

* ``pwsf_flushes``: ``handlePut`` in ``execution_kernel.hpp`` tests ``PutWithSignalAndFlush`` before
  ``PutWithSignal`` (v0.10.0 on); until v0.9.0 the ``pws`` branch came first, so ``pwsf`` never flushed.
* ``knows_packet_copy``: the plan reader (``execution_plan.cc``) knows the op names ``recpkt`` and
  ``recspkt`` (v0.9.0 on); v0.8.0 refuses the plan ("Invalid operation type").
* Not a difference: the packet handlers that carry LL across hosts (``handleCopyPackets``, and
  ``handlePutPackets``/``handleReadPutPackets`` on port channels: the proxy copies packets, flags
  included, and reads the source after the op returns) read the same in the v0.8+ sources read
  (docs/mscclpp.md, "Packets across hosts"), so the simulation's proxy reads of a staging region are
  the same on every release.
* ``scratch_limit``: ``Executor::Impl::setupScratchBuffer`` (``executor.cc``) refuses a
  ``reuse_resources`` plan whose scratch buffer exceeds the 128 MiB shared one (v0.9.0 on).

>>> [r.name for r in parse_releases("all")], [r.name for r in parse_releases("0.8,v0.10")]
(['v0.8', 'v0.9', 'v0.10'], ['v0.8', 'v0.10'])
"""

from __future__ import annotations

from dataclasses import dataclass

from collc.errors import UsageError

#: The shared scratch buffer of a reuse_resources plan (``defaultScratchBufferSize``, 1 << 27 bytes).
SCRATCH_LIMIT = 1 << 27


@dataclass(frozen=True)
class Release:
    name: str                 # "v0.10": how reports name it
    tag: str                  # the git tag read
    pwsf_flushes: bool
    knows_packet_copy: bool
    scratch_limit: bool


RELEASES: tuple[Release, ...] = (
    Release("v0.8", "v0.8.0", pwsf_flushes=False, knows_packet_copy=False, scratch_limit=False),
    Release("v0.9", "v0.9.0", pwsf_flushes=False, knows_packet_copy=True, scratch_limit=True),
    Release("v0.10", "v0.10.0", pwsf_flushes=True, knows_packet_copy=True, scratch_limit=True),
)
LATEST = RELEASES[-1]
CHOICES = "all, " + ", ".join(r.name[1:] for r in RELEASES)


def parse_releases(text: str) -> tuple[Release, ...]:
    """``all`` or a comma list of ``0.8``/``v0.8``/``0.8.0`` ...; an unknown one is bad usage (exit 2)."""
    if text.strip().lower() == "all":
        return RELEASES
    picked: list[Release] = []
    for part in text.split(","):
        p = part.strip().lower().removeprefix("v")
        hit = next((r for r in RELEASES if p in (r.name[1:], r.tag[1:])), None)
        if hit is None:
            raise UsageError(f"--mscclpp-version {text[:40]!r}: unknown release {part.strip()[:20]!r} "
                             f"(expected {CHOICES})")
        if hit not in picked:
            picked.append(hit)
    return tuple(sorted(picked, key=RELEASES.index))
