"""Port channels and MSCCL++ releases in ``collc check`` (docs/mscclpp.md, "Port channels and releases").

The verdicts come from reading the executor kernel (``execution_kernel.hpp``) and the proxy at each
release, not from running the checker.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from collc.backends.mscclpp import read_plan, write_plan
from collc.check.plan.check import check_plan
from collc.check.plan.report import PlanReport
from collc.check.plan.releases import LATEST, RELEASES
from collc.cli import main
from collc.compiler.mscclpp.plan import (BufferType, Channel, ChannelType, Gpu, LocalBuff, Op, OpName, Plan, Protocol,
                                 RemoteBuff, RemoteBuffer, TbChannels, TbRemoteBuffers, Threadblock)
from tests._plan_corpus import PLANS, plan_path
from tests._shared import missing
from tests.test_bad_input import run_refused

# ---------------------------------------------------------------- item 0: one size per entry, not per op
# The twenty alltoall lowerings that collc's own check used to refuse with op-sizes (put/ppkt entries of
# 1 and 2 chunks in one op).  handlePut sizes entry i by outputBufferSizes[i], handlePutPackets and handleGet
# by inputBufferSizes[i]; the reader fills both per entry (execution_plan.cc), so the plans are correct.
# (direct-connect graphs are one host per rank: ``hosts=1`` puts the ranks in one IPC domain, where
# memory channels can connect, as on one box whose GPUs are wired that way)
MIXED = [(alg, topo, proto, place) for alg, topo in (("kautz-c", "kautz:2,2:hosts=1"), ("kautz-c", "kautz:3,2:hosts=1"),
                                                       ("kautz-m", "kautz:2,2:hosts=1"), ("kautz-m", "kautz:3,2:hosts=1"),
                                                       ("dfc-multitree", "dfc:4x4:hosts=1"))
         for proto in ("Simple", "LL") for place in ("--inplace", "--outofplace")]


@pytest.mark.parametrize("alg,topo,proto,place", MIXED)
def test_alltoall_with_mixed_entry_sizes_builds_and_checks(tmp_path: Path, alg: str, topo: str, proto: str,
                                                           place: str) -> None:
    out = tmp_path / "a2a.json"
    assert main(["build", "--backend", "mscclpp", "--algorithm", alg, "--topology", topo, "--collective",
                 "alltoall", "--protocol", proto, place, "-o", str(out)]) == 0
    plan = read_plan(out)
    mixed = [op for g in plan.gpus for tb in g.threadblocks for op in tb.flat_ops()
             if len({b.size for b in (*op.srcs, *op.dsts)}) > 1]
    assert mixed and all(op.name in (OpName.PUT, OpName.PUT_PACKETS) for op in mixed)
    rep = check_plan(plan)
    assert rep.ok and rep.info["simulated"] is True, [f.message for f in rep.errors()]


# ---------------------------------------------------------------- a minimal 2-rank port-channel plan
def _port_plan(*, flush: bool = True, put: OpName = OpName.PUT_WITH_SIGNAL, flush_dsts: bool = True,
               reuse: bool = False) -> Plan:
    """Allgather on 2 ranks (one per node) over one port channel each way.  Rank r: a start handshake
    (signal, wait: the peer's output is free), copy its input into output chunk r, put it into the peer's
    output chunk r through the proxy, flush that channel, wait for the peer's put, and (``reuse``) then
    write the put's source again inside the launch."""
    gpus = []
    for r in (0, 1):
        peer = RemoteBuff(0, r, 1)
        ops = [Op(OpName.SIGNAL, channel_ids=(0,), channel_type=ChannelType.PORT),
               Op(OpName.WAIT, channel_ids=(0,), channel_type=ChannelType.PORT),
               Op(OpName.NOP),
               Op(OpName.COPY, src_buff=(LocalBuff(BufferType.INPUT, 0, 1),),
                  dst_buff=(LocalBuff(BufferType.OUTPUT, r, 1),)),
               Op(put, src_buff=(LocalBuff(BufferType.INPUT, 0, 1),), dst_buff=(peer,), channel_ids=(0,),
                  channel_type=ChannelType.PORT)]
        if flush:
            ops.append(Op(OpName.FLUSH, dst_buff=(peer,) if flush_dsts else None, channel_ids=(0,),
                          channel_type=ChannelType.PORT))
        ops.append(Op(OpName.NOP))
        if reuse:       # the source written again: the same value, so only the ordering can be wrong
            ops += [Op(OpName.COPY, src_buff=(LocalBuff(BufferType.OUTPUT, r, 1),),
                       dst_buff=(LocalBuff(BufferType.INPUT, 0, 1),)), Op(OpName.NOP)]
        ops += [Op(OpName.WAIT, channel_ids=(0,), channel_type=ChannelType.PORT), Op(OpName.NOP)]
        tb = Threadblock(0, tuple(ops), (TbChannels(ChannelType.PORT, (0,)),),
                         (TbRemoteBuffers(ChannelType.PORT, (0,)),))
        gpus.append(Gpu(r, 1, 2, 1, (tb,), (Channel(ChannelType.PORT, (1 - r,)),),
                        (RemoteBuffer(1 - r, BufferType.OUTPUT, (ChannelType.PORT,)),)))
    return Plan("port2", "allgather", Protocol.SIMPLE, False, tuple(gpus), reuse_resources=reuse,
                max_message_size=1 << 20)


def _verdicts(rep: PlanReport) -> dict[str, tuple[bool, list[str]]]:
    rel = rep.info["releases"]
    assert isinstance(rel, dict)
    return {k: (v["ok"], v["codes"]) for k, v in rel.items()}


def _all(ok: bool, *codes: str) -> dict[str, tuple[bool, list[str]]]:
    return {r.name: (ok, list(codes)) for r in RELEASES}


def test_a_flushed_port_plan_passes_on_every_release() -> None:
    """pws hands the put and its signal to the proxy; the flush with the put's destination waits until the
    proxy's transfer on channel 0 completed (handleFlush: one channel per dst_buff entry), so the next
    launch may overwrite the input; the start handshake orders the peer's put after this rank's previous
    output was read."""
    rep = check_plan(_port_plan())
    assert rep.ok and rep.info["simulated"] is True, [f.message for f in rep.findings]
    assert _verdicts(rep) == _all(True) and "verdict" not in rep.info


def test_a_dropped_flush_races_the_next_launch() -> None:
    """Without the flush nothing waits for the proxy's read of the input (the peer's last signal comes
    from its own put, issued before it waited for this one), so the application's next input may be
    read by the proxy of this launch: the same on every release."""
    rep = check_plan(_port_plan(flush=False))
    assert _verdicts(rep) == _all(False, "port-source-reuse-next-launch")
    msg = rep.errors()[0].message
    assert "the application writing gpu 0's next input after the call overwrites gpu 0 input chunk 0 that " \
           "gpu 0 tb 0 op 4 (pws) may still be reading through gpu 0 port channel 0 proxy" in msg


def test_a_flush_without_dst_buff_flushes_nothing() -> None:
    rep = check_plan(_port_plan(flush_dsts=False))
    assert "flush-noop" in {f.code for f in rep.findings}
    assert _verdicts(rep) == _all(False, "port-source-reuse-next-launch")


def test_a_dropped_flush_before_the_source_is_reused_in_the_launch() -> None:
    """The put's source rewritten inside the launch after only a nop: the proxy may not have read it yet."""
    assert check_plan(_port_plan(reuse=True)).ok
    rep = check_plan(_port_plan(flush=False, reuse=True))
    assert rep.codes() == ["port-source-reuse"]
    assert any(f"gpu {r} tb 0 op 6 (copy) overwrites gpu {r} input chunk 0 that gpu {r} tb 0 op 4 (pws) may still "
               f"be reading through gpu {r} port channel 0 proxy" in rep.errors()[0].message for r in (0, 1))


def test_pwsf_flushes_from_v010_only() -> None:
    """pwsf instead of pws + flush: handlePut<..., true, true> took the PutWithSignal branch first up to
    v0.9.0 (no flush); v0.10.0 tests PutWithSignalAndFlush first and waits for the flush."""
    rep = check_plan(_port_plan(put=OpName.PUT_WITH_SIGNAL_AND_FLUSH, flush=False))
    assert _verdicts(rep) == {"v0.8": (False, ["port-source-reuse-next-launch"]),
                              "v0.9": (False, ["port-source-reuse-next-launch"]), "v0.10": (True, [])}
    assert str(rep.info["verdict"]).startswith("FAIL on v0.8, v0.9 (port-source-reuse-next-launch: ")
    assert str(rep.info["verdict"]).endswith("; PASS on v0.10")
    assert rep.errors()[0].message.startswith("[v0.8, v0.9] ")
    assert check_plan(_port_plan(put=OpName.PUT_WITH_SIGNAL_AND_FLUSH, flush=False), releases=(LATEST,)).ok


def test_a_port_put_without_its_signal_deadlocks_the_peer() -> None:
    """put (not pws) sends no signal, so the peer's last wait never completes, on every release."""
    rep = check_plan(_port_plan(put=OpName.PUT))
    assert _verdicts(rep) == _all(False, "deadlock")
    assert "gpu 1 tb 0 op 7 (wait) never completes: it waits for signal 2 on port channel 0 from gpu 0, which " \
           "sends 1" in " | ".join(f.message for f in rep.errors())


def test_an_entry_whose_source_and_destination_sizes_differ_is_still_refused() -> None:
    plan = _port_plan()
    g = plan.gpus[0]
    ops = list(g.threadblocks[0].ops)
    ops[4] = replace(ops[4], dst_buff=(RemoteBuff(0, 0, 2),))
    bad = replace(plan, gpus=(replace(g, threadblocks=(replace(g.threadblocks[0], ops=tuple(ops)),)),
                              plan.gpus[1]))
    assert "op-sizes" in check_plan(bad).codes()


def test_the_reuse_resources_scratch_limit_holds_from_v09() -> None:
    """setupScratchBuffer refuses a reuse_resources plan whose scratch exceeds the shared 128 MiB (v0.9.0 on;
    v0.8.0 has no such check): one scratch chunk per input chunk, so an allgather input above 128 MiB (an
    output above 256 MiB on 2 ranks) is refused."""
    big = replace(_port_plan(reuse=True), min_message_size=1 << 29, max_message_size=1 << 30)
    rep = check_plan(big)
    assert _verdicts(rep) == {"v0.8": (True, []), "v0.9": (False, ["scratch-limit"]),
                              "v0.10": (False, ["scratch-limit"])}
    some = replace(big, min_message_size=1024)
    warned = check_plan(some)
    assert warned.ok and any(f.code == "scratch-limit" and f.message.startswith("[v0.9, v0.10] ")
                             for f in warned.findings)


# ---------------------------------------------------------------- the CLI
def test_check_takes_a_release_and_prints_the_per_release_verdict(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pwsf.json"
    path.write_text(write_plan(_port_plan(put=OpName.PUT_WITH_SIGNAL_AND_FLUSH, flush=False)))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "  releases: FAIL on v0.8, v0.9 (port-source-reuse-next-launch: " in out and "PASS on v0.10" in out
    assert main(["check", "--mscclpp-version", "0.10", str(path)]) == 0
    capsys.readouterr()
    assert main(["check", "--mscclpp-version", "v0.9", "--json", str(path)]) == 1
    got = json.loads(capsys.readouterr().out)[0]["info"]["releases"]
    assert got == {"v0.9": {"ok": False, "codes": ["port-source-reuse-next-launch"]}}


def test_a_bad_release_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(write_plan(_port_plan()))
    run_refused(tmp_path, capsys, ["check", "--mscclpp-version", "0.7", str(path)], "--mscclpp-version")
    run_refused(tmp_path, capsys, ["build", "--backend", "mscclpp", "--topology", "ring:4", "--algorithm", "ring",
                                   "--collective", "allgather", "--mscclpp-version", "1.0", "-o",
                                   str(tmp_path / "x.json")], "unknown release '1.0'")


# ---------------------------------------------------------------- the corpus multi-node plans, per release
MN = "branches/caiorocha-multi_node_executor_test/test/executor-tests/execution-plans/multi_node_transfer.json"
FAIL_ALL = {"v0.8": (False, ["port-source-reuse-next-launch"]), "v0.9": (False, ["port-source-reuse-next-launch"]),
            "v0.10": (False, ["port-source-reuse-next-launch"])}
NEW_OPS = {"v0.8": (False, ["unknown-op"]), "v0.9": (True, []), "v0.10": (True, [])}
PER_RELEASE: dict[str, dict[str, tuple[bool, list[str]]]] = {
    # rank 0 hands put (tb 0) and pws (tb 1) of its output chunks to the proxy; its flush ops have no dst_buff
    # (handleFlush loops over nOutputs = 0), and its last wait receives rank 1's pwsf signal, which rank 1
    # sends before it waits for rank 0's data: nothing orders the proxy's reads before the next launch, on
    # any release (rank 1's own pwsf source is safe from v0.10 on, rank 0's never)
    MN: FAIL_ALL,
    # 16 ranks, pws only, no flush: pws never flushes (putWithSignal) at any release
    "branches/caiorocha-pilot_test/test.json": FAIL_ALL,
    # pws of the input, then a wait for the peer's pws, which the peer issues without waiting for this
    # rank's data; pws never flushes
    "more/dsl_mn_reducescatter_2gpu.json": FAIL_ALL,
    # pwsf of its output chunk, then waits that do not acknowledge it: v0.8/v0.9 run pwsf as pws (the
    # PutWithSignal branch is tested first), v0.10 waits for the flush before the op returns
    "more/dsl_mn_allgather_4gpu.json": {"v0.8": (False, ["port-source-reuse-next-launch"]),
                                        "v0.9": (False, ["port-source-reuse-next-launch"]), "v0.10": (True, [])},
    # rppkt forwards packets from the own scratch; a packet read spins on this launch's flag, and the
    # double scratch buffer gives the next launch the other half: correct on every release
    "more/dsl_mn_allgather_pkt_4gpu.json": {r.name: (True, []) for r in RELEASES},
    "more/dsl_da_allgather_4gpu.json": {r.name: (True, []) for r in RELEASES},
    # recpkt/recspkt: the v0.8.0 reader refuses the op name ("Invalid operation type"); v0.9.0 and v0.10 run them
    "more/dsl_mn_reducescatter_pkt_4gpu.json": NEW_OPS,
    "more/dsl_da_allreduce_4gpu.json": NEW_OPS,
    "more/dsl_da_reducescatter_4gpu_tbg1.json": NEW_OPS,
}


@pytest.mark.parametrize("rel", sorted(PER_RELEASE))
def test_multi_node_corpus_plans_per_release(rel: str) -> None:
    if not PLANS.is_dir():
        pytest.skip(missing("corpora", "mscclpp-plans"))
    rep = check_plan(read_plan(plan_path(rel)), rel)
    assert _verdicts(rep) == PER_RELEASE[rel], [f.message for f in rep.errors()]
