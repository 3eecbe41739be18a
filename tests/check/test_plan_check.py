"""``collc check`` on MSCCL++ plans: a verdict for every real plan, and broken copies of correct ones.

The expected verdicts come from reading the executor kernel (docs/mscclpp.md), not from running the
checker: each failing plan's finding names the op and the reason.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from collc.backends.mscclpp import read_plan, write_plan
from collc.check.plan.check import check_plan
from collc.check.plan.report import PlanReport
from collc.check.plan.releases import LATEST
from collc.cli import main
from collc.compiler.mscclpp.plan import (ChannelType, LocalBuff, Op, OpName, Plan, PlanError, RemoteBuff, TbChannels)
from tests._plan_corpus import name, plan_params, plan_path
from tests._shared import missing

# Every plan of the corpus (the held-out ones are only required to get a verdict): the error codes of its
# report at v0.10 (the corpus was taken at v0.10.0 + 15), and a phrase of the first error.  An empty set means
# the plan passes.  The verdicts at earlier releases are in tests/check/test_plan_ports.py.
PORT_SOURCE = "port channel proxy reads the source of a put, or the packets of a ppkt/rppkt, after the op returns"
RELAXED = "only relaxed signals order it"
TBG_RACE = "gpu 0 tb 0 op 7 (get) reads gpu 1 scratch chunk 1 that gpu 1 tb 1 op 0 (copy) writes"
EXPECTED: dict[str, tuple[set[str], str]] = {
    "test/execution-files/allreduce.json": (set(), ""),
    "test/execution-files/allreduce_packet.json": (set(), ""),
    "test/executor-tests/execution-plans/reduce.json": (set(), ""),
    "test/executor-tests/execution-plans/reduce_pack.json": (set(), ""),
    "test/executor-tests/execution-plans/transfer_pack_tbg.json": (set(), ""),
    "generated/mscclpp_example_allgather_2gpu.json": (set(), ""),
    "generated/mscclpp_example_allreduce_4gpu.json": (set(), ""),
    "more/dsl_da_allgather_4gpu.json": (set(), ""),
    "more/dsl_da_allreduce_4gpu.json": (set(), ""),
    "more/dsl_da_reducescatter_4gpu_tbg1.json": (set(), ""),
    "more/dsl_mn_allgather_4gpu.json": (set(), ""),      # its pwsf flushes at v0.10 (not before)
    "more/dsl_mn_allgather_pkt_4gpu.json": (set(), ""),
    "more/dsl_mn_reducescatter_pkt_4gpu.json": (set(), ""),
    "more/dsl_sn_allgather_2gpu.json": (set(), ""),
    "more/dsl_sn_allgather_pkt_4gpu.json": (set(), ""),
    "more/dsl_sn_allgather_tbg_2gpu.json": (set(), ""),
    "more/dsl_sn_allreduce_2gpu.json": (set(), ""),
    "more/dsl_sn_allreduce_4gpu.json": (set(), ""),
    "more/dsl_sn_allreduce_pkt_4gpu.json": (set(), ""),
    "more/dsl_sn_alltoall_pipeline_2gpu.json": (set(), ""),
    "more/dsl_sn_alltoall_ring_2gpu.json": (set(), ""),
    "more/repo_execution-files_allreduce.json": (set(), ""),
    "more/repo_execution-files_allreduce_packet.json": (set(), ""),
    "more/repo_executor-tests_reduce.json": (set(), ""),
    "more/repo_executor-tests_reduce_pack.json": (set(), ""),
    "more/repo_executor-tests_reduce_pack_tbg.json": (set(), ""),
    "more/repo_executor-tests_transfer_pack.json": (set(), ""),
    "more/repo_executor-tests_transfer_pack_tbg.json": (set(), ""),
    # thread-block groups slice the copy (2 chunks) and the get/rres (1 chunk) differently, so a tb reads
    # and overwrites halves that the peer's *other* tb handles, with which it never synchronises
    "test/executor-tests/execution-plans/reduce_tbg.json": ({"race-read", "race-remote-write"}, TBG_RACE),
    "more/repo_executor-tests_reduce_tbg.json": ({"race-read", "race-remote-write"}, TBG_RACE),
    # multimem stores into the peers, then only relaxed signals before the call returns
    "test/executor-tests/execution-plans/reduce_nvls.json": ({"race-next-launch"}, RELAXED),
    "more/repo_executor-tests_reduce_nvls.json": ({"race-next-launch"}, RELAXED),
    "more/repo_executor-tests_reduce_nvls_pipeline.json": ({"race-next-launch"}, RELAXED),
    "more/dsl_sn_allreduce_nvls_zero_copy_2gpu.json": ({"race-next-launch"}, RELAXED),
    # port puts whose source nothing flushes (a flush without dst_buff flushes nothing, pws never flushes)
    "branches/caiorocha-multi_node_executor_test/test/executor-tests/execution-plans/multi_node_transfer.json":
        ({"port-source-reuse-next-launch"}, PORT_SOURCE),
    "branches/caiorocha-pilot_test/test.json": ({"port-source-reuse-next-launch"}, PORT_SOURCE),
    "more/dsl_mn_reducescatter_2gpu.json": ({"port-source-reuse-next-launch"}, PORT_SOURCE),
}
# The executor's reader itself rejects these (tested in tests/backends/test_mscclpp.py).
UNREADABLE = {"more/repo_execution-files_allreduce_pipeline.json"}


@pytest.mark.parametrize("path", plan_params())
def test_every_corpus_plan_gets_its_verdict(path: Path) -> None:
    rel = name(path)
    if rel in UNREADABLE:
        with pytest.raises(PlanError):
            read_plan(path)
        return
    rep = check_plan(read_plan(path), rel, (LATEST,))
    if rel not in EXPECTED:        # a plan added to the corpus later: it must get a verdict, nothing more
        assert isinstance(rep.ok, bool)
        return
    codes, phrase = EXPECTED[rel]
    assert set(rep.codes()) == codes, [f.message for f in rep.errors()]
    if codes:
        assert phrase in rep.errors()[0].message
    else:
        assert rep.info["simulated"] is True


# ---------------------------------------------------------------- broken copies of correct plans
ALLREDUCE = "test/execution-files/allreduce.json"      # 2 GPUs, 8 tbs: rlxsignal/rlxwait, rres, signal/wait
ALLGATHER = "generated/mscclpp_example_allgather_2gpu.json"


def load(rel: str) -> Plan:
    return read_plan(plan_path(rel))


def with_ops(plan: Plan, gpu: int, tb: int, ops: list[Op]) -> Plan:
    gpus = list(plan.gpus)
    tbs = list(gpus[gpu].threadblocks)
    tbs[tb] = replace(tbs[tb], ops=tuple(ops))
    gpus[gpu] = replace(gpus[gpu], threadblocks=tuple(tbs))
    return replace(plan, gpus=tuple(gpus))


def ops_of(plan: Plan, gpu: int, tb: int) -> list[Op]:
    return list(plan.gpus[gpu].threadblocks[tb].ops)


def errors(rep: PlanReport) -> str:
    return " | ".join(f.message for f in rep.errors())


def test_the_originals_pass() -> None:
    assert check_plan(load(ALLREDUCE)).ok
    assert check_plan(load(ALLGATHER)).ok


def test_dropping_the_last_wait_leaves_a_signal_for_the_next_launch() -> None:
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 0, 0)
    last_wait = max(i for i, op in enumerate(ops) if op.name is OpName.WAIT)
    rep = check_plan(with_ops(plan, 0, 0, ops[:last_wait] + ops[last_wait + 1:]))
    assert rep.codes() == ["unbalanced-signal"]
    assert "gpu 0 memory channel 0 receives 2 signals from gpu 1 but waits 1 times" in errors(rep)


def test_dropping_the_wait_before_reading_is_a_race() -> None:
    """gpu 1 waits for gpu 0's put before it copies it on; without the wait the copy reads too early."""
    plan = load(ALLGATHER)
    ops = ops_of(plan, 0, 0)
    waits = [i for i, op in enumerate(ops) if op.name is OpName.WAIT]
    # gpu 0 skips its wait: it returns while gpu 1 may still write into its output
    rep = check_plan(with_ops(plan, 0, 0, [op for i, op in enumerate(ops) if i not in waits]))
    assert "unbalanced-signal" in rep.codes()


def test_dropping_a_signal_deadlocks_naming_gpu_tb_and_op() -> None:
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 1, 0)
    last_signal = max(i for i, op in enumerate(ops) if op.name is OpName.SIGNAL)
    rep = check_plan(with_ops(plan, 1, 0, ops[:last_signal] + ops[last_signal + 1:]))
    assert rep.codes() == ["deadlock"]
    assert "gpu 0 tb 0 op 6 (wait) never completes: it waits for signal 2 on memory channel 0 from gpu 1, " \
           "which sends 1" in errors(rep)


def test_swapping_a_channel_index_deadlocks() -> None:
    """tb 0 of gpu 0 signals and waits on the channel tb 1 uses: both tbs wait on one channel."""
    plan = load(ALLREDUCE)
    g = plan.gpus[0]
    tb0 = g.threadblocks[0]
    other = g.threadblocks[1].channels[0].channel_ids
    broken = replace(tb0, channels=(TbChannels(ChannelType.MEMORY, other),))
    gpus = list(plan.gpus)
    gpus[0] = replace(g, threadblocks=(broken,) + g.threadblocks[1:])
    rep = check_plan(replace(plan, gpus=tuple(gpus)))
    assert "deadlock" in rep.codes()


def test_more_than_64_ops_in_a_threadblock() -> None:
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 0, 0)
    rep = check_plan(with_ops(plan, 0, 0, ops + [Op(OpName.NOP)] * (65 - len(ops))))
    assert "op-limit" in rep.codes()
    assert "gpu 0 tb 0 has 65 ops" in errors(rep)


def test_zero_input_chunks() -> None:
    plan = load(ALLGATHER)
    rep = check_plan(replace(plan, gpus=tuple(replace(g, input_chunks=0) for g in plan.gpus)))
    assert "zero-chunks" in rep.codes()
    assert rep.info["simulated"] is False


def test_overlapping_writes_from_two_gpus() -> None:
    """gpu 1 puts into the same output chunk of gpu 0 that gpu 0 puts its own data from: a write into a
    peer's buffer the peer may still be reading, and wrong data."""
    plan = load(ALLGATHER)
    ops = ops_of(plan, 1, 0)
    put = next(i for i, op in enumerate(ops) if op.name is OpName.PUT)
    bad = replace(ops[put], dst_buff=(RemoteBuff(0, 0, 1),))
    rep = check_plan(with_ops(plan, 1, 0, ops[:put] + [bad] + ops[put + 1:]))
    # which of the two unordered accesses the simulation meets second decides how the race is worded
    assert "race-read" in rep.codes() and "wrong-data" in rep.codes()
    assert "gpu 0 tb 0 op 5 (put) reads gpu 0 output chunk 0 that gpu 1 tb 0 op 5 (put) writes: nothing orders " \
           "the write first" in errors(rep)


def test_a_put_to_the_wrong_chunk_is_wrong_data() -> None:
    plan = load(ALLGATHER)
    ops = ops_of(plan, 0, 0)
    put = next(i for i, op in enumerate(ops) if op.name is OpName.PUT)
    bad = replace(ops[put], dst_buff=(RemoteBuff(0, 1, 1),))
    rep = check_plan(with_ops(plan, 0, 0, ops[:put] + [bad] + ops[put + 1:]))
    assert "wrong-data" in rep.codes()
    assert "gpu 1 output chunk 0: expected in[0][0], found" in errors(rep)


def test_reading_before_the_wait_is_a_race() -> None:
    """Swap gpu 1's wait and its rres: it reduces gpu 0's data before gpu 0 says it is ready."""
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 1, 0)
    names = [op.name for op in ops]
    i = names.index(OpName.RELAXED_WAIT)
    j = names.index(OpName.READ_REDUCE_SEND)
    ops[i], ops[j] = ops[j], ops[i]
    rep = check_plan(with_ops(plan, 1, 0, ops))
    # in the first launch gpu 0's input is already there; in the next one gpu 1 reads it before gpu 0's
    # application has written it
    assert rep.codes() == ["race-next-launch"]
    assert "gpu 1 tb 0 op 1 (rres) in the next launch reads gpu 0 input/output chunk 8 that the application writing " \
           "gpu 0's next input after the call writes" in errors(rep)


def test_an_op_with_eleven_sources() -> None:
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 0, 0)
    j = next(i for i, op in enumerate(ops) if op.name is OpName.READ_REDUCE_SEND)
    srcs = ops[j].srcs + (RemoteBuff(0, 0, 1),) * 10
    rep = check_plan(with_ops(plan, 0, 0, ops[:j] + [replace(ops[j], src_buff=srcs)] + ops[j + 1:]))
    assert "op-buffers" in rep.codes()
    assert "has 12 entries in src_buff: an op holds 10" in errors(rep)


def test_an_op_with_nine_sources_fits_v010_only() -> None:
    """v0.10 holds 2 local + 8 channel entries per list; earlier v0.8+ sources hold 8."""
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 0, 0)
    j = next(i for i, op in enumerate(ops) if op.name is OpName.READ_REDUCE_SEND)
    srcs = ops[j].srcs + (RemoteBuff(0, 0, 1),) * (9 - len(ops[j].srcs))
    rep = check_plan(with_ops(plan, 0, 0, ops[:j] + [replace(ops[j], src_buff=srcs)] + ops[j + 1:]))
    assert "op-buffers" not in rep.codes()
    warned = [f for f in rep.findings if f.code == "op-buffers-before-v010"]
    assert len(warned) == 1 and warned[0].severity == "warning"
    assert "has 9 entries in src_buff: v0.10 holds 10, but MSCCL++ sources before it hold 8" in warned[0].message


def test_pws_on_a_memory_channel_sends_no_signal() -> None:
    """The kernel's put-with-signal only copies on memory channels: the peer's wait never returns."""
    plan = load(ALLGATHER)
    ops = ops_of(plan, 0, 0)
    put = next(i for i, op in enumerate(ops) if op.name is OpName.PUT)
    sig = next(i for i, op in enumerate(ops) if op.name is OpName.SIGNAL)
    fused = replace(ops[put], name=OpName.PUT_WITH_SIGNAL, channel_ids=(0,))
    new = [op for i, op in enumerate(ops) if i != sig]
    new[put] = fused
    rep = check_plan(with_ops(plan, 0, 0, new))
    assert "deadlock" in rep.codes()
    assert any(f.code == "pws-memory" for f in rep.findings)


def test_get_reads_the_peer_at_the_destination_index() -> None:
    """get copies peer[dst.index] into local[src.index]: with different indices the data lands elsewhere."""
    plan = load("test/executor-tests/execution-plans/reduce.json")
    ops = ops_of(plan, 0, 0)
    j = next(i for i, op in enumerate(ops) if op.name is OpName.GET)
    src = ops[j].srcs[0]
    assert isinstance(src, RemoteBuff)
    swapped = replace(ops[j], dst_buff=(LocalBuff(ops[j].dsts[0].type, 3, 1),))  # type: ignore[union-attr]
    rep = check_plan(with_ops(plan, 0, 0, ops[:j] + [swapped] + ops[j + 1:]))
    # the peer is read at chunk 3 (the destination's index), not at chunk 1 that src_buff names
    assert "gpu 0 tb 0 op 7 (get) reads gpu 1 scratch chunk 3" in errors(rep)
    assert "wrong-data" in rep.codes()


# ---------------------------------------------------------------- the command line
def test_cli_checks_plans_by_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.plan"           # the suffix does not matter: the content is JSON
    good.write_text(write_plan(load(ALLGATHER)))
    assert main(["check", str(good)]) == 0
    assert "PASS" in capsys.readouterr().out
    plan = load(ALLREDUCE)
    ops = ops_of(plan, 1, 0)
    last_signal = max(i for i, op in enumerate(ops) if op.name is OpName.SIGNAL)
    bad = tmp_path / "bad.json"
    bad.write_text(write_plan(with_ops(plan, 1, 0, ops[:last_signal] + ops[last_signal + 1:])))
    assert main(["check", "--json", str(good), str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [r["ok"] for r in out] == [True, False]
    assert out[1]["dialect"] == "mscclpp"
    assert out[1]["findings"][-1]["code"] == "deadlock"


def test_cli_unreadable_plan_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", "collective": "allreduce"')
    assert main(["check", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err and "Traceback" not in err


def test_double_buffering_with_plain_access_to_a_peer_scratch() -> None:
    """Under use_double_scratch_buffer the owner's scratch accesses move to the second half every other
    launch; rres and get reach a peer's scratch through its registered memory, which stays at the first."""
    plan = load("test/executor-tests/execution-plans/reduce.json")
    rep = check_plan(replace(plan, use_double_scratch_buffer=True))
    assert rep.codes() == ["uninitialised-read", "wrong-data"]
    assert "gpu 0 tb 0 op 6 (rres) reads gpu 1 scratch chunk 0, which nothing has written: with " \
           "use_double_scratch_buffer the owner works in the second half" in errors(rep)


def test_pipeline_iterations_overflow_16_bits() -> None:
    """The kernel counts pipeline iterations in a uint16_t: a tiny unit_size wraps the count."""
    plan = load("more/repo_executor-tests_reduce_nvls_pipeline.json")
    ops = ops_of(plan, 0, 0)
    k = next(i for i, op in enumerate(ops) if op.name is OpName.PIPELINE)
    assert ops[k].iter_context is not None
    tiny = replace(ops[k], iter_context=replace(ops[k].iter_context, unit_size=16))
    rep = check_plan(with_ops(plan, 0, 0, ops[:k] + [tiny] + ops[k + 1:]))
    assert "pipeline-iterations" in rep.codes()
    assert "the kernel counts them in 16 bits" in errors(rep)


def broadcast_plan(preamble: bool, copy: bool = True) -> Plan:
    """gpu 0 broadcasts its one chunk to gpu 1 (out of place), built from the model directly."""
    from collc.compiler.mscclpp.plan import (BufferType, Channel, Gpu, Protocol, RemoteBuffer, TbRemoteBuffers,
                                     Threadblock)
    mem = ChannelType.MEMORY
    chans = (TbChannels(mem, (0,)),)
    sig, wait = Op(OpName.SIGNAL, channel_ids=(0,), channel_type=mem), Op(OpName.WAIT, channel_ids=(0,),
                                                                          channel_type=mem)
    put = Op(OpName.PUT, src_buff=(LocalBuff(BufferType.INPUT, 0, 1),), dst_buff=(RemoteBuff(0, 0, 1),),
             channel_type=mem)
    cpy = Op(OpName.COPY, src_buff=(LocalBuff(BufferType.INPUT, 0, 1),),
             dst_buff=(LocalBuff(BufferType.OUTPUT, 0, 1),))
    ops0 = ([wait, Op(OpName.NOP)] if preamble else []) + [put] + ([cpy] if copy else []) + [Op(OpName.NOP), sig]
    ops1 = ([sig] if preamble else []) + [wait]
    g0 = Gpu(0, 1, 1, 0, (Threadblock(0, tuple(ops0), chans, (TbRemoteBuffers(mem, (0,)),)),),
             (Channel(mem, (1,)),), (RemoteBuffer(1, BufferType.OUTPUT, (mem,)),))
    g1 = Gpu(1, 1, 1, 0, (Threadblock(0, tuple(ops1), chans, ()),), (Channel(mem, (0,)),), ())
    return Plan("bcast", "broadcast", Protocol.SIMPLE, False, (g0, g1), max_message_size=2 ** 30)


def test_a_broadcast_built_from_the_model_passes_with_its_root_found() -> None:
    plan = broadcast_plan(preamble=True)
    assert read_plan(write_plan(plan)) == plan
    rep = check_plan(plan)
    assert rep.ok, errors(rep)
    assert rep.info["root"] == 0


def test_a_broadcast_without_a_ready_signal_overwrites_the_next_output_early() -> None:
    """Without gpu 1 saying it is ready, gpu 0's next put can land while gpu 1's application still reads
    the previous result."""
    rep = check_plan(broadcast_plan(preamble=False))
    assert rep.codes() == ["race-next-launch"]
    assert "gpu 0 tb 0 op 0 (put) in the next launch overwrites gpu 1 output chunk 0 that the application " \
           "reading gpu 1's output after the call may still be reading" in errors(rep)


def test_a_broadcast_that_forgets_the_root_copy() -> None:
    rep = check_plan(broadcast_plan(preamble=True, copy=False))
    assert rep.codes() == ["wrong-data"]
    assert "gpu 0 output chunk 0: expected in[0][0], found nothing (root 0, the closest of all roots)" in errors(rep)


def test_randomly_broken_plans_get_a_verdict_never_a_crash() -> None:
    """Deleted, swapped and shifted ops, toggled placement: the checker reports, it does not raise."""
    import random

    from tests._plan_corpus import plan_files

    files = [p for p in plan_files() if name(p) not in UNREADABLE][:12]
    if not files:
        pytest.skip(missing("corpora", "mscclpp-plans"))
    rng = random.Random(20)
    plans = [read_plan(p) for p in files]
    for _ in range(60):
        plan = rng.choice(plans)
        g = rng.randrange(plan.nranks)
        tbs = plan.gpus[g].threadblocks
        t = rng.randrange(len(tbs))
        ops = list(tbs[t].ops)
        i = rng.randrange(len(ops))
        roll = rng.random()
        if roll < 0.35:
            del ops[i]
        elif roll < 0.7:
            j = rng.randrange(len(ops))
            ops[i], ops[j] = ops[j], ops[i]
        elif ops[i].src_buff:
            ops[i] = replace(ops[i], src_buff=tuple(replace(b, index=b.index + 1) for b in ops[i].srcs))
        else:
            plan = replace(plan, inplace=not plan.inplace,
                           use_double_scratch_buffer=not plan.use_double_scratch_buffer)
        rep = check_plan(with_ops(plan, g, t, ops))
        assert isinstance(rep.ok, bool)
        assert all("\n" not in f.message for f in rep.findings)
