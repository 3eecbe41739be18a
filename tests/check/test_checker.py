"""The checker behind ``collc check`` (collc.check): corpus verdicts and hand-made XMLs.

Hand-made files are small XML strings (2-4 gpus).  ``algo()`` renders one from a
compact description so that a negative case differs from its positive twin in
exactly one place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collc.backends.msccl_xml import parse_xml
from collc.limits import Dialect
from collc.compiler.msccl.program import Proto
from collc.check import Finding, Report, buffering_model, check_parsed, check_program, size_model
from tests._corpus import corpus_files, corpus_params, is_executor_file, rel, report
from tests._shared import missing

# ======================================================================= the corpus
CHAIN = "chain of dependencies"
LEGACY_FAILURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sccl-presynth/Allgather.n16-DistributedRelayedSwitch.localDGX1_1KB.copies2.lenrelay2-steps16-gurobisol-"
    "improve-1633890614_i1_scRemote1_IBContig_h6.sccl.xml": ("dependency", (CHAIN,)),
    "sccl-presynth/Allreduce.n16-DistributedRelayedSwitch.localDGX1.copies2-steps42.chunks16-gurobisol-"
    "1633806993-allreduce-1633807120_i1_scRemote1.sccl.xml": ("dependency", (CHAIN,)),
    "sccl-presynth/Allreduce.n32-DistributedRelayedSwitch.localDGX1.copies4-steps124.chunks32-gurobisol-"
    "1633844712-allreduce-1633845033_i1_scRemote1_IBContig.sccl.xml": ("dependency", (CHAIN,)),
    "sccl-presynth/Alltoall.n8-DGX1-steps2.rounds8.chunks3.sccl.xml": ("race", ("gpu 2: tb 72", "o[64]", "tb 96")),
    "msccl_tools_lyd/allreduce_binary_tree_h_p_2nic_4gpu_p_Simple_gpu64_ins1_nchunk_16_nch_8.xml":
        ("deadlock", ("4 pieces", "hangs from ")),
    "msccl_tools_lyd/allreduce_rec_doub_halv_Simple_gpu64_ins1.xml": ("deadlock", ("32 pieces", "hangs from ")),
}


def _explain(rep: Report) -> list[str]:
    return [f"[{f.code}] {f.message[:300]}" for f in rep.errors()][:5]


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_verdict(path: Path) -> None:
    name = rel(path)
    if is_executor_file(path):
        rep = report(path, Dialect.EXECUTOR)
        assert rep.ok, _explain(rep)
        assert name not in LEGACY_FAILURES
        return
    rep = report(path, Dialect.LEGACY)
    if name not in LEGACY_FAILURES:
        assert rep.ok, _explain(rep)
        return
    code, needles = LEGACY_FAILURES[name]
    assert not rep.ok
    hits = [f for f in rep.errors() if f.code == code]
    assert hits, _explain(rep)
    assert any(all(n in f.message for n in needles) for f in hits), [f.message[:500] for f in hits[:3]]
    if code == "deadlock":
        assert re.search(r"hangs from \d+ bytes", hits[0].message), hits[0].message


@pytest.mark.parametrize("path", corpus_params("legacy"))
def test_legacy_corpus_file_fails_with_the_executor_dialect(path: Path) -> None:
    rep = report(path, Dialect.EXECUTOR)
    assert not rep.ok
    attribute = [f.message for f in rep.errors() if f.code == "attribute"]
    assert any("minBytes" in m or "outofplace" in m for m in attribute), _explain(rep)


def test_the_expected_failures_are_legacy_files_of_the_corpus() -> None:
    files = corpus_files()
    if not files:
        pytest.skip(missing("msccl-corpus"))
    legacy = {rel(p) for p in files if not is_executor_file(p)}
    assert set(LEGACY_FAILURES) <= legacy
    assert len(legacy) == 35 and len(files) - len(legacy) == 28


# ======================================================================= hand-made XML
Step = tuple[object, ...]


def st(type_: str, srcbuf: str = "i", srcoff: int = 0, dstbuf: str = "o", dstoff: int = 0, cnt: int = 1,
       depid: int = -1, deps: int = -1, hasdep: int = 0, s: int | None = None) -> Step:
    return (type_, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep, s)


def tb(send: int, recv: int, *steps: Step, chan: int = 0) -> tuple[int, int, int, tuple[Step, ...]]:
    return (send, recv, chan, steps)


def algo(coll: str, gpus: list[tuple[int, int, int, list[tuple[int, int, int, tuple[Step, ...]]]]], *,
         nchunksperloop: int = 1, inplace: int = 0, proto: str = "Simple", nchannels: int = 1,
         max_bytes: int = 0, name: str = "hand") -> str:
    """Render an executor-dialect XML; gpus: (i_chunks, o_chunks, s_chunks, tbs) per rank."""
    lines = [f'<algo name="{name}" proto="{proto}" nchannels="{nchannels}" nchunksperloop="{nchunksperloop}" '
             f'ngpus="{len(gpus)}" coll="{coll}" inplace="{inplace}" outofplace="{1 - inplace}" minBytes="0" '
             f'maxBytes="{max_bytes}">']
    for gid, (ic, oc, sc, tbs) in enumerate(gpus):
        lines.append(f'  <gpu id="{gid}" i_chunks="{ic}" o_chunks="{oc}" s_chunks="{sc}">')
        for tid, (send, recv, chan, steps) in enumerate(tbs):
            lines.append(f'    <tb id="{tid}" send="{send}" recv="{recv}" chan="{chan}">')
            for pos, (ty, sb, so, db, do, cnt, depid, deps, hasdep, s) in enumerate(steps):
                lines.append(f'      <step s="{pos if s is None else s}" type="{ty}" srcbuf="{sb}" srcoff="{so}" '
                             f'dstbuf="{db}" dstoff="{do}" cnt="{cnt}" depid="{depid}" deps="{deps}" '
                             f'hasdep="{hasdep}"/>')
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def check(text: str, dialect: Dialect = Dialect.EXECUTOR) -> Report:
    return check_parsed(parse_xml(text, "hand.xml"), dialect)


def findings(rep: Report, code: str) -> list[Finding]:
    return [f for f in rep.findings if f.code == code]


# A correct 2-rank in-place allreduce, written out literally: each rank sends its chunk
# (tb 0, which publishes its flag) and then reduces the peer's chunk into it (tb 1,
# which waits for the send so it does not overwrite the chunk being sent).
ALLREDUCE2 = """\
<algo name="ar2" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="-1" recv="1" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="-1" recv="0" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"""
GPU0_SEND = '<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>'


def allreduce2(gpu0_sends: int = 1, gpu1_sends: int = 1) -> str:
    """The same program through ``algo()``, with a configurable number of sends per rank."""
    def rank(peer: int, sends: int, recvs: int) -> tuple[int, int, int, list[tuple[int, int, int, tuple[Step, ...]]]]:
        send_steps = [st("s", "i", 0, "i", 0, hasdep=int(k == sends - 1)) for k in range(sends)]
        recv_steps = [st("rrc", "i", 0, "i", 0, depid=0, deps=sends - 1) for _ in range(recvs)]
        return (1, 0, 0, [tb(peer, -1, *send_steps), tb(-1, peer, *recv_steps)])
    return algo("allreduce", [rank(1, gpu0_sends, gpu1_sends), rank(0, gpu1_sends, gpu0_sends)],
                inplace=1, name="ar2")


def test_base_allreduce_passes() -> None:
    assert ALLREDUCE2 == allreduce2()
    rep = check(ALLREDUCE2)
    assert rep.ok, _explain(rep)
    assert rep.findings == []
    assert check(ALLREDUCE2, Dialect.LEGACY).ok
    assert check(ALLREDUCE2, Dialect.RCCL).ok


# (a) dependency target without hasdep
def test_dependency_target_without_hasdep() -> None:
    text = ALLREDUCE2.replace(GPU0_SEND, GPU0_SEND.replace('hasdep="1"', 'hasdep="0"'), 1)
    rep = check(text)
    assert not rep.ok
    dep = findings(rep, "dependency")
    assert any("gpu 0 tb 1 step 0" in f.message and "hasdep" in f.message for f in dep), _explain(rep)


def test_nop_chain_rule() -> None:
    """A nop carrying a dependency must be followed by a real step that carries one too."""
    g = [(1, 0, 0, [tb(1, -1, st("s", "i", 0, "i", 0, hasdep=1)),
                    tb(-1, 1, st("nop", "i", -1, "o", -1, cnt=0, depid=0, deps=0), st("rrc", "i", 0, "i", 0))]),
         (1, 0, 0, [tb(0, -1, st("s", "i", 0, "i", 0, hasdep=1)),
                    tb(-1, 0, st("rrc", "i", 0, "i", 0, depid=0, deps=0))])]
    rep = check(algo("allreduce", g, inplace=1))
    assert any("chain of dependencies" in f.message for f in findings(rep, "dependency")), _explain(rep)
    assert not rep.ok


def test_nop_without_dependency() -> None:
    text = ALLREDUCE2.replace(GPU0_SEND, GPU0_SEND + '\n      <step s="1" type="nop" srcbuf="i" srcoff="-1" '
                              'dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" hasdep="0"/>', 1)
    rep = check(text)
    assert any("nop without a dependency" in f.message for f in findings(rep, "dependency")), _explain(rep)


def test_dependency_on_a_missing_tb() -> None:
    text = ALLREDUCE2.replace('depid="0" deps="0"', 'depid="5" deps="0"', 1)
    rep = check(text)
    assert any("tb 5, which does not exist" in f.message for f in findings(rep, "dependency"))


# (b) FIFO capacity: both ranks send cnt chunks before receiving
def exchange(cnt: int, proto: str = "Simple", max_bytes: int = 0, extra_copies: int = 0) -> str:
    def rank(g: int) -> tuple[int, int, int, list[tuple[int, int, int, tuple[Step, ...]]]]:
        p = 1 - g
        steps = [st("s", "i", 0, "i", 0, cnt), st("r", "o", 0, "o", p * cnt, cnt), st("cpy", "i", 0, "o", g * cnt, cnt)]
        steps += [st("cpy", "i", 0, "o", g * cnt, cnt) for _ in range(extra_copies)]
        return (cnt, 2 * cnt, 0, [tb(p, p, *steps)])
    return algo("allgather", [rank(0), rank(1)], nchunksperloop=2 * cnt, proto=proto, max_bytes=max_bytes)


def test_exchange_of_three_pieces_deadlocks_with_simple() -> None:
    rep = check(exchange(3))
    dl = findings(rep, "deadlock")
    assert dl and not rep.ok, _explain(rep)
    msg = dl[0].message
    assert "2 pieces per connection" in msg and "waits for space to send" in msg
    assert "completes only with 4 pieces" in msg and "(3 at the least)" in msg


def test_exchange_of_two_pieces_passes() -> None:
    rep = check(exchange(2))
    assert rep.ok, _explain(rep)


@pytest.mark.parametrize("proto, max_bytes", [("LL", 0), ("LL128", 0), ("Simple", 6 * 1024)])
def test_exchange_of_three_pieces_fits_larger_or_small_buffers(proto: str, max_bytes: int) -> None:
    """LL holds 8 pieces; a small maxBytes window makes every step a single piece."""
    rep = check(exchange(3, proto, max_bytes))
    assert rep.ok, _explain(rep)


def test_check_without_buffering_argument_uses_the_runtime_model() -> None:
    rep = check_program(parse_xml(exchange(3)).program, Dialect.EXECUTOR)
    assert not rep.ok and findings(rep, "deadlock")


def test_receive_first_on_both_sides_never_completes() -> None:
    g = [(1, 2, 0, [tb(1, 1, st("r", "o", 1, "o", 1), st("s", "i", 0, "i", 0), st("cpy", "i", 0, "o", 0))]),
         (1, 2, 0, [tb(0, 0, st("r", "o", 0, "o", 0), st("s", "i", 0, "i", 0), st("cpy", "i", 0, "o", 1))])]
    rep = check(algo("allgather", g, nchunksperloop=2))
    dl = findings(rep, "deadlock")
    assert dl and "waits to receive from gpu 1" in dl[0].message
    assert "does not complete with any buffering" in dl[0].message


def test_dependency_cycle_never_completes() -> None:
    g = [(1, 0, 0, [tb(1, -1, st("s", "i", 0, "i", 0, depid=1, deps=0, hasdep=1)),
                    tb(-1, 1, st("rrc", "i", 0, "i", 0, depid=0, deps=0, hasdep=1))]),
         (1, 0, 0, [tb(0, -1, st("s", "i", 0, "i", 0, hasdep=1)),
                    tb(-1, 0, st("rrc", "i", 0, "i", 0, depid=0, deps=0))])]
    rep = check(algo("allreduce", g, inplace=1))
    dl = findings(rep, "deadlock")
    assert dl and "gpu 0 tb 0 step 0 (s): waits for tb 1 step 0" in dl[0].message, _explain(rep)


def test_unordered_write_is_a_race() -> None:
    text = ALLREDUCE2.replace('depid="0" deps="0"', 'depid="-1" deps="-1"', 1)  # gpu 0 reduces while it sends
    rep = check(text)
    race = findings(rep, "race")
    assert any("gpu 0: tb 1 step 0 writes i[0] with no ordering against tb 0 step 0" in f.message for f in race), \
        _explain(rep)
    assert not rep.ok


def test_races_are_listed_slot_by_slot_in_the_order_they_happen() -> None:
    """Every dependency of recursive doubling on 4 gpus dropped: reads against writes, writes
    against writes and reads, up to the listing cap."""
    golden = Path(__file__).resolve().parents[1] / "golden" / "recursive-doubling" / "allreduce-hypercube2.xml"
    text = re.sub(r'depid="\d+" deps="\d+"', 'depid="-1" deps="-1"', golden.read_text())
    race = [f.message.removeprefix("in-place: ") for f in findings(check(text), "race")]
    assert race == [
        "gpu 1: tb 2 step 0 reads i[0] with no ordering against tb 0 step 1, which writes it",
        "gpu 1: tb 3 step 0 reads i[0] with no ordering against tb 0 step 1, which writes it",
        "gpu 2: tb 2 step 0 reads i[0] with no ordering against tb 0 step 2, which writes it",
        "gpu 2: tb 3 step 0 reads i[0] with no ordering against tb 0 step 2, which writes it",
        "gpu 3: tb 1 step 1 writes i[0] with no ordering against tb 0 step 2, which writes it",
        "gpu 3: tb 2 step 0 reads i[0] with no ordering against tb 1 step 1, which writes it",
        "gpu 3: tb 3 step 0 reads i[0] with no ordering against tb 1 step 1, which writes it",
        "gpu 0: tb 0 step 1 writes i[0] with no ordering against tb 2 step 0, which reads it",
        "gpu 0: tb 0 step 1 writes i[0] with no ordering against tb 3 step 0, which reads it",
        "gpu 0: tb 1 step 2 writes i[0] with no ordering against tb 0 step 1, which writes it",
        "gpu 1: tb 1 step 2 writes i[0] with no ordering against tb 0 step 1, which writes it",
        "gpu 1: tb 1 step 2 writes i[0] with no ordering against tb 2 step 0, which reads it"]


def test_out_of_place_program_must_not_write_the_send_buffer() -> None:
    text = ALLREDUCE2.replace('inplace="1" outofplace="0"', 'inplace="0" outofplace="1"').replace(
        'o_chunks="0"', 'o_chunks="1"')
    rep = check(text)
    assert any("writes i[0], the caller's send buffer" in f.message for f in findings(rep, "data")), _explain(rep)


# (c) double reduction
def test_double_reduction() -> None:
    rep = check(allreduce2(gpu1_sends=2))
    data = findings(rep, "data")
    assert any("twice" in f.message and "gpu 0" in f.message for f in data), _explain(rep)
    assert not rep.ok


def test_missing_contribution() -> None:
    # gpu 1 never sends; gpu 0 ends with only its own chunk
    g = [(1, 0, 0, [tb(1, -1, st("s", "i", 0, "i", 0))]),
         (1, 0, 0, [tb(-1, 0, st("rrc", "i", 0, "i", 0))])]
    rep = check(algo("allreduce", g, inplace=1))
    assert any("rank 0 output chunk 0" in f.message for f in findings(rep, "data")), _explain(rep)


# (d) steps per tb
def test_65_steps_in_a_tb_break_the_limit() -> None:
    rep = check(exchange(1, extra_copies=62))
    limit = findings(rep, "limit")
    assert any("65 steps" in f.message and "64" in f.message for f in limit), _explain(rep)
    assert not rep.ok


def test_64_steps_in_a_tb_are_fine() -> None:
    rep = check(exchange(1, extra_copies=61))
    assert rep.ok, _explain(rep)


def test_legacy_runtime_allows_256_steps() -> None:
    assert check(exchange(1, extra_copies=62), Dialect.LEGACY).ok


# (e) send/receive mismatch
def test_mismatched_cnt() -> None:
    text = exchange(2).replace('type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="2" cnt="2"',
                               'type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="2" cnt="1"', 1)
    rep = check(text)
    match = findings(rep, "match")
    assert any("gpu 1 tb 0 -> gpu 0 tb 0" in f.message and "cnt 1" in f.message for f in match), _explain(rep)
    assert not rep.ok


def test_send_without_a_receiving_tb() -> None:
    text = ALLREDUCE2.replace('<tb id="1" send="-1" recv="0" chan="0">', '<tb id="1" send="-1" recv="-1" chan="0">')
    rep = check(text)
    assert findings(rep, "match") or findings(rep, "structure")
    assert not rep.ok


# (f) two tbs on one connection
def test_two_tbs_send_to_one_peer_on_one_channel() -> None:
    text = ALLREDUCE2.replace('<tb id="1" send="-1" recv="1" chan="0">', '<tb id="1" send="1" recv="1" chan="0">', 1)
    rep = check(text)
    assert any("tbs 0 and 1 both send to 1 on chan 0" in f.message for f in findings(rep, "structure")), \
        _explain(rep)
    assert not rep.ok


# (g) s attribute
def test_s_must_equal_the_position() -> None:
    text = ALLREDUCE2.replace(GPU0_SEND, GPU0_SEND.replace('s="0"', 's="1"'), 1)
    rep = check(text)
    assert any("gpu 0 tb 0 step 0" in f.message and 's="1"' in f.message for f in findings(rep, "structure")), \
        _explain(rep)
    assert not rep.ok


@pytest.mark.parametrize("old, new, code, needle", [
    ('<tb id="1" send="-1" recv="1"', '<tb id="2" send="-1" recv="1"', "structure", "contiguous"),
    ('<tb id="0" send="1" recv="-1" chan="0">', '<tb id="0" send="0" recv="-1" chan="0">', "structure",
     "send peer 0 is invalid"),
    ('<tb id="0" send="1" recv="-1" chan="0">', '<tb id="0" send="1" recv="-1" chan="1">', "structure",
     "chan 1 is outside"),
    ('srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="0"', 'srcoff="0" dstbuf="i" dstoff="1" cnt="1" depid="0"',
     "structure", "outside the 1 chunks"),
    ('dstbuf="i" dstoff="0" cnt="1" depid="-1"', 'dstbuf="x" dstoff="0" cnt="1" depid="-1"', "structure",
     "buffers must be i, o or s"),
    ('cnt="1" depid="-1"', 'cnt="72" depid="-1"', "limit", "cnt=72"),
    ('hasdep="1"', 'hasdep="2"', "attribute", "hasdep must be 0 or 1"),
    (' outofplace="0"', "", "attribute", 'lacks attribute "outofplace"'),
    ('coll="allreduce"', 'coll="reduce_scatter"', "attribute", "spells it"),
    ('nchannels="1"', 'nchannels="33"', "limit", "nchannels=33"),
    ('\n  <gpu id="1"', '\n\t<gpu id="1"', "lexical", "tab"),
])
def test_hand_made_negatives(old: str, new: str, code: str, needle: str) -> None:
    assert old in ALLREDUCE2
    rep = check(ALLREDUCE2.replace(old, new, 1))
    assert not rep.ok
    assert any(needle in f.message for f in findings(rep, code)), _explain(rep)


def test_missing_gpu_is_reported() -> None:
    text = ALLREDUCE2.replace('ngpus="2"', 'ngpus="3"')
    rep = check(text)
    assert any("ranks without a <gpu> element: [2]" in f.message for f in findings(rep, "structure"))


# (h) reduction order is a warning only
def order_allreduce3() -> str:
    """Each rank receives from its two peers in increasing order: rank 2 computes (i0+i2)+i1, the others (i0+i1)+i2."""
    gpus = []
    for g in range(3):
        a, b = [q for q in range(3) if q != g]
        gpus.append((1, 1, 0, [
            tb(a, a, st("s", "i", 0, "i", 0), st("rrc", "i", 0, "o", 0, hasdep=1)),
            tb(b, b, st("s", "i", 0, "i", 0), st("rrc", "o", 0, "o", 0, depid=0, deps=1)),
        ]))
    return algo("allreduce", gpus)


def test_reduction_order_warning_does_not_fail() -> None:
    rep = check(order_allreduce3())
    assert rep.ok, _explain(rep)
    order = findings(rep, "order")
    assert order and all(f.severity == "warning" for f in order)
    assert "different orders" in order[0].message


# ---------------------------------------------------------------------- report, size model
def test_report_json() -> None:
    rep = check(exchange(3))
    data = rep.to_json()
    assert set(data) >= {"path", "dialect", "ok", "findings", "info"}
    assert data["path"] == "hand.xml" and data["ok"] is False and data["dialect"] == "executor"
    assert {"code", "severity", "message"} == set(data["findings"][0])  # type: ignore[index]
    assert rep.info["ngpus"] == 2 and rep.info["coll"] == "allgather"


@pytest.mark.parametrize("nchunks", [1, 8, 64])
def test_size_model_pieces_at_unbounded_size(nchunks: int) -> None:
    assert size_model(Proto.SIMPLE, nchunks, None).pieces == 2
    assert size_model(Proto.LL, nchunks, None).pieces == 8
    assert size_model(Proto.LL128, nchunks, None).pieces == 8
    assert size_model(Proto.SIMPLE, nchunks, None).mac == 1


def test_size_model_small_messages_use_big_pieces() -> None:
    m = size_model(Proto.SIMPLE, 8, 8 * 1024)
    assert m.mac == 71 and m.pieces >= 2
    assert size_model(Proto.SIMPLE, 8, 1 << 34).mac == 1


def test_buffering_model() -> None:
    assert buffering_model(5).pieces == 5
